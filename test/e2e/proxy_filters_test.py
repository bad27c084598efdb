"""The response filters on a proxied response (issue 31 item 2), and the
request fields a backend must not get (issue 32 item 7), over the protocol
matrix (h1, h2, h2c: CMakeLists.txt's protocol_e2e).

A backend written for this test (Python's threaded http.server, HTTP/1.1 on
loopback) answers a 6 KB HTML page, an already gzip'd page, a range of the page,
a page marked Cache-Control: no-transform, an X-Accel-Redirect and an
X-Sendfile into the --x-accel folder, and an echo of the request head it got.
lepus in front of it (--proxy, --compress on, --x-accel) must filter the
backend's answers as it does a PHP script's: the page in the coding the client
asks for, decoding to the original with a weak ETag; the encoded page, the
range and the no-transform page untouched; the file named by X-Accel-Redirect
or X-Sendfile served instead of the backend's body; a [[site]]'s header rules
on the proxied answers. The client's fields whose names hold '_'
(X_Forwarded_Proto, Content_Length...) never reach the backend.
"""
import gzip
import http.server
import json
import os
import shutil
import socketserver
import subprocess
import textwrap
import threading
import unittest

import harness

PAGE = ("<!doctype html><title>proxied</title>\n"
        + "".join("<p>paragraph %d of a page from the backend</p>\n" % i for i in range(140))
        ).encode()
assert 5500 < len(PAGE) < 7000, len(PAGE)
PRE_ENCODED = gzip.compress(b"<p>gzip'd by the backend itself</p>\n" * 200)
FILE = b"the file in the internal folder\n" * 64
DROPPED = b"the backend's own body, which the client must not get\n"


def decode(coding, body):
    if coding == "gzip":
        return gzip.decompress(body)
    tool = {"br": ["brotli", "-d", "-c"], "zstd": ["zstd", "-d", "-c", "-q"]}[coding]
    return subprocess.run(tool, input=body, capture_output=True, check=True, timeout=30).stdout


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        path = self.path.partition("?")[0].rpartition("/")[2]
        html = ("Content-Type", "text/html; charset=utf-8")
        if path == "page.html":
            self.answer(200, PAGE, [html, ("ETag", '"v1"')])
        elif path == "encoded.html":
            self.answer(200, PRE_ENCODED, [html, ("Content-Encoding", "gzip")])
        elif path == "part.html":
            self.answer(206, PAGE[100:5100], [
                html, ("Content-Range", "bytes 100-5099/%d" % len(PAGE))])
        elif path == "no-transform.html":
            self.answer(200, PAGE, [html, ("Cache-Control", "public, no-transform")])
        elif path == "download":
            self.answer(200, DROPPED, [("Content-Type", "application/x-report"),
                                       ("Content-Disposition", 'attachment; filename="r.txt"'),
                                       ("X-Accel-Redirect", "/internal/report.txt")])
        elif path == "sendfile":
            self.answer(200, DROPPED, [("Content-Type", "application/x-report"),
                                       ("X-Sendfile", self.server.internal + "/report.txt")])
        elif path == "echo":
            body = json.dumps([[name, value] for name, value in self.headers.items()]).encode()
            self.answer(200, body, [("Content-Type", "application/octet-stream")])
        else:
            self.answer(404, b"not here\n", [("Content-Type", "text/plain")])

    do_HEAD = do_GET


class Backend(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self, internal):
        self.internal = internal
        http.server.HTTPServer.__init__(self, ("127.0.0.1", 0), Handler)
        self.address = "http://127.0.0.1:%d" % self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def handle_error(self, request, client_address):
        pass  # lepus dropping a connection whose body it does not want (X-Accel)

    def stop(self):
        self.shutdown()
        self.server_close()


