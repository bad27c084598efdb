"""Issue 14's fixes in the connection (the HTTP/1.1 engine), end to end against
the real lepus binary; protocol_fixes_test.py has the others.

  finding 2   a fresh connection that sends nothing is closed at the header
              timeout (from accept, as nginx's client_header_timeout), not
              held for the keepalive timeout
  finding 3   a partial pipelined head waits under the header timeout, which
              starts as soon as its first bytes are buffered
  finding 4   a chunked body whose first chunk is over --max-body-size is 413
              at once, without 100 Continue
  finding 8   a head within the parser's limits (leading empty lines, a long
              request line, 30 KB of fields) is answered, never reset
  finding 9   a backend response shorter than its Content-Length, before
              anything was sent, is a 502 (fcgi_responder mode=short)
  (finding 11, a 100 Continue cut by a full socket, is covered by
  test/http/http1_engine_test.cc ContinueWaitsForRoomAndIsNeverCut: it needs a
  socket buffer filled on purpose, which only the engine's own test can do.)

The timeouts here are short (1-2 s) against a long keepalive timeout (60 s):
a connection still open well after the header timeout fails the test.
"""
import time
import unittest

import harness
from fastcgi_test import Responder
from harness import BINARY, Lepus, is_closed, read_response


def require_binary():
    if not BINARY:
        raise AssertionError("LEPUS_BINARY is not set")


class Timeouts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_binary()
        cls.server = Lepus(["--header-timeout", "1s", "--keepalive-timeout", "60s"])
        cls.server.write("index.html", "hello")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def test_silent_fresh_connection_is_closed_at_the_header_timeout(self):
        with self.server.connect() as s:
            self.assertTrue(is_closed(s, timeout=8), "held beyond the header timeout")

    def test_partial_pipelined_head_is_closed_at_the_header_timeout(self):
        with self.server.connect() as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nX: ")
            first = read_response(s)
            self.assertEqual((first.status, first.body), (200, b"hello"))
            self.assertTrue(is_closed(s, timeout=8), "the partial head waited for keepalive")

    def test_idle_keepalive_connection_is_not_cut_at_the_header_timeout(self):
        with self.server.connect() as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            self.assertEqual(read_response(s).status, 200)
            # Idle between requests: the keepalive timeout (60 s) applies, not the header one.
            self.assertFalse(is_closed(s, timeout=2.5))
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            self.assertEqual(read_response(s).status, 200)


class Limits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_binary()
        cls.server = Lepus(["--max-body-size", "100k"])
        cls.server.write("index.html", "hello")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def test_oversized_first_chunk_is_413_without_continue(self):
        with self.server.connect() as s:
            s.sendall(b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n30d40\r\n")
            r = read_response(s)
            self.assertEqual(r.status, 413)
            self.assertTrue(is_closed(s, timeout=5))

    def test_largest_head_the_parser_allows_is_answered(self):
        head = (b"\r\n" * 2048 + b"GET /" + b"a" * 8100 + b" HTTP/1.1\r\nHost: a\r\n" +
                b"".join(b"X-Field-%02d: %s\r\n" % (i, b"v" * 1000) for i in range(31)) + b"\r\n")
        # Over the 41,984-byte input buffer lepus had before the fix.
        self.assertGreater(len(head), 43000)
        with self.server.connect() as s:
            s.sendall(head)
            r = read_response(s)
        self.assertEqual(r.status, 404)

    def test_head_over_the_limits_gets_a_status_not_a_reset(self):
        head = (b"GET / HTTP/1.1\r\nHost: a\r\n" +
                b"".join(b"X-Field-%02d: %s\r\n" % (i, b"v" * 1000) for i in range(40)) + b"\r\n")
        with self.server.connect() as s:
            s.sendall(head)
            r = read_response(s)
        self.assertEqual(r.status, 431)


class ShortBackendResponse(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_binary()
        cls.responder = Responder()
        cls.server = Lepus(["--fastcgi", cls.responder.address, "--fastcgi-ext", ".cgi"])
        cls.server.write("x.cgi", "")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())
        cls.responder.stop()

    def test_short_response_before_the_head_is_502(self):
        with self.server.connect() as s:
            s.sendall(b"GET /x.cgi?mode=short HTTP/1.1\r\nHost: a\r\n\r\n"
                      b"GET /x.cgi?mode=status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            first = read_response(s)
            self.assertEqual(first.status, 502)
            second = read_response(s, buffer=first.leftover)
            self.assertEqual((second.status, second.body), (201, b"created\n"))
        deadline = time.monotonic() + 5  # the error log is written asynchronously
        while "short of its Content-Length" not in self.server.error_log_text():
            self.assertLess(time.monotonic(), deadline, "no error log line for the short response")
            time.sleep(0.1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
