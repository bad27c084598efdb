"""Issue 14's protocol and security fixes outside the connection code, end to
end against the real lepus binary (and a real php-fpm where PHP is involved):

  finding 1   a CGI Status below 200 from PHP is a 502 (logged once), and the
              next pipelined request gets its own answer (no desync, no hang)
  finding 5   --status-allow / status_allow refuse malformed networks
  finding 6   Transfer-Encoding: chunked;x=y is 400 and close
  finding 10  FastCGI stderr reaches the error log escaped, one line per line
  finding 12  characters browsers send raw (| ^ { } \\ `, " in the query) are
              accepted; CTLs, spaces and bytes >= 0x80 stay 400
  finding 13  HTTP/1.2 is answered as HTTP/1.1; HTTP/2.0 and 3.0 stay 505

Every socket has a timeout: a hang fails the test instead of blocking it.
"""
import os
import subprocess
import tempfile
import textwrap
import time
import unittest

import harness
import phpfpm
from harness import BINARY, Lepus, is_closed, read_response

TIMEOUT = 10


def wait_for_text(read, text, timeout=10):
    """Waits until `text` is in read() (the logs are written asynchronously, flushed
    about once a second); returns what read() gave."""
    deadline = time.monotonic() + timeout
    while True:
        content = read()
        if text in content or time.monotonic() > deadline:
            return content
        time.sleep(0.1)


def read_pipelined(sock, count):
    """Reads `count` responses from one connection, in order."""
    responses, leftover = [], b""
    for _ in range(count):
        r = read_response(sock, buffer=leftover)
        leftover = r.leftover
        responses.append(r)
    return responses, leftover


# --- finding 1 and 10: a real php-fpm -----------------------------------------

