"""FastCGI faults under load (issue 7): php-fpm killed and restarted while
clients keep asking, php-fpm restarted gracefully, scripts slower than
--fastcgi-timeout, and a backend that sends garbage, closes mid-response or
never answers (test/fastcgi's fcgi_responder), all under concurrent load.
Every request must end (an answer or a close, never a hang), static files
must keep being served, PHP must come back after a restart, and lepus must
not leak descriptors or crash (stop() checks the sanitizers).

Needs php-fpm (skipped, saying so, without it: an optional system package) and
fcgi_responder (through $FCGI_RESPONDER or next to the lepus binary's build
tree; a missing one fails the test, as it is built with the tests)."""
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

import harness
from harness import BINARY, Lepus, read_response, recv_until
import phpfpm

POOL = 4


def find_responder():
    path = os.environ.get("FCGI_RESPONDER")
    if path:
        return path
    if BINARY:
        build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(BINARY))))
        candidate = os.path.join(build, "test", "fastcgi", "fcgi_responder")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def children_of(pid):
    """Pids whose parent is pid (from /proc/*/stat)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def kill_php_fpm(fpm):
    """SIGKILL to the php-fpm master and its workers: a crash, not a shutdown."""
    master = fpm.proc.pid
    for pid in [master] + children_of(master):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    fpm.proc.wait(timeout=10)


def fd_kinds(server):
    """(sockets, other descriptors) held by lepus. Sockets are what a fault would
    leak; the others are the listener-independent rest (epoll, timerfds, logs,
    and the open-file cache, which keeps each script and file it served open)."""
    sockets = other = 0
    directory = "/proc/%d/fd" % server.proc.pid
    for fd in os.listdir(directory):
        try:
            target = os.readlink(os.path.join(directory, fd))
        except OSError:
            continue
        if target.startswith("socket:"):
            sockets += 1
        else:
            other += 1
    return sockets, other


def wait_for_sockets(server, limit, timeout=10):
    """Socket count once it is at most limit, or after timeout seconds."""
    deadline = time.monotonic() + timeout
    while fd_kinds(server)[0] > limit and time.monotonic() < deadline:
        time.sleep(0.1)
    return fd_kinds(server)


def ask(port, path, timeout=20):
    """One HTTP/1.0 request; returns (status, body), ("closed", b"") when lepus
    closed without an answer, or ("truncated", b"") when the connection ended
    before the Content-Length the head announced. A hang raises socket.timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path.encode())
        try:
            head = recv_until(s, b"\r\n\r\n")
        except ConnectionError:
            return "closed", b""
        try:
            r = read_response(s, buffer=head)
        except ConnectionError:
            return "truncated", b""
        return r.status, r.body


class Load(threading.Thread):
    """Asks for `path` in a loop until stopped; records (time, status, body)."""

    def __init__(self, port, path):
        super().__init__(daemon=True)
        self.port, self.path = port, path
        self.results, self.errors = [], []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                status, body = ask(self.port, self.path)
                self.results.append((time.monotonic(), status, body))
            except OSError as e:  # socket.timeout included: a hang
                self.errors.append(repr(e))
            self.stopping.wait(0.01)

    def between(self, start, end):
        return [(status, body) for t, status, body in self.results if start <= t < end]


def populate(server):
    for name in os.listdir(phpfpm.PHP_DIR):
        shutil.copy(os.path.join(phpfpm.PHP_DIR, name), server.root)
    server.write("static.txt", "static file\n")


