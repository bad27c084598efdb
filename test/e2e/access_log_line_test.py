"""The access log of requests the parser refuses (issue 17): the request line
as received, escaped, as nginx logs it ("PRI * HTTP/2.0" 400), not "-"; bounded
to 2 KiB; "-" only when nothing came."""
import time
import unittest

from harness import BINARY, LepusTestCase


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class RefusedRequestLines(LepusTestCase):
    def logged(self, count):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                found = self.server.access_lines()
            except FileNotFoundError:
                found = []
            if len(found) >= count:
                return found
            time.sleep(0.1)
        self.fail("fewer than %d access-log lines" % count)

    def request_field(self, line):
        return line.split('"')[1] if line.count('"') >= 2 else None

    def test_refused_lines_are_logged_escaped_and_bounded(self):
        before = 0  # the only test of the class: the log starts empty
        cases = [
            # Not quite the HTTP/2 preface (which would switch to HTTP/2): refused.
            (b"PRI * HTTP/2.0\r\n\r\nXY\r\n\r\n", r"PRI * HTTP/2.0"),
            (b"GET /a\"b\x01 HTTP/1.1\r\nHost: x\r\n\r\n", r"GET /a\x22b\x01 HTTP/1.1"),
            (b"GET / HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n", r"GET / HTTP/1.1"),
        ]
        for raw, _ in cases:
            self.assertGreaterEqual(self.server.request(raw).status, 400)
        long_line = b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n"
        self.assertGreaterEqual(self.server.request(long_line).status, 400)
        lines = self.logged(before + len(cases) + 1)[before:]
        for (raw, expected), line in zip(cases, lines):
            self.assertEqual(self.request_field(line), expected, line)
            self.assertRegex(line, r'" [45]\d\d ')
        # One line per request, at most 2 KiB of the refused one.
        logged_long = self.request_field(lines[len(cases)])
        self.assertTrue(logged_long.startswith("GET /aaaa"), logged_long[:40])
        self.assertEqual(len(logged_long), 2048)


if __name__ == "__main__":
    unittest.main(verbosity=2)
