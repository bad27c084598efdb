"""X-Accel-Redirect and X-Sendfile end to end (issue 18): a download script run
by a real php-fpm checks a key and hands the file to lepus, which serves it from
the --x-accel folder (ranges, conditional requests, HEAD, large files by
sendfile) with the script's Content-Type, Content-Disposition and Set-Cookie;
clients cannot fetch the internal prefix themselves; X-Sendfile only beneath the
folder; paths that climb out or links that leave it are refused; a [[site]]
has its own folder; a bad --x-accel is one line and exit 2.

A matrix test (issue 31): CTest runs it over HTTP/1.1, h2 and h2c, every
request through harness.Lepus.fetch() but the keep-alive check, which is about
one HTTP/1.1 connection."""
import hashlib
import http.client
import os
import subprocess
import textwrap
import time
import unittest

import harness
import phpfpm

DOWNLOAD = r"""<?php
if (($_GET['key'] ?? '') !== 'secret') {
    http_response_code(403);
    echo "no key\n";
    exit;
}
$name = $_GET['file'] ?? 'report.pdf';
header('Content-Type: application/pdf');
header('Content-Disposition: attachment; filename="' . basename($name) . '"');
header('Cache-Control: private');
setcookie('downloaded', '1');
header('X-Powered-Detail: not kept');
if (isset($_GET['sendfile']))
    header('X-Sendfile: ' . $_GET['sendfile']);
else
    header('X-Accel-Redirect: ' . ($_GET['to'] ?? '/protected/' . $name));
echo "this body is dropped\n";
"""


class Headers(dict):
    """Response headers by any spelling of the name; None when absent."""

    def __getitem__(self, name):
        return self.get(name.lower())


def fetch(server, method, path, headers=None, body=None):
    """(status, Headers, body) over the run's protocol (harness.Lepus.fetch)."""
    response = server.fetch(path, method=method, body=body, headers=[
        "%s: %s" % item for item in (headers or {}).items()])
    return response.status, Headers(response.headers), response.body


def wait_for(predicate, seconds=5):
    deadline = time.monotonic() + seconds  # the error log is written asynchronously
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


class XAccel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
        cls.tmp = harness.temp_dir(cls, name="x-accel")
        cls.private = os.path.join(cls.tmp, "private")
        os.makedirs(cls.private)
        cls.report = os.urandom(300 * 1024)  # beyond the in-memory limit: sendfile
        with open(os.path.join(cls.private, "report.pdf"), "wb") as f:
            f.write(cls.report)
        with open(os.path.join(cls.private, "notes.txt"), "w") as f:
            f.write("private notes\n")
        with open(os.path.join(cls.tmp, "secret.txt"), "w") as f:
            f.write("outside the folder\n")
        os.symlink(os.path.join(cls.tmp, "secret.txt"), os.path.join(cls.private, "leak.txt"))
        cls.fpm, cls.server = phpfpm.start_site(
            cls, ["--x-accel", "/protected/=" + cls.private], children=4)
        cls.server.write("download.php", DOWNLOAD)
        cls.server.write("public.txt", "public file\n")
        cls.server.write("protected/notes.txt", "a public copy under the internal prefix\n")

    def test_the_script_checks_and_lepus_serves_the_file_with_the_scripts_headers(self):
        status, headers, body = fetch(self.server, "GET", "/download.php?key=secret")
        self.assertEqual(status, 200, body[:200])
        self.assertEqual(hashlib.sha256(body).digest(), hashlib.sha256(self.report).digest())
        self.assertEqual(headers["Content-Length"], str(len(self.report)))
        self.assertEqual(headers["Content-Type"], "application/pdf")
        self.assertEqual(headers["Content-Disposition"], 'attachment; filename="report.pdf"')
        self.assertEqual(headers["Cache-Control"], "private")
        self.assertIn("downloaded=1", headers["Set-Cookie"])
        self.assertIsNone(headers["X-Accel-Redirect"])
        self.assertIsNone(headers["X-Powered-Detail"])
        self.assertIsNotNone(headers["ETag"])
        status, _, body = fetch(self.server, "GET", "/download.php?key=wrong")
        self.assertEqual((status, body), (403, b"no key\n"))
        # The access log has the answer the client got.
        version = self.server.http_version[len("HTTP/"):]
        self.assertTrue(wait_for(lambda: any('"GET /download.php?key=secret HTTP/%s" 200 %d'
                                             % (version, len(self.report)) in line
                                             for line in self.server.access_lines())))

    def test_ranges_conditionals_head_and_post_work_on_the_file(self):
        status, headers, body = fetch(self.server, "GET", "/download.php?key=secret",
                                      {"Range": "bytes=100-199"})
        self.assertEqual((status, body), (206, self.report[100:200]))
        self.assertEqual(headers["Content-Range"], "bytes 100-199/%d" % len(self.report))
        _, headers, _ = fetch(self.server, "GET", "/download.php?key=secret")
        status, _, body = fetch(self.server, "GET", "/download.php?key=secret",
                                {"If-None-Match": headers["ETag"]})
        self.assertEqual((status, body), (304, b""))
        status, headers, body = fetch(self.server, "HEAD", "/download.php?key=secret")
        self.assertEqual((status, body), (200, b""))
        self.assertEqual(headers["Content-Length"], str(len(self.report)))
        # A form that POSTs gets the file (a GET of it, as nginx).
        status, _, body = fetch(self.server, "POST", "/download.php?key=secret&file=notes.txt",
                                {"Content-Type": "application/x-www-form-urlencoded"}, b"a=1")
        self.assertEqual((status, body), (200, b"private notes\n"))

    def test_keepalive_goes_on_after_a_redirected_answer(self):
        if self.server.protocol != "h1":
            self.skipTest("HTTP/1.1 framing: requests in turn on one kept-alive connection")
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            for _ in range(3):
                connection.request("GET", "/download.php?key=secret&file=notes.txt")
                response = connection.getresponse()
                self.assertEqual(response.read(), b"private notes\n")
            connection.request("GET", "/public.txt")
            self.assertEqual(connection.getresponse().read(), b"public file\n")
        finally:
            connection.close()

    def test_clients_cannot_ask_for_the_internal_prefix(self):
        for path in ("/protected/notes.txt", "/protected/report.pdf", "/%70rotected/notes.txt",
                     "//protected/notes.txt", "/protected/"):
            with self.subTest(path=path):
                status, _, _ = fetch(self.server, "GET", path)
                self.assertEqual(status, 404)

    def test_a_redirect_outside_the_prefix_is_a_public_file(self):
        status, _, body = fetch(self.server, "GET", "/download.php?key=secret&to=/public.txt")
        self.assertEqual((status, body), (200, b"public file\n"))
        status, _, _ = fetch(self.server, "GET", "/download.php?key=secret&file=missing.pdf")
        self.assertEqual(status, 404)

    def test_paths_that_climb_out_or_links_that_leave_are_refused(self):
        for to in ("/protected/../secret.txt", "/protected/%2e%2e/secret.txt",
                   "/protected/../../secret.txt"):
            with self.subTest(to=to):
                status, _, body = fetch(self.server, "GET",
                                        "/download.php?key=secret&to=" + to.replace("%", "%25"))
                self.assertNotEqual(body, b"outside the folder\n")
                self.assertEqual(status, 502)  # an unsafe target (issue 32)
        status, _, body = fetch(self.server, "GET", "/download.php?key=secret&file=leak.txt")
        self.assertEqual(status, 403)
        self.assertNotIn(b"outside", body)

    def test_x_sendfile_only_beneath_the_folder(self):
        inside = os.path.join(self.private, "notes.txt")
        status, headers, body = fetch(self.server, "GET",
                                      "/download.php?key=secret&sendfile=" + inside)
        self.assertEqual((status, body), (200, b"private notes\n"))
        self.assertEqual(headers["Content-Type"], "application/pdf")
        for path in ("/etc/passwd", os.path.join(self.tmp, "secret.txt"),
                     self.private + "/../secret.txt", self.private + "-other/x"):
            with self.subTest(path=path):
                status, _, body = fetch(self.server, "GET",
                                        "/download.php?key=secret&sendfile=" + path)
                self.assertNotEqual(status, 200)
                self.assertNotIn(b"root:", body)
                self.assertNotIn(b"outside the folder", body)
        self.assertTrue(wait_for(lambda: "/etc/passwd" in self.server.error_log_text()))
        line = [l for l in self.server.error_log_text().splitlines() if "/etc/passwd" in l]
        self.assertEqual(len(line), 1, line)
        self.assertIn("--x-accel", line[0])