class ProxyFilters(unittest.TestCase):
    """lepus ROOT --proxy BACKEND --compress on --x-accel /internal/=DIR."""

    @classmethod
    def setUpClass(cls):
        cls.dir = harness.temp_dir(cls, "proxy-filters")
        cls.internal = os.path.join(cls.dir, "internal")
        os.makedirs(cls.internal)
        with open(os.path.join(cls.internal, "report.txt"), "wb") as f:
            f.write(FILE)
        cls.backend = Backend(cls.internal)
        cls.addClassCleanup(cls.backend.stop)
        cls.server = harness.Lepus(["--proxy", cls.backend.address, "--compress", "on",
                                    "--x-accel", "/internal/=" + cls.internal])
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())

    def fetch(self, path, headers=(), method="GET"):
        return self.server.fetch(path, headers=list(headers), method=method)

    def test_the_page_is_compressed_in_each_coding_asked_for(self):
        for coding in ("gzip", "br", "zstd"):
            if coding != "gzip" and not shutil.which({"br": "brotli", "zstd": "zstd"}[coding]):
                self.fail("the %s decoder is missing (apt-get install %s)"
                          % (coding, {"br": "brotli", "zstd": "zstd"}[coding]))
            with self.subTest(coding=coding):
                r = self.fetch("/page.html", ["Accept-Encoding: " + coding])
                self.assertEqual(r.status, 200)
                self.assertEqual(r.header("content-encoding"), coding, r.header_lines)
                self.assertIn("Accept-Encoding", r.header("vary", ""))
                self.assertEqual(r.header("etag"), 'W/"v1"')  # RFC 9110 §8.8.1
                # Not the backend's length of the identity body.
                if r.header("content-length") is not None:
                    self.assertEqual(r.header("content-length"), str(len(r.body)))
                self.assertLess(len(r.body), len(PAGE) // 2)
                self.assertEqual(decode(coding, r.body), PAGE)

    def test_the_client_preference_picks_the_coding(self):
        r = self.fetch("/page.html", ["Accept-Encoding: gzip, deflate, br, zstd"])
        self.assertEqual(r.header("content-encoding"), "br")
        self.assertEqual(decode("br", r.body), PAGE)

    def test_no_accept_encoding_gets_the_page_as_it_is(self):
        r = self.fetch("/page.html")
        self.assertEqual(r.status, 200)
        self.assertIsNone(r.header("content-encoding"))
        self.assertEqual(r.body, PAGE)
        self.assertEqual(r.header("etag"), '"v1"')
        self.assertIn("Accept-Encoding", r.header("vary", ""))  # caches must still tell

    def test_a_head_runs_no_coder_but_varies(self):
        r = self.fetch("/page.html", ["Accept-Encoding: gzip"], method="HEAD")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"")
        self.assertIsNone(r.header("content-encoding"))
        self.assertIn("Accept-Encoding", r.header("vary", ""))

    def test_an_encoded_answer_is_left_as_it_is(self):
        r = self.fetch("/encoded.html", ["Accept-Encoding: br, gzip"])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("content-encoding"), "gzip")
        self.assertEqual(r.body, PRE_ENCODED)

    def test_a_range_and_a_no_transform_answer_are_left_as_they_are(self):
        r = self.fetch("/part.html", ["Accept-Encoding: gzip", "Range: bytes=100-5099"])
        self.assertEqual(r.status, 206)
        self.assertIsNone(r.header("content-encoding"))
        self.assertEqual(r.body, PAGE[100:5100])
        r = self.fetch("/no-transform.html", ["Accept-Encoding: gzip"])
        self.assertEqual(r.status, 200)
        self.assertIsNone(r.header("content-encoding"))
        self.assertEqual(r.body, PAGE)

    def test_x_accel_redirect_serves_the_file(self):
        r = self.fetch("/download", ["Accept-Encoding: gzip"])
        self.assertEqual(r.status, 200, r.body[:200])
        # Served as the static file it is: report.txt is text, so compressed.
        self.assertEqual(r.header("content-encoding"), "gzip")
        self.assertEqual(decode("gzip", r.body), FILE)
        self.assertEqual(self.fetch("/download").body, FILE)
        self.assertIsNone(r.header("x-accel-redirect"))
        # The backend's fields nginx keeps on the file's answer (server/x_accel.h).
        self.assertEqual(r.header("content-type"), "application/x-report")
        self.assertEqual(r.header("content-disposition"), 'attachment; filename="r.txt"')

    def test_x_accel_redirect_serves_ranges_and_head_of_the_file(self):
        r = self.fetch("/download", ["Range: bytes=0-9"])
        self.assertEqual(r.status, 206)
        self.assertEqual(r.body, FILE[:10])
        r = self.fetch("/download", method="HEAD")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("content-length"), str(len(FILE)))

    def test_x_sendfile_serves_the_file(self):
        r = self.fetch("/sendfile")
        self.assertEqual(r.status, 200, r.body[:200])
        self.assertEqual(r.body, FILE)
        self.assertIsNone(r.header("x-sendfile"))

    def test_the_internal_folder_stays_internal(self):
        self.assertEqual(self.fetch("/internal/report.txt").status, 404)

    def test_names_with_underscores_do_not_reach_the_backend(self):
        r = self.fetch("/echo", ["X_Forwarded_Proto: https", "X_Forwarded_Host: evil.test",
                                 "X_Forwarded_For: 10.9.8.7", "Content_Length: 5",
                                 "Transfer_Encoding: chunked", "X-Kept: yes"])
        self.assertEqual(r.status, 200)
        seen = {}
        for name, value in json.loads(r.body):
            seen.setdefault(name.lower(), []).append(value)
        self.assertFalse([name for name in seen if "_" in name], seen)
        self.assertEqual(seen["x-kept"], ["yes"])
        proto = "https" if self.server.over_tls else "http"
        self.assertEqual(seen["x-forwarded-proto"], [proto])
        self.assertNotIn("evil.test", json.dumps(seen))
        self.assertNotIn("10.9.8.7", json.dumps(seen))


