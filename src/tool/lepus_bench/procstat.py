"""CPU time and memory of a process tree, read from /proc.

A server is a tree (nginx's master and workers, apache's parent and children,
php-fpm's pool), so every figure sums the tree under the pid we started. On
this kernel utime+stime include the loopback TCP work done in the process's
context (softirqs run on the sending task), which is why "RPS per server core"
divides by this sum and not by wall time.
"""
import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def children_map():
    """Returns {ppid: [pid, ...]} for every process visible in /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read_stat(int(name))
        if stat is not None:
            children.setdefault(stat[1], []).append(int(name))
    return children


def tree_pids(root_pid):
    """The root and all its descendants that are alive now."""
    children = children_map()
    pids, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(children.get(pid, []))
    return pids


def cpu_sample(root_pids):
    """{pid: seconds of utime+stime (+ reaped children's)} for every tree."""
    sample = {}
    for root in root_pids:
        for pid in tree_pids(root):
            stat = _read_stat(pid)
            if stat is not None:
                # Fields 14-17 (utime stime cutime cstime): cutime/cstime keep
                # the CPU of workers that exited and were reaped meanwhile.
                sample[pid] = sum(stat[11:15]) / CLOCK_TICKS
    return sample


def cpu_seconds_between(before, after):
    """CPU seconds the trees used between two samples (new pids count fully)."""
    return sum(value - before.get(pid, 0.0) for pid, value in after.items())


def rss_bytes(root_pids):
    """Resident memory of the trees (sum of VmRSS), in bytes."""
    total = 0
    for root in root_pids:
        for pid in tree_pids(root):
            try:
                with open("/proc/%d/status" % pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1]) * 1024
                            break
            except OSError:
                pass
    return total


def _read_stat(pid):
    """Fields of /proc/PID/stat after the command name: [state, ppid, ...] as ints."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = text[text.rfind(")") + 2:].split()
    return [0] + [int(x) for x in fields[1:]]
