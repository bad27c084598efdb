"""Soak end to end (issue 7): mixed load for a while (static files, ranges,
keepalive and not, pipelined, HEAD) with lepus' RSS and descriptor count
sampled every second; every answer is checked, and neither figure may trend
upwards. 30 s by default; LEPUS_SOAK_SECONDS=600 for a long run."""
import os
import random
import threading
import time
import unittest

import harness
from harness import Lepus, is_sanitized, raise_fd_limit, read_response

# ASan's quarantine would show as growth (see reliability_test.py).
os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":quarantine_size_mb=16"
SECONDS = float(os.environ.get("LEPUS_SOAK_SECONDS", "30"))


class Worker(threading.Thread):
    """One kind of client, looping until stopped; counts requests and mismatches."""

    def __init__(self, server, files, kind, seed):
        super().__init__(daemon=True)
        self.server, self.files, self.kind = server, files, kind
        self.rng = random.Random(seed)
        self.requests, self.failures = 0, []
        self.stopping = threading.Event()

    def check(self, response, name, first=None, last=None):
        body = self.files[name]
        if first is None:
            ok = response.status == 200 and response.body == body
        else:
            ok = response.status == 206 and response.body == body[first:last + 1]
        if not ok:
            self.failures.append((self.kind, name, response.status, len(response.body)))
        self.requests += 1

    def run(self):
        names = sorted(self.files)
        while not self.stopping.is_set():
            try:
                getattr(self, "run_" + self.kind)(names)
            except OSError as e:
                self.failures.append((self.kind, repr(e)))
                time.sleep(0.1)

    def run_keepalive(self, names):
        with self.server.connect() as s:
            buffer = b""
            for _ in range(self.rng.randint(1, 200)):
                name = self.rng.choice(names)
                s.sendall(b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % name.encode())
                response = read_response(s, buffer=buffer)
                buffer = response.leftover
                self.check(response, name)

    def run_close(self, names):
        name = self.rng.choice(names)
        self.check(self.server.get("/" + name), name)

    def run_ranges(self, names):
        with self.server.connect() as s:
            buffer = b""
            for _ in range(50):
                name = self.rng.choice(names)
                size = len(self.files[name])
                first = self.rng.randrange(size)
                last = self.rng.randrange(first, size)
                s.sendall(b"GET /%s HTTP/1.1\r\nHost: x\r\nRange: bytes=%d-%d\r\n\r\n"
                          % (name.encode(), first, last))
                response = read_response(s, buffer=buffer)
                buffer = response.leftover
                self.check(response, name, first, last)

    def run_pipelined(self, names):
        with self.server.connect() as s:
            batch = [self.rng.choice(names) for _ in range(self.rng.randint(2, 20))]
            s.sendall(b"".join(b"GET /%s HTTP/1.1\r\nHost: x\r\n\r\n" % n.encode() for n in batch))
            buffer = b""
            for name in batch:
                response = read_response(s, buffer=buffer)
                buffer = response.leftover
                self.check(response, name)

    def run_head(self, names):
        name = self.rng.choice(names)
        with self.server.connect() as s:
            s.sendall(b"HEAD /%s HTTP/1.0\r\n\r\n" % name.encode())
            response = read_response(s, head_only=True)
            if response.status != 200 or \
                    response.header("content-length") != str(len(self.files[name])):
                self.failures.append(("head", name, response.status))
            self.requests += 1


def mean(values):
    return sum(values) / len(values)


class Soak(unittest.TestCase):
    def test_mixed_load_without_growth(self):
        raise_fd_limit(65536)
        server = Lepus(["--threads", "2"], access_log=False)
        rng = random.Random(1)
        files = {}
        for name, size in (("tiny.txt", 10), ("small.html", 2000), ("page.html", 15000),
                           ("medium.bin", 200000), ("large.bin", 3 << 20)):
            files[name] = rng.randbytes(size)
            server.write(name, files[name])
        kinds = ["keepalive", "keepalive", "close", "ranges", "pipelined", "head"]
        workers = [Worker(server, files, kind, i) for i, kind in enumerate(kinds)]
        samples = []  # (seconds since start, RSS KiB, fds)
        try:
            start = time.monotonic()
            for w in workers:
                w.start()
            while time.monotonic() - start < SECONDS:
                time.sleep(1)
                self.assertIsNone(server.proc.poll(), "lepus died")
                samples.append((time.monotonic() - start, server.rss_kib(), server.fd_count()))
            for w in workers:
                w.stopping.set()
            for w in workers:
                w.join(timeout=30)
            time.sleep(1)
            fds_after = server.fd_count()
            requests = sum(w.requests for w in workers)
            failures = [f for w in workers for f in w.failures]
            # Trend: the mean of the last third against the second (the first is warm-up).
            third = max(1, len(samples) // 3)
            middle = samples[third:2 * third]
            last = samples[-third:]
            rss_growth = mean([s[1] for s in last]) - mean([s[1] for s in middle])
            fd_growth = mean([s[2] for s in last]) - mean([s[2] for s in middle])
            bound = 24 * 1024 if is_sanitized() else 2 * 1024
            print("\nsoak: %.0f s, %d requests (%s), %d failures; RSS KiB min/max %d/%d, "
                  "last third vs middle third %+.0f KiB (bound %d); fds min/max %d/%d, "
                  "%+.1f; fds after the load %d"
                  % (SECONDS, requests, ", ".join("%s %d" % (w.kind, w.requests) for w in workers),
                     len(failures), min(s[1] for s in samples), max(s[1] for s in samples),
                     rss_growth, bound, min(s[2] for s in samples), max(s[2] for s in samples),
                     fd_growth, fds_after))
            self.assertEqual(failures[:5], [])
            self.assertGreater(requests, 100)
            self.assertLess(rss_growth, bound)
            self.assertLess(fd_growth, 20)
            # Only the listener, logs, epoll/timer/event fds and the open-file cache remain.
            self.assertLess(fds_after, 64)
        finally:
            for w in workers:
                w.stopping.set()
            server.stop(self)


if __name__ == "__main__":
    harness.main()
