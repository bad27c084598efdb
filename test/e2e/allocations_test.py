"""Allocations per request (issue 9): after warm-up, a keepalive request for a
static file makes no heap allocation at all, in any thread of lepus.

lepus runs under the LD_PRELOAD counter test/alloc/liblepus_alloc_counter.so
(LEPUS_ALLOC_SHIM, set by CTest), which counts every malloc-family call and every
operator new, including tcmalloc's. Counters are read from a shared file before and
after N requests sent one at a time on one connection.

Sanitizer builds (debug = ASan+UBSan, tsan) are skipped: the sanitizer replaces
malloc itself, and ASan refuses to start with another library preloaded first.
bench/allocations_per_request.sh prints the same figures, and where they come from.
"""
import contextlib
import time
import os
import sys
import unittest

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "alloc"))
import alloc_counts  # noqa: E402  (test/alloc, shared with the benchmark script)

SHIM = os.environ.get("LEPUS_ALLOC_SHIM", "")
REQUESTS = 2000
WARMUP = 300
ARGS = ("--threads", "1", "--no-pin", "--keepalive-requests", "1000000000")


def skip_reason():
    """Why counting cannot work in this build, or None. A missing binary or shim is a
    failure (CTest sets both), not a reason to skip."""
    harness.require_binary()
    if not SHIM or not os.path.exists(SHIM):
        raise AssertionError("LEPUS_ALLOC_SHIM is not set or missing (build target "
                             "lepus_alloc_counter; CTest sets it)")
    sanitizer = alloc_counts.sanitizer_of(harness.REAL_BINARY)
    if sanitizer:
        return ("%s build: the sanitizer replaces malloc, so the counting shim cannot "
                "interpose (run this test in the release preset)" % sanitizer)
    return None


@contextlib.contextmanager
def environment(**values):
    """Sets environment variables for the lepus started inside the block."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def wait_for(condition, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


class Counted:
    """lepus (harness.Lepus) under the counting shim."""

    def __init__(self, access_log):
        counts = os.path.join(harness.temp_dir(name="alloc"), "counts")
        self.counts_dir = os.path.dirname(counts)
        with environment(LD_PRELOAD=SHIM, LEPUS_ALLOC_COUNTS=counts):
            self.server = harness.Lepus(ARGS, access_log=access_log)
        alloc_counts.write_site(self.server.root)
        self.counters = alloc_counts.Counters(counts, self.server.proc.pid)
        # The error log's first flush (the "lepus started" line at --log-level info)
        # allocates in the logger thread; let it happen before anything is measured.
        wait_for(lambda: "lepus started" in self.server.error_log_text(), "the start-up line")

    def measure(self, case):
        return alloc_counts.measure(self.server.port, self.counters, case, REQUESTS, WARMUP)

    def cases(self):
        return {case.name: case for case in alloc_counts.cases(
            alloc_counts.etag_of(self.server.port))}

    def describe(self, difference):
        return "; ".join("%s/%d: %d" % (self.counters.thread_name(tid), tid, n)
                         for tid, n in sorted(difference.threads.items()))

    def stop(self, test):
        self.counters.close()
        self.server.stop(test)
        harness.remove_temp_dir(self.counts_dir)


class AllocationsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)

    def test_shim_sees_start_up_allocations(self):
        # Proves the counter interposes this binary's allocator (tcmalloc's operator
        # new does not go through malloc): a zero below would make every other figure
        # meaningless.
        lepus = Counted(access_log=False)
        try:
            startup = lepus.counters.snapshot()
            self.assertGreater(startup.calls["new"], 10, startup.calls)
            self.assertGreater(startup.allocations, 10, startup.calls)
        finally:
            lepus.stop(self)

    def test_keepalive_static_requests_allocate_nothing(self):
        lepus = Counted(access_log=False)
        try:
            cases = lepus.cases()
            for name in ("keepalive GET 612 B file", "keepalive GET 100 KiB file (sendfile)",
                         "keepalive 404", "keepalive 304 (If-None-Match)",
                         "keepalive Range bytes=0-99"):
                with self.subTest(case=name):
                    _, difference = lepus.measure(cases[name])
                    self.assertEqual(difference.allocations, 0,
                                     "%d allocations in %d requests (%s): run "
                                     "bench/allocations_per_request.sh --trace 20 to see where"
                                     % (difference.allocations, REQUESTS,
                                        lepus.describe(difference)))
        finally:
            lepus.stop(self)

    def test_access_log_adds_no_allocation_on_the_reactor(self):
        # The logger thread writes a batch per flush, not per request; its few
        # allocations per batch (async_logger.cc write_buffers' iovec vector) are
        # bounded here, the reactor's are zero.
        lepus = Counted(access_log=True)
        try:
            case = lepus.cases()["keepalive GET 612 B file"]
            _, difference = lepus.measure(case)
            logger = {tid: n for tid, n in difference.threads.items()
                      if lepus.counters.thread_name(tid) == "lepus-log"}
            others = difference.allocations - sum(logger.values())
            self.assertEqual(others, 0, lepus.describe(difference))
            self.assertLessEqual(sum(logger.values()), REQUESTS // 100,
                                 lepus.describe(difference))
            wait_for(lambda: len(lepus.server.access_lines()) >= REQUESTS, "the access lines")
        finally:
            lepus.stop(self)

    def test_new_connection_bound(self):
        # Today: 2 per connection: the acceptor's per-wake-up std::vector<bool>
        # (net/acceptor.cc, accept_ready) and `new HttpConnection`
        # (server/http_connection.cc, HttpConnection::open). Lower this bound as
        # they go.
        lepus = Counted(access_log=False)
        try:
            case = lepus.cases()["new connection per request (Connection: close)"]
            per_request, difference = lepus.measure(case)
            self.assertLessEqual(per_request, 2.0, lepus.describe(difference))
        finally:
            lepus.stop(self)


if __name__ == "__main__":
    harness.main()