@unittest.skipUnless(phpfpm.find_php_fpm(), "php-fpm not installed (apt-get install php-fpm)")
class PhpFpmFaultsUnderLoad(unittest.TestCase):
    def setUp(self):
        self.fpm = phpfpm.PhpFpm(children=4)
        self.addCleanup(self.fpm.cleanup)
        self.server = Lepus(["--fastcgi", self.fpm.address, "--threads", "2",
                             "--fastcgi-pool", str(POOL), "--fastcgi-timeout", "1s"])
        self.addCleanup(self.server.stop, self)
        populate(self.server)
        self.assertEqual(ask(self.server.port, "/static.txt")[0], 200)
        # Before any FastCGI connection, once that client's connection is closed.
        self.fds_static = wait_for_sockets(self.server, 1)
        self.loads = [Load(self.server.port, "/hello.php") for _ in range(4)] + \
                     [Load(self.server.port, "/static.txt") for _ in range(2)]
        self.addCleanup(self.stop_load)

    def stop_load(self):
        for load in self.loads:
            load.stopping.set()
        for load in self.loads:
            load.join(timeout=30)

    def php(self):
        return self.loads[:4]

    def static(self):
        return self.loads[4:]

    def wait_for_php(self, timeout=15):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ask(self.server.port, "/hello.php")[0] == 200:
                return True
            time.sleep(0.1)
        return False

    def check_end(self, name, php_during_fault):
        self.stop_load()
        errors = [e for load in self.loads for e in load.errors]
        static = [s for load in self.static() for _, s, _ in load.results]
        php = [(s, b) for load in self.php() for _, s, b in load.results]
        # lepus notices closed backend connections and drops them: at most the pool remains.
        fds = wait_for_sockets(self.server, self.fds_static[0] + POOL)
        print("\n%s: %d PHP answers (during the fault: %s), %d static answers (%s), %d hung or "
              "failed requests; (sockets, other fds) %s without FastCGI, %s after (pool %d)"
              % (name, len(php), summary(php_during_fault), len(static),
                 summary([(s, b"") for s in static]),
                 len(errors), self.fds_static, fds, POOL))
        self.assertEqual(errors[:3], [])
        self.assertEqual(set(static), {200}, "static files must not suffer")
        for status, body in php:
            if status == 200:
                self.assertEqual(body, b"hello 5050")
        self.assertLessEqual(fds[0], self.fds_static[0] + POOL, "sockets leaked")
        self.assertLessEqual(fds[1], self.fds_static[1] + 3, "descriptors leaked")  # 2 scripts
        # php-fpm may still be working through requests lepus gave up on (slow.php):
        # PHP answers again once it has.
        self.assertTrue(self.wait_for_php(timeout=30), "PHP did not answer after the fault")

    def test_php_fpm_killed_under_load_then_restarted(self):
        for load in self.loads:
            load.start()
        time.sleep(1)
        killed = time.monotonic()
        kill_php_fpm(self.fpm)
        time.sleep(2)
        restarted = time.monotonic()
        # Nothing listens any more: every PHP request in this window fails fast.
        during = [r for load in self.php() for r in load.between(killed + 0.2, restarted)]
        self.assertTrue(during, "no PHP request completed while php-fpm was down")
        self.assertTrue(all(status in (502, 503, 504) for status, _ in during),
                        summary(during))
        self.fpm.stop()
        self.fpm.start()
        self.assertTrue(self.wait_for_php(), "PHP did not come back after the restart")
        time.sleep(1)
        self.check_end("php-fpm SIGKILL under load", during)

    def test_php_fpm_graceful_restart_under_load(self):
        for load in self.loads:
            load.start()
        time.sleep(1)
        start = time.monotonic()
        self.fpm.restart()  # SIGQUIT: workers finish their request, then a new master
        self.assertTrue(self.wait_for_php(), "PHP did not come back after the restart")
        during = [r for load in self.php() for r in load.between(start, time.monotonic())]
        self.assertTrue(all(status in (200, 502, 503, 504) for status, _ in during),
                        summary(during))
        time.sleep(1)
        self.check_end("php-fpm graceful restart under load", during)

    def test_scripts_slower_than_the_timeout_under_load(self):
        slow = [Load(self.server.port, "/slow.php?ms=3000") for _ in range(2)]
        self.loads += slow
        for load in self.loads:
            load.start()
        time.sleep(4)
        slow_statuses = [s for load in slow for _, s, _ in load.results]
        # The slow ones are cut at --fastcgi-timeout; the workers they hold make
        # others wait or be refused, but nobody hangs.
        self.assertTrue(slow_statuses and set(slow_statuses) <= {504, 503}, slow_statuses)
        php = [(s, b) for load in self.php() for _, s, b in load.results]
        self.assertTrue(all(status in (200, 503, 504) for status, _ in php), summary(php))
        self.loads = [load for load in self.loads if load not in slow]
        for load in slow:
            load.stopping.set()
            load.join(timeout=30)
        self.check_end("slow scripts (3 s) with --fastcgi-timeout 1s under load",
                       [(s, b"") for s in slow_statuses])


