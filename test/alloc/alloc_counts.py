"""Allocations per request, counted by liblepus_alloc_counter.so (alloc_counter.cc).

Shared by bench/allocations_per_request.sh and test/e2e/allocations_test.py.
Standard library only. The shim maps its counters into the file named by
LEPUS_ALLOC_COUNTS; Counters reads that file while lepus runs, so a measurement is
"snapshot, N requests, snapshot", divided by N. Requests go one at a time (each
answer read before the next is sent) so every request is a separate trip through
the reactor, as with a browser on one connection.

Run as a program it is the benchmark: see main() and --help.
"""
import argparse
import collections
import mmap
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = 0x314F4C4C41504C45
KINDS = ("malloc", "calloc", "realloc", "aligned", "new", "free")
ALLOCATING = KINDS[:-1]  # free is counted but is not an allocation
HEADER = struct.Struct("<Q6QQQQ")  # magic, calls[6], trace_remaining, threads_used, dropped
TRACE_OFFSET = 8 + 8 * len(KINDS)
THREAD = struct.Struct("<iIQ")
MAX_THREADS = 256
FILE_SIZE = HEADER.size + THREAD.size * MAX_THREADS

# Strings a sanitizer build carries: its runtime library (gcc links it dynamically)
# or its init function (clang links it statically).
SANITIZER_MARKS = ((b"libasan.so", "asan"), (b"__asan_init", "asan"), (b"libtsan.so", "tsan"),
                   (b"__tsan_init", "tsan"), (b"libubsan.so", "ubsan"))


def sanitizer_of(binary):
    """The sanitizer a binary is built with ('asan', 'tsan', 'ubsan'), or None.
    The shim cannot count there: the sanitizer replaces malloc, and ASan refuses to
    start when another library is preloaded before its runtime."""
    with open(binary, "rb") as f:
        data = f.read()
    for mark, name in SANITIZER_MARKS:
        if mark in data:
            return name
    return None


class Snapshot:
    def __init__(self, calls, threads):
        self.calls = calls  # {kind: count}
        self.threads = threads  # {tid: allocations}

    @property
    def allocations(self):
        return sum(self.calls[k] for k in ALLOCATING)

    def __sub__(self, other):
        calls = {k: self.calls[k] - other.calls[k] for k in KINDS}
        threads = {tid: n - other.threads.get(tid, 0) for tid, n in self.threads.items()}
        return Snapshot(calls, {tid: n for tid, n in threads.items() if n})


class Counters:
    """The counters file of one process running under the shim."""

    def __init__(self, path, pid=None):
        self.path = path
        self.pid = pid
        self._map = None

    def _mapping(self):
        if self._map is None:
            with open(self.path, "r+b") as f:
                if os.fstat(f.fileno()).st_size < FILE_SIZE:
                    raise RuntimeError("%s is not an alloc_counter file (is the shim loaded?)"
                                       % self.path)
                self._map = mmap.mmap(f.fileno(), FILE_SIZE)
        return self._map

    def ready(self):
        try:
            return HEADER.unpack_from(self._mapping(), 0)[0] == MAGIC
        except (OSError, RuntimeError, ValueError):
            return False

    def snapshot(self):
        fields = HEADER.unpack_from(self._mapping(), 0)
        if fields[0] != MAGIC:
            raise RuntimeError("%s: bad magic (is the shim loaded?)" % self.path)
        calls = dict(zip(KINDS, fields[1:1 + len(KINDS)]))
        used = min(fields[1 + len(KINDS) + 1], MAX_THREADS)
        threads = {}
        for i in range(used):
            tid, _, allocations = THREAD.unpack_from(self._mapping(), HEADER.size + i * THREAD.size)
            threads[tid] = allocations
        return Snapshot(calls, threads)

    def request_traces(self, count):
        """The next `count` allocations write a backtrace to LEPUS_ALLOC_TRACE."""
        struct.pack_into("<Q", self._mapping(), TRACE_OFFSET, count)

    def thread_name(self, tid):
        if self.pid is None:
            return "?"
        if tid == self.pid:
            return "main"
        try:
            with open("/proc/%d/task/%d/comm" % (self.pid, tid)) as f:
                return f.read().strip()
        except OSError:
            return "gone"

    def close(self):
        if self._map is not None:
            self._map.close()
            self._map = None


# --- talking to lepus -------------------------------------------------------

