"""FastCGI in the protocol matrix (issue 31): the features of fastcgi_test.py's
PhpSiteTests over HTTP/1.1, HTTP/2 over TLS and h2c, every request through
harness.Lepus.fetch(), in front of a real php-fpm.

The CGI variables (SERVER_PROTOCOL, HTTPS and SERVER_PORT of the listener the
request came in on), request bodies (1 MiB, one of no declared length: chunked
over HTTP/1.1, DATA frames alone over HTTP/2), the body limit's 413, a script's
status and headers (two Set-Cookie fields stay two), a 1 MiB answer, HEAD,
index.php, PATH_INFO, the cgi.fix_pathinfo hole kept shut, missing scripts,
script sources never served, and static files next to scripts.

fastcgi_test.py keeps the HTTP/1.1 connection checks (keep-alive in step,
pipelining, 100-continue, HTTP/1.0) and the backend failures. Needs php-fpm."""
import hashlib
import json
import os
import unittest

import harness
import phpfpm
from fastcgi_test import populate_site

COOKIES = ("<?php setcookie('first', 'one'); setcookie('second', 'two');"
           " header('X-Twice: a'); header('X-Twice: b', false); echo 'cookies';\n")
LENGTH = ("<?php echo $_SERVER['CONTENT_LENGTH'] ?? 'none', ' ',"
          " md5(file_get_contents('php://input'));\n")


class MatrixFastCgi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.fpm, cls.server = phpfpm.start_site(
            cls, ["--index", "index.php,index.html", "--max-body-size", "1m"], children=4)
        populate_site(cls.server)
        cls.server.write("cookies.php", COOKIES)
        cls.server.write("length.php", LENGTH)

    def fetch(self, path, *headers, **kwargs):
        return self.server.fetch(path, headers=list(headers), **kwargs)

    def test_cgi_variables(self):
        r = self.fetch("/env.php?a=1&b=%20x", "Host: localhost", "X-Thing: 42")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.header("server"), "lepus")
        self.assertIn("date", r.headers)
        env = json.loads(r.body)
        root = os.path.realpath(self.server.root)
        self.assertEqual(env["QUERY_STRING"], "a=1&b=%20x")
        self.assertEqual(env["REQUEST_METHOD"], "GET")
        self.assertEqual(env["REQUEST_URI"], "/env.php?a=1&b=%20x")
        self.assertEqual(env["SCRIPT_NAME"], "/env.php")
        self.assertEqual(env["SCRIPT_FILENAME"], os.path.join(root, "env.php"))
        self.assertEqual(env["DOCUMENT_ROOT"], root)
        self.assertEqual(env["SERVER_PROTOCOL"],
                         self.server.http_version)
        self.assertEqual(env["HTTP_HOST"], "localhost")
        self.assertEqual(env["HTTP_X_THING"], "42")
        self.assertEqual(env["REMOTE_ADDR"], "127.0.0.1")
        tls = self.server.over_tls
        self.assertEqual(env["SERVER_PORT"], str(self.server.tls_port if tls else self.server.port))
        self.assertEqual(env.get("HTTPS"), "on" if tls else None)
        self.assertEqual(env["GATEWAY_INTERFACE"], "CGI/1.1")

    def test_post_1mib_body(self):
        body = os.urandom(1 << 20)
        r = self.fetch("/echo.php", method="POST", body=body)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(json.loads(r.body), {"md5": hashlib.md5(body).hexdigest(),
                                              "length": len(body)})

    def test_a_body_of_no_declared_length_reaches_the_script_with_its_length(self):
        # curl sends it chunked over HTTP/1.1, and over HTTP/2 (where chunked
        # does not exist, RFC 9113 §8.2.2) as DATA frames. The script needs
        # CONTENT_LENGTH to read it: lepus reads the whole body first, as nginx.
        body = os.urandom(300000)
        r = self.fetch("/length.php", "Transfer-Encoding: chunked", method="POST", body=body)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.body.decode(), "%d %s" % (len(body), hashlib.md5(body).hexdigest()))

    def test_a_body_over_the_limit_is_413(self):
        r = self.fetch("/echo.php", method="POST", body=b"y" * ((1 << 20) + 1))
        self.assertEqual(r.status, 413)
        r = self.fetch("/echo.php", "Transfer-Encoding: chunked", method="POST",
                       body=b"y" * ((1 << 20) + 1))
        self.assertEqual(r.status, 413)

    def test_status_and_custom_header(self):
        r = self.fetch("/status.php")
        self.assertEqual((r.status, r.body), (201, b"created\n"))
        self.assertEqual(r.header("x-custom"), "yes")

    def test_repeated_header_fields_stay_apart(self):
        r = self.fetch("/cookies.php")
        self.assertEqual((r.status, r.body), (200, b"cookies"))
        lines = [line.lower() for line in r.header_lines]
        self.assertIn("set-cookie: first=one", lines)
        self.assertIn("set-cookie: second=two", lines)
        twice = [line for line in lines if line.startswith("x-twice:")]
        self.assertEqual(twice, ["x-twice: a", "x-twice: b"])

    def test_1mib_response(self):
        r = self.fetch("/big.php")
        self.assertEqual(r.status, 200)
        expected = (b"abcdefghijklmnopqrstuvwxyz" * 40330)[:1 << 20]
        self.assertEqual(len(r.body), len(expected))
        self.assertTrue(r.body == expected)

    def test_head_has_no_body(self):
        r = self.fetch("/hello.php", method="HEAD")
        self.assertEqual((r.status, r.body), (200, b""))
        self.assertEqual(self.fetch("/hello.php").body, b"hello 5050")

    def test_directory_index_php(self):
        self.assertEqual(self.fetch("/").body, b"index of /index.php\n")
        self.assertEqual(self.fetch("/app/").body, b"app index /app/index.php")
        self.assertEqual(self.fetch("/docs/").body, b"<p>static index</p>\n")

    def test_path_info(self):
        r = self.fetch("/pathinfo.php/some/path?x=1")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(json.loads(r.body), {"PATH_INFO": "/some/path",
                                              "SCRIPT_NAME": "/pathinfo.php",
                                              "PHP_SELF": "/pathinfo.php/some/path"})

    def test_evil_jpg_is_never_executed(self):
        for target in ("/uploads/evil.jpg/x.php", "/uploads/evil.jpg/x.php/more",
                       "/uploads/evil.jpg%2fx.php"):
            r = self.fetch(target)
            self.assertEqual(r.status, 404, target)
            self.assertNotIn(b"EXECUTED", r.body)

    def test_missing_scripts_are_404_and_sources_never_served(self):
        self.assertEqual(self.fetch("/nope.php").status, 404)
        self.assertEqual(self.fetch("/.hidden.php").status, 404)
        self.assertNotIn(b"<?php", self.fetch("/").body)
        self.assertNotIn(b"<?php", self.fetch("/hello.php").body)

    def test_static_files_still_static(self):
        r = self.fetch("/static.txt")
        self.assertEqual((r.status, r.body), (200, b"static file\n"))
        self.assertEqual(r.header("content-length"), "12")


if __name__ == "__main__":
    harness.main()