class Responder:
    """fcgi_responder on a unix socket in a temporary directory."""

    def __init__(self):
        binary = find_responder()
        if not binary:
            raise AssertionError("fcgi_responder not found (built with the tests in "
                                 "test/fastcgi; or set FCGI_RESPONDER)")
        self.tmp = harness.temp_dir(name="responder")
        self.proc = subprocess.Popen(
            [binary, "--listen", "unix:" + os.path.join(self.tmp, "r.sock")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            raise RuntimeError("fcgi_responder did not start: %r" % line)
        self.address = line[1]

    def stop(self):
        self.proc.terminate()
        self.proc.communicate(timeout=10)
        harness.remove_temp_dir(self.tmp)


class MisbehavingBackendUnderLoad(unittest.TestCase):
    # mode -> the answers allowed for it
    MODES = {
        "echo": {200},
        "slow&ms=50": {200},
        "garbage": {502},
        # The backend sends a head and part of the body, then vanishes: 502 when
        # lepus had not begun the answer, else the answer ends early.
        "close": {502, "truncated"},
        "never": {504},
        "big&size=300000": {200},
    }

    def test_mixed_misbehaviour_from_concurrent_clients(self):
        responder = Responder()
        self.addCleanup(responder.stop)
        server = Lepus(["--fastcgi", responder.address, "--threads", "2", "--fastcgi-pool",
                        str(POOL), "--fastcgi-timeout", "1s"])
        self.addCleanup(server.stop, self)
        server.write("x.php", "never read by the responder")
        server.write("static.txt", "static file\n")
        self.assertEqual(ask(server.port, "/static.txt")[0], 200)
        fds_static = wait_for_sockets(server, 1)  # with static.txt in the open-file cache
        loads = [Load(server.port, "/x.php?mode=" + mode) for mode in self.MODES for _ in (0, 1)]
        loads.append(Load(server.port, "/static.txt"))
        for load in loads:
            load.start()
        time.sleep(6)
        for load in loads:
            load.stopping.set()
        for load in loads:
            load.join(timeout=30)
        counts = {}
        for load in loads[:-1]:
            mode = load.path.split("mode=")[1]
            for _, status, body in load.results:
                counts[(mode, status)] = counts.get((mode, status), 0) + 1
                self.assertIn(status, self.MODES[mode], "mode %s" % mode)
                if mode.startswith("big") and status == 200:
                    self.assertEqual(len(body), 300000)
            self.assertEqual(load.errors, [], "mode %s hung or failed" % mode)
        static = [s for _, s, _ in loads[-1].results]
        fds = wait_for_sockets(server, fds_static[0] + POOL)
        print("\nmisbehaving backend under load: %s; static %s; (sockets, other fds) %s without "
              "FastCGI, %s after"
              % (", ".join("%s %s x%d" % (m, s, n) for (m, s), n in sorted(counts.items(),
                                                                         key=str)),
                 summary([(s, b"") for s in static]), fds_static, fds))
        self.assertEqual(set(static), {200})
        for mode in self.MODES:
            self.assertTrue(any(m == mode for m, _ in counts), "no answer for mode %s" % mode)
        self.assertLessEqual(fds[0], fds_static[0] + POOL, "sockets leaked")
        self.assertLessEqual(fds[1], fds_static[1] + 1, "descriptors leaked")  # x.php
        self.assertEqual(ask(server.port, "/x.php?mode=echo")[0], 200)


def summary(results):
    """ "200 x12, 502 x3" for a list of (status, body)."""
    counts = {}
    for status, _ in results:
        counts[status] = counts.get(status, 0) + 1
    return ", ".join("%s x%d" % (k, v) for k, v in sorted(counts.items(), key=str)) or "none"


if __name__ == "__main__":
    harness.main()