class XAccelConfig(unittest.TestCase):
    def setUp(self):
        harness.require_binary()
        self.tmp = harness.temp_dir(self, "x-accel-config")

    def test_a_site_has_its_own_folder_and_without_one_x_sendfile_passes(self):
        if not phpfpm.find_php_fpm():
            self.skipTest("php-fpm not installed")
        files = os.path.join(self.tmp, "files")
        os.makedirs(files)
        with open(os.path.join(files, "a.txt"), "w") as f:
            f.write("site a file\n")
        roots = {}
        for name in ("a", "b"):
            roots[name] = os.path.join(self.tmp, name)
            os.makedirs(roots[name])
            with open(os.path.join(roots[name], "download.php"), "w") as f:
                f.write(DOWNLOAD)
        config = os.path.join(self.tmp, "lepus.toml")

        def write_config(address):
            with open(config, "w") as f:
                f.write(textwrap.dedent("""\
                    fastcgi = "%s"
                    [[site]]
                    server_names = ["a.test"]
                    root = "%s"
                    x_accel = "/files/=%s"
                    [[site]]
                    server_names = ["b.test"]
                    root = "%s"
                    """ % (address, roots["a"], files, roots["b"])))
            return ["--config", config]
        _, server = phpfpm.start_site(self, write_config, children=2, fastcgi=False)
        status, _, body = fetch(server, "GET", "/download.php?key=secret&to=/files/a.txt",
                                {"Host": "a.test"})
        self.assertEqual((status, body), (200, b"site a file\n"))
        # Site b has no folder: /files/a.txt is a path of its own root (absent).
        status, _, _ = fetch(server, "GET", "/download.php?key=secret&to=/files/a.txt",
                             {"Host": "b.test"})
        self.assertEqual(status, 404)
        # ... and X-Sendfile is not lepus's business there: the script's answer passes.
        status, headers, body = fetch(server, "GET", "/download.php?key=secret&sendfile=/etc/passwd",
                                      {"Host": "b.test"})
        self.assertEqual((status, body), (200, b"this body is dropped\n"))
        self.assertEqual(headers["X-Sendfile"], "/etc/passwd")

    def test_bad_values_are_one_line_and_exit_2(self):
        for value in ("/protected/", "protected/=/tmp", "/protected=/tmp", "/a/../b/=/tmp",
                      "/protected/=" + os.path.join(self.tmp, "missing")):
            with self.subTest(value=value):
                done = subprocess.run([harness.BINARY, self.tmp, "--x-accel", value],
                                      capture_output=True, text=True, timeout=10)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)
                self.assertIn("x-accel", done.stderr)


if __name__ == "__main__":
    harness.main()
