"""The protocol matrix: handlers and response features over HTTP/1.1, HTTP/2
over TLS and h2c.

CTest runs this file three times (LEPUS_PROTOCOL unset, h2, h2c: see
CMakeLists.txt); every request goes through harness.Lepus.fetch(), which speaks
the run's protocol with curl and fails when curl spoke another. A check that
cannot apply to a protocol says why with skipTest, never by silence.

Needs php-fpm for the script rows (the suite installs it; without it they fail).
"""
import unittest

import harness
import phpfpm

HTML = ("<!doctype html><title>matrix</title>\n" + "<p>lepus serves this page.</p>\n" * 200)


class Matrix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fpm, cls.server = phpfpm.start_site(cls, ["--compress", "on"], children=2)
        cls.server.write("index.html", HTML)
        cls.server.write("small.txt", "small\n")
        cls.server.write("vars.php", "<?php foreach (['HTTP_HOST', 'SERVER_NAME', 'SERVER_PROTOCOL',"
                                     " 'REQUEST_METHOD', 'REQUEST_URI', 'QUERY_STRING',"
                                     " 'REMOTE_ADDR', 'HTTPS'] as $k)"
                                     " echo $k, '=', $_SERVER[$k] ?? 'NULL', \"\\n\";\n")
        cls.server.write("echo.php", "<?php header('Content-Type: text/plain');"
                                     " echo strlen(file_get_contents('php://input')), ' ',"
                                     " md5(file_get_contents('php://input'));\n")

    def fetch(self, *args, **kwargs):
        return self.server.fetch(*args, **kwargs)

    def test_a_static_file(self):
        response = self.fetch("/small.txt")
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, b"small\n")
        self.assertEqual(response.header("content-type"), "text/plain; charset=utf-8")

    def test_head_of_a_static_file(self):
        response = self.fetch("/small.txt", method="HEAD")
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, b"")
        self.assertEqual(response.header("content-length"), "6")

    def test_a_missing_file_is_404(self):
        self.assertEqual(self.fetch("/nothing-here").status, 404)

    def test_a_range_of_a_static_file(self):
        response = self.fetch("/index.html", headers=["Range: bytes=2-9"])
        self.assertEqual(response.status, 206)
        self.assertEqual(response.body, HTML.encode()[2:10])

    def test_a_static_page_is_compressed(self):
        response = self.fetch("/index.html", headers=["Accept-Encoding: gzip"])
        self.assertEqual(response.status, 200)
        self.assertEqual(response.header("content-encoding"), "gzip")
        import gzip
        self.assertEqual(gzip.decompress(response.body), HTML.encode())

    def test_a_script_runs(self):
        response = self.fetch("/vars.php?a=1")
        self.assertEqual(response.status, 200, response.body)
        self.assertIn(b"REQUEST_METHOD=GET\n", response.body)
        self.assertIn(b"REQUEST_URI=/vars.php?a=1\n", response.body)
        self.assertIn(b"QUERY_STRING=a=1\n", response.body)
        self.assertIn(b"REMOTE_ADDR=127.0.0.1\n", response.body)
        self.assertIn(b"HTTPS=" + (b"on" if self.server.protocol in ("h2", "h3") else b"NULL"),
                      response.body)

    def test_a_script_reads_the_request_body(self):
        body = bytes(range(256)) * 300
        response = self.fetch("/echo.php", method="POST", body=body,
                              headers=["Content-Type: application/octet-stream"])
        self.assertEqual(response.status, 200, response.body)
        import hashlib
        self.assertEqual(response.body.decode(), "%d %s" % (len(body), hashlib.md5(body).hexdigest()))


if __name__ == "__main__":
    harness.main()