class SiteProxyFilters(unittest.TestCase):
    """A [[site]] with proxy = {...} paths, header rules, and no internal folder."""

    @classmethod
    def setUpClass(cls):
        cls.dir = harness.temp_dir(cls, "proxy-filters-site")
        root = os.path.join(cls.dir, "site")
        os.makedirs(root)
        with open(os.path.join(root, "local.html"), "wb") as f:
            f.write(PAGE)
        cls.backend = Backend(os.path.join(cls.dir, "none"))
        cls.addClassCleanup(cls.backend.stop)
        config = os.path.join(cls.dir, "lepus.toml")
        with open(config, "w") as f:
            f.write(textwrap.dedent("""\
                [[site]]
                root = "{root}"
                compress = true
                proxy = {{ address = "{backend}", paths = ["/app/"] }}
                headers = [ {{ match = "/app/", name = "X-Site-Rule", value = "applied" }},
                            {{ match = "*.html", name = "Cache-Control", value = "max-age=60" }} ]
                """).format(root=root, backend=cls.backend.address))
        cls.server = harness.Lepus(["--config", config])
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())

    def test_header_rules_and_compression_on_a_proxied_page(self):
        r = self.server.fetch("/app/page.html", headers=["Accept-Encoding: gzip"])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("x-site-rule"), "applied")
        self.assertEqual(r.header("cache-control"), "max-age=60")
        self.assertEqual(r.header("content-encoding"), "gzip")
        self.assertEqual(decode("gzip", r.body), PAGE)

    def test_the_same_rules_as_the_site_files(self):
        local = self.server.fetch("/local.html", headers=["Accept-Encoding: gzip"])
        proxied = self.server.fetch("/app/page.html", headers=["Accept-Encoding: gzip"])
        for r in (local, proxied):
            self.assertEqual(r.header("content-encoding"), "gzip")
            self.assertEqual(r.header("cache-control"), "max-age=60")
            self.assertIn("Accept-Encoding", r.header("vary", ""))
            self.assertEqual(decode("gzip", r.body), PAGE)

    def test_without_an_internal_folder_x_accel_redirect_is_passed_on(self):
        # The backend's field is the client's to see: a site that set up no
        # --x-accel folder does not give its backend lepus's files (README).
        r = self.server.fetch("/app/download")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, DROPPED)
        self.assertEqual(r.header("x-accel-redirect"), "/internal/report.txt")


if __name__ == "__main__":
    harness.main()