@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class PhpBackend(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
        cls.fpm, cls.server = phpfpm.start_site(cls, ["--threads", "1"], children=2)
        for name in ("response_code.php", "stderr_lines.php", "hello.php"):
            with open(os.path.join(phpfpm.PHP_DIR, name), "rb") as f:
                cls.server.write(name, f.read())

    def test_interim_status_is_502_and_the_pipelined_request_keeps_its_answer(self):
        for code in (100, 101, 102, 103):
            with self.subTest(code=code), self.server.connect(timeout=TIMEOUT) as s:
                s.sendall(b"GET /response_code.php?c=%d HTTP/1.1\r\nHost: a\r\n\r\n"
                          b"GET /hello.php HTTP/1.1\r\nHost: a\r\n\r\n" % code)
                (first, second), leftover = read_pipelined(s, 2)
                # Before the fix: 101 with the body dropped, and the second
                # answer belonged to the first request (100 hung curl).
                self.assertEqual(first.status, 502)
                self.assertNotEqual(first.header("connection"), "close")
                self.assertEqual(second.status, 200)
                self.assertEqual(second.body, b"hello 5050")
                self.assertEqual(leftover, b"")
                self.assertFalse(b"Switching" in first.raw_head + second.raw_head)
        log = wait_for_text(self.server.error_log_text, '("103")')
        for code, reason in ((100, "100 Continue"), (101, "101 Switching Protocols"), (103, "103")):
            lines = [line for line in log.splitlines() if '"%s"' % reason in line]
            self.assertEqual(len(lines), 1, "one error line for %d:\n%s" % (code, log))
            self.assertIn("[error]", lines[0])
            self.assertIn("/response_code.php", lines[0])
            self.assertIn("1xx", lines[0])

    def test_final_status_still_passes(self):
        with self.server.connect(timeout=TIMEOUT) as s:
            s.sendall(b"GET /response_code.php?c=201 HTTP/1.1\r\nHost: a\r\n\r\n"
                      b"GET /response_code.php?c=200 HTTP/1.1\r\nHost: a\r\n\r\n")
            (first, second), _ = read_pipelined(s, 2)
        self.assertEqual((first.status, first.body), (201, b"body"))
        self.assertEqual((second.status, second.body), (200, b"body"))

    def test_stderr_is_escaped_one_log_line_per_backend_line(self):
        r = self.server.get("/stderr_lines.php")
        self.assertEqual((r.status, r.body), (200, b"ok"))
        text = wait_for_text(self.server.error_log_text, "forged")
        lines = [line for line in text.splitlines() if "stderr_lines.php" in line]
        # The PHP line was "first\n[error] forged ESC[31m red\r\n": two log lines,
        # neither starting with the forged text, the ESC byte escaped.
        forged = [line for line in lines if "forged" in line]
        self.assertEqual(len(forged), 1, "\n".join(lines))
        self.assertIn('FastCGI stderr from "/stderr_lines.php": [error] forged\\x1B[31m red',
                      forged[0])
        # The CR is dropped; the request's context (issue 33) follows the backend's text.
        backend_text = [line.split(", client: ")[0] for line in lines]
        self.assertTrue(backend_text[lines.index(forged[0])].endswith("red"), repr(forged[0]))
        self.assertEqual(len([t for t in backend_text if t.endswith(": PHP message: first")]),
                         1, "\n".join(lines))
        self.assertNotIn("\x1b", text)
        for line in text.splitlines():
            self.assertRegex(line, r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[[a-z]+\] ")


# --- findings 6, 12, 13: the request parser, through the static handler ------

@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class RequestLine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Lepus()
        cls.server.write("index.html", "index\n")
        cls.server.write("a|b^c{d}e`f", "odd name\n")
        cls.server.write("back\\slash", "backslash name\n")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def request(self, raw):
        return self.server.request(raw, timeout=TIMEOUT)

    def test_chunked_with_parameters_is_400_and_close(self):
        for coding in (b"chunked;x=y", b"chunked ; x=y", b"chunked;", b"gzip, chunked;q=1"):
            with self.subTest(coding=coding), self.server.connect(timeout=TIMEOUT) as s:
                s.sendall(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: " + coding +
                          b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                          b"GET /index.html HTTP/1.1\r\nHost: a\r\n\r\n")
                r = read_response(s, buffer=b"")
                self.assertEqual(r.status, 400)
                self.assertEqual(r.header("connection"), "close")
                # Nothing after the refused head is read as a request.
                self.assertEqual(r.leftover, b"")
                self.assertTrue(is_closed(s, TIMEOUT))
        r = self.request(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
                         b"Connection: close\r\n\r\n0\r\n\r\n")
        self.assertNotEqual(r.status, 400)

    def test_characters_browsers_send_raw_are_accepted(self):
        r = self.request(b"GET /a|b^c{d}e`f HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        self.assertEqual((r.status, r.body), (200, b"odd name\n"))
        r = self.request(b"GET /back\\slash HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        self.assertEqual((r.status, r.body), (200, b"backslash name\n"))
        for query in (b'q="quoted"', b"q={|^`}\\", b'json={"a":1}'):
            with self.subTest(query=query):
                r = self.request(b"GET /index.html?" + query +
                                 b" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                self.assertEqual((r.status, r.body), (200, b"index\n"))
        access = wait_for_text(lambda: "\n".join(self.server.access_lines()), "quoted")
        self.assertIn('"GET /index.html?q=\\x22quoted\\x22 HTTP/1.1" 200', access)

    def test_ctl_space_high_bytes_and_quote_in_path_stay_400(self):
        for target in (b"/a\x01b", b"/a\x7f", b"/caf\xc3\xa9", b"/a?x=\xff", b"/a?x=\x1b",
                       b"/a\tb", b'/a"b', b"/a<b", b"/a?x=<script>", b"/a#f"):
            with self.subTest(target=target):
                r = self.request(b"GET " + target + b" HTTP/1.1\r\nHost: a\r\n\r\n")
                self.assertEqual(r.status, 400)
                self.assertEqual(r.header("connection"), "close")
        r = self.request(b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n")
        self.assertEqual(r.status, 400)

    def test_higher_http1_minor_is_answered_as_http11(self):
        for version in (b"HTTP/1.2", b"HTTP/1.9"):
            with self.subTest(version=version), self.server.connect(timeout=TIMEOUT) as s:
                # Processed as 1.1: persistent by default, so two on one connection.
                s.sendall(b"GET /index.html " + version + b"\r\nHost: a\r\n\r\n"
                          b"GET /index.html " + version + b"\r\nHost: a\r\n\r\n")
                responses, _ = read_pipelined(s, 2)
                for r in responses:
                    self.assertEqual(r.status, 200)
                    self.assertTrue(r.raw_head.startswith(b"HTTP/1.1 200 "), r.raw_head[:40])
                    self.assertEqual(r.body, b"index\n")
        # As 1.1, Host is required.
        self.assertEqual(self.request(b"GET / HTTP/1.2\r\n\r\n").status, 400)

    def test_other_major_versions_stay_505(self):
        for version in (b"HTTP/2.0", b"HTTP/3.0", b"HTTP/2.1", b"HTTP/0.9"):
            with self.subTest(version=version):
                r = self.request(b"GET / " + version + b"\r\nHost: a\r\n\r\n")
                self.assertEqual(r.status, 505)
                self.assertTrue(r.raw_head.startswith(b"HTTP/1.1 505 "))


# --- finding 5: strict CIDR on the command line and in the config file --------

BAD_NETWORKS = ("10.1.2.3/", "::1/", "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/08x",
                "10.0.0.0/8/8", "garbage", "10.0.0", "10.0.0.256", "", " 10.0.0.0/8",
                "10.0.0.0/ 8", "fe80::1%eth0")
GOOD_NETWORKS = ("0.0.0.0/0", "::/0", "10.1.2.3/8", "127.0.0.1", "::1", "2001:db8::/32")


def run_lepus(args, cwd=None):
    """Runs lepus; returns (exit code, stdout, stderr), or exit code None when it
    accepted its arguments and started serving (then it is killed)."""
    try:
        done = subprocess.run([BINARY] + list(args), capture_output=True, text=True,
                              timeout=5, stdin=subprocess.DEVNULL, cwd=cwd)
    except subprocess.TimeoutExpired:
        return None, "", ""
    return done.returncode, done.stdout, done.stderr


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class StatusAllow(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="lepus-cidr-")
        self.root = os.path.join(self.tmp.name, "www")
        os.mkdir(self.root)

    def tearDown(self):
        self.tmp.cleanup()

    def assert_one_line(self, code, out, err, value, expected_code):
        self.assertIsNotNone(code, "%r was accepted: lepus started" % value)
        self.assertEqual(code, expected_code, "exit code for %r; stderr: %r" % (value, err))
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, "one stderr line for %r: %r" % (value, err))
        self.assertTrue(lines[0].startswith("lepus: "), lines[0])
        self.assertIn("'%s'" % value, lines[0])
        self.assertRegex(lines[0], r"status-allow|'status_allow'")

    def test_command_line_rejects_each_bad_network(self):
        for value in BAD_NETWORKS:
            with self.subTest(value=value):
                code, out, err = run_lepus([self.root, "--listen", "127.0.0.1:0",
                                            "--status-allow", "127.0.0.0/8",
                                            "--status-allow", value])
                self.assert_one_line(code, out, err, value, 2)
                self.assertEqual(out, "")

    def write_config(self, networks):
        path = os.path.join(self.tmp.name, "lepus.toml")
        with open(path, "w") as f:
            f.write(textwrap.dedent("""\
                root = "www"
                listen = "127.0.0.1:0"
                status_path = "/_status"
                status_allow = [%s]
                """) % ", ".join('"%s"' % n for n in networks))
        return path

    def test_config_file_rejects_each_bad_network(self):
        for value in BAD_NETWORKS:
            with self.subTest(value=value):
                path = self.write_config(["127.0.0.0/8", value])
                code, out, err = run_lepus(["--config", path], cwd=self.tmp.name)
                self.assert_one_line(code, out, err, value, 2)
                self.assertIn("lepus.toml:4:", err)
                # -t checks the same way (its errors exit 1, as nginx -t).
                code, out, err = run_lepus(["-t", "--config", path], cwd=self.tmp.name)
                self.assert_one_line(code, out, err, value, 1)
                self.assertNotIn("ok", out)

    def test_good_networks_pass(self):
        path = self.write_config(GOOD_NETWORKS)
        code, out, err = run_lepus(["-t", "--config", path], cwd=self.tmp.name)
        self.assertEqual((code, out.strip()), (0, "ok"), err)
        args = [self.root]
        for value in GOOD_NETWORKS:
            args += ["--status-allow", value]
        server = Lepus(args[1:], root=self.root)
        try:
            self.assertEqual(server.get("/").status, 404)  # started and serving
        finally:
            server.stop(self)


if __name__ == "__main__":
    unittest.main()