class Connection:
    """One client connection that sends a request and reads its whole answer."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def exchange(self, raw, head_only=False):
        """Sends raw, returns (status, headers dict, body)."""
        self.sock.sendall(raw)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head_only or status in (204, 304) else int(headers.get("content-length", 0))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("lepus closed the connection")
        self.buffer += chunk

    def close(self):
        self.sock.close()


def request_bytes(path, headers=(), keepalive=True):
    lines = ["GET %s HTTP/1.1" % path, "Host: localhost", "User-Agent: alloc-count/1"]
    lines += list(headers)
    if not keepalive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


Case = collections.namedtuple("Case", "name path headers keepalive status")


def cases(etag):
    """The measured cases; etag is the ETag lepus gives /index.html."""
    return [
        Case("keepalive GET 612 B file", "/index.html", (), True, 200),
        Case("keepalive GET 100 KiB file (sendfile)", "/100k.bin", (), True, 200),
        Case("keepalive 404", "/missing.html", (), True, 404),
        Case("keepalive 304 (If-None-Match)", "/index.html", ("If-None-Match: " + etag,), True,
             304),
        Case("keepalive Range bytes=0-99", "/index.html", ("Range: bytes=0-99",), True, 206),
        Case("new connection per request (Connection: close)", "/index.html", (), False, 200),
    ]


def write_site(root):
    """The files the cases ask for (index.html has nginx's default 612 bytes)."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(b"x" * 611 + b"\n")
    with open(os.path.join(root, "100k.bin"), "wb") as f:
        f.write(bytes(range(256)) * 400)


def check_status(case, status):
    if status != case.status:
        raise RuntimeError("%s: status %d, expected %d" % (case.name, status, case.status))


def run_case(port, case, requests):
    """Sends `requests` requests of one case, on one connection when the case is
    keepalive, else on a new connection each; checks every status."""
    raw = request_bytes(case.path, case.headers, case.keepalive)
    connection = Connection(port) if case.keepalive else None
    try:
        for _ in range(requests):
            if connection:
                check_status(case, connection.exchange(raw)[0])
                continue
            fresh = Connection(port)
            try:
                check_status(case, fresh.exchange(raw)[0])
            finally:
                fresh.close()
    finally:
        if connection:
            connection.close()


def settle(counters, quiet=0.3, timeout=5.0):
    """Waits until the counters stop moving for `quiet` seconds (the server has
    finished the previous requests, e.g. closed connections)."""
    deadline = time.monotonic() + timeout
    last = counters.snapshot()
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = counters.snapshot()
        if now.calls != last.calls:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= quiet:
            break
    return last


def measure(port, counters, case, requests, warmup, traces=0):
    """Allocations per request of one case: warm-up, snapshot, `requests` requests on
    one connection (or one connection each), snapshot. With traces > 0 the first
    `traces` allocations of the measured part write their backtraces (see
    resolve_traces). Returns (per request, Snapshot of the difference)."""
    run_case(port, case, warmup)
    connection = None
    if case.keepalive:
        # The same connection throughout the measurement: open it and send one
        # request before the snapshot, so its accept is not counted.
        connection = Connection(port)
    try:
        raw = request_bytes(case.path, case.headers, case.keepalive)
        if connection:
            connection.exchange(raw)
        before = settle(counters)
        if traces:
            counters.request_traces(traces)
        if connection:
            for _ in range(requests):
                check_status(case, connection.exchange(raw)[0])
        else:
            run_case(port, case, requests)
        after = settle(counters)
        if traces:
            counters.request_traces(0)
    finally:
        if connection:
            connection.close()
    difference = after - before
    return difference.allocations / requests, difference


def etag_of(port):
    connection = Connection(port)
    try:
        status, headers, _ = connection.exchange(request_bytes("/index.html"))
    finally:
        connection.close()
    if status != 200 or "etag" not in headers:
        raise RuntimeError("GET /index.html: status %d, etag %r" % (status, headers.get("etag")))
    return headers["etag"]


# --- where the allocations come from ----------------------------------------

def resolve_traces(trace_path, limit=12):
    """Groups the backtraces the shim wrote by their frames. Returns
    [(count, [(function, 'file:line'), ...])], most frequent first, each backtrace
    innermost call first with inlined calls expanded (addr2line -i)."""
    try:
        with open(trace_path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    groups = collections.Counter()
    for block in text.split("@ ")[1:]:
        lines = block.strip().splitlines()
        groups[tuple(lines[1:])] += 1
    by_object = collections.defaultdict(set)
    for frames in groups:
        for frame in frames:
            obj, _, offset = frame.rpartition("+")
            by_object[obj].add(offset)
    resolved = {}
    addr2line = shutil.which("addr2line")
    for obj, offsets in by_object.items():
        for offset in offsets:
            chain = [("?", "%s+%s" % (os.path.basename(obj), offset))]
            if addr2line and os.path.exists(obj):
                out = subprocess.run([addr2line, "-f", "-C", "-i", "-e", obj, offset],
                                     capture_output=True, text=True, check=False).stdout
                pairs = out.splitlines()
                if len(pairs) >= 2:
                    chain = [(pairs[j], _short(pairs[j + 1])) for j in range(0, len(pairs) - 1, 2)]
            resolved["%s+%s" % (obj, offset)] = chain
    return [(n, [pair for frame in frames for pair in resolved.get(frame, [("?", frame)])])
            for frames, n in groups.most_common(limit)]


def allocation_site(chain):
    """(the call that allocated, the lepus frames from the innermost out)."""
    project = [(function, where) for function, where in chain if where.startswith("src/")]
    first = chain.index(project[0]) if project else 0
    via = chain[first - 1][0] if first > 0 else chain[0][0] if chain else "?"
    return via, project


def _function_name(function):
    """lepus::Acceptor::accept_ready(int) -> lepus::Acceptor::accept_ready."""
    name = function.split("(", 1)[0] if not function.startswith("std::") else function
    return name if len(name) <= 100 else name[:97] + "..."


def _short(location):
    location = re.sub(r" \(discriminator \d+\)", "", location)
    marker = "/src/"
    return location[location.index(marker) + 1:] if marker in location else location


# --- the benchmark ----------------------------------------------------------

class Server:
    """lepus under the shim, with its counters."""

    def __init__(self, binary, shim, root, tmp, extra_args, trace_path=None):
        self.counts_path = os.path.join(tmp, "counts.%d" % time.monotonic_ns())
        env = dict(os.environ, LD_PRELOAD=shim, LEPUS_ALLOC_COUNTS=self.counts_path)
        if trace_path:
            env["LEPUS_ALLOC_TRACE"] = trace_path
        cmd = [binary, root, "--listen", "127.0.0.1:0", "--threads", "1", "--no-pin",
               "--keepalive-requests", "1000000000",
               "--error-log", os.path.join(tmp, "error.log")] + list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, text=True)
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            self.proc.kill()
            raise RuntimeError("lepus did not start: %r %s" % (line, self.proc.stderr.read()))
        self.port = int(match.group(1))
        self.counters = Counters(self.counts_path, self.proc.pid)
        if not self.counters.ready():
            self.stop()
            raise RuntimeError("the shim did not create %s: not loaded?" % self.counts_path)

    def stop(self):
        self.counters.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


def main():
    parser = argparse.ArgumentParser(
        description="Allocations per request of lepus, counted by an LD_PRELOAD shim.")
    parser.add_argument("--lepus", required=True, help="the lepus binary (release build)")
    parser.add_argument("--shim", required=True, help="liblepus_alloc_counter.so")
    parser.add_argument("--requests", type=int, default=10000, help="measured requests per case")
    parser.add_argument("--warmup", type=int, default=1000, help="requests before measuring")
    parser.add_argument("--io", default=None, help="pass --io IO to lepus (epoll or uring)")
    parser.add_argument("--trace", type=int, default=0, metavar="N",
                        help="also record the backtraces of the first N measured allocations "
                        "of each case and show where they come from")
    args = parser.parse_args()
    sanitizer = sanitizer_of(args.lepus)
    if sanitizer:
        sys.exit("allocations_per_request: %s is a %s build: the sanitizer replaces malloc; "
                 "use the release preset" % (args.lepus, sanitizer))
    tmp = tempfile.mkdtemp(prefix="lepus-alloc-")
    try:
        root = os.path.join(tmp, "www")
        write_site(root)
        print("lepus %s, one reactor (--threads 1 --no-pin --keepalive-requests 1000000000), "
              "%d requests per case after %d warm-up requests, one request in flight at a time"
              % (args.lepus, args.requests, args.warmup))
        engine = ["--io", args.io] if args.io else []
        for label, log_args in (("--access-log off", ["--access-log", "off"]),
                                ("access log to a file", ["--access-log",
                                                          os.path.join(tmp, "access.log")])):
            log_args = engine + log_args
            label = " ".join(engine + [label])
            trace_path = os.path.join(tmp, "trace.txt") if args.trace else None
            server = Server(args.lepus, args.shim, root, tmp, log_args, trace_path)
            try:
                startup = server.counters.snapshot()
                print("\n## %s (start-up: %d allocations: %s)" % (
                    label, startup.allocations,
                    ", ".join("%s %d" % (k, startup.calls[k]) for k in ALLOCATING)))
                print("| case | allocations per request | frees per request | by thread |")
                print("|---|---:|---:|---|")
                etag = etag_of(server.port)
                traces = []
                for case in cases(etag):
                    if trace_path:
                        open(trace_path, "w").close()  # the shim appends to its open fd
                    per_request, difference = measure(server.port, server.counters, case,
                                                      args.requests, args.warmup, args.trace)
                    threads = ", ".join(
                        "%s/%d: %.4f" % (server.counters.thread_name(tid), tid, n / args.requests)
                        for tid, n in sorted(difference.threads.items())) or "-"
                    print("| %s | %.4f | %.4f | %s |" % (
                        case.name, per_request, difference.calls["free"] / args.requests,
                        threads))
                    sys.stdout.flush()
                    if trace_path and difference.allocations:
                        traces.append((case.name, resolve_traces(trace_path)))
                for name, groups in traces:
                    print("\n### where the allocations of \"%s\" come from (%s)" % (name, label))
                    for n, chain in groups:
                        via, project = allocation_site(chain)
                        print("- %d of the traced allocations, in %s" % (n, _function_name(via)))
                        for function, where in project or chain[:8]:
                            print("    %s  (%s)" % (where, _function_name(function)))
            finally:
                server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
