"""Compression end to end (issue 18): static text files compressed once per
coding and kept; .br/.zst/.gz siblings served as they are; PHP output
compressed as it streams, burst by burst. Every body is decoded by a real
decoder (Python's gzip, Debian's `brotli` and `zstd` commands) and compared
with the original; negotiation edge cases (q=0, *, identity;q=0 -> 406);
never for ranges, HEAD, 304 or what is not text; --compress off.

A matrix test (issue 31): CTest runs it over HTTP/1.1, h2 and h2c, every
request through harness.Lepus.fetch() but the burst check, which reads the
chunked framing of HTTP/1.1."""
import gzip
import os
import shutil
import socket
import subprocess
import time
import unittest

import harness
import phpfpm

PAGE = "".join("<p>line %d of a page that compresses well, as HTML does</p>\n" % i
               for i in range(3000)).encode()


def decode(coding, body):
    if coding == "gzip":
        return gzip.decompress(body)
    tool = {"br": ["brotli", "-d", "-c"], "zstd": ["zstd", "-d", "-c", "-q"]}[coding]
    return subprocess.run(tool, input=body, capture_output=True, check=True, timeout=30).stdout


def fetch(server, path, accept=None):
    """(status, headers with lower-case names, body as sent: no decoding) over
    the run's protocol (harness.Lepus.fetch)."""
    response = server.fetch(path, headers=[accept_encoding(accept)] if accept else [])
    return response.status, response.headers, response.body


def accept_encoding(value):
    # curl drops a header given with an empty value; "Name;" sends it empty.
    return "Accept-Encoding: " + value if value else "Accept-Encoding;"


def have(program):
    return shutil.which(program) is not None


class StaticCompression(harness.LepusTestCase):
    @classmethod
    def populate(cls, server):
        server.write("page.html", PAGE)
        server.write("tiny.txt", "tiny\n")
        server.write("photo.png", os.urandom(4096))
        server.write("app.js", b"var a = 1;\n" * 2000)
        server.write("app.js.br", b"precompressed-br")  # a sibling is served as it is

    def get(self, path, accept, extra=(), method="GET"):
        return self.server.fetch(path, headers=[accept_encoding(accept)] + list(extra),
                                 method=method)

    def test_each_coding_decodes_to_the_original(self):
        for coding in ("gzip", "br", "zstd"):
            if coding != "gzip" and not have({"br": "brotli", "zstd": "zstd"}[coding]):
                continue
            r = self.get("/page.html", coding)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.headers.get("content-encoding"), coding)
            self.assertEqual(r.headers.get("vary"), "Accept-Encoding")
            self.assertTrue(r.headers["etag"].startswith('W/"'), r.headers["etag"])
            self.assertLess(len(r.body), len(PAGE) // 4)
            self.assertEqual(int(r.headers["content-length"]), len(r.body))
            self.assertEqual(decode(coding, r.body), PAGE, coding)

    def test_negotiation(self):
        cases = [("gzip, deflate, br, zstd", "br"), ("gzip, zstd", "zstd"),
                 ("br;q=0.5, gzip", "gzip"), ("br;q=0, gzip;q=0", None), ("*", "br"),
                 ("", None), ("deflate", None), ("identity", None)]
        for accept, expected in cases:
            r = self.get("/page.html", accept)
            self.assertEqual(r.status, 200, accept)
            self.assertEqual(r.headers.get("content-encoding"), expected, accept)
            self.assertEqual(r.headers.get("vary"), "Accept-Encoding", accept)
        for accept in ("identity;q=0", "*;q=0", "gzip;q=0, identity;q=0"):
            self.assertEqual(self.get("/page.html", accept).status, 406, accept)

    def test_not_for_ranges_head_304_small_or_binary(self):
        r = self.get("/page.html", "gzip", ["Range: bytes=0-99"])
        self.assertEqual((r.status, r.body), (206, PAGE[:100]))
        self.assertIsNone(r.headers.get("content-encoding"))
        head = self.get("/page.html", "gzip", method="HEAD")
        self.assertEqual((head.status, head.body), (200, b""))
        etag = self.get("/page.html", "gzip").headers["etag"]
        self.assertEqual(self.get("/page.html", "gzip", ["If-None-Match: " + etag]).status, 304)
        small = self.get("/tiny.txt", "gzip")
        self.assertEqual((small.body, small.headers.get("content-encoding")), (b"tiny\n", None))
        photo = self.get("/photo.png", "gzip, br")
        self.assertIsNone(photo.headers.get("content-encoding"))
        self.assertIsNone(photo.headers.get("vary"))

    def test_precompressed_sibling_wins_over_making_one(self):
        r = self.get("/app.js", "br")
        self.assertEqual((r.body, r.headers.get("content-encoding")), (b"precompressed-br", "br"))
        r = self.get("/app.js", "gzip")
        self.assertEqual(r.headers.get("content-encoding"), "gzip")
        self.assertEqual(gzip.decompress(r.body), b"var a = 1;\n" * 2000)


class CompressOff(harness.LepusTestCase):
    ARGS = ["--compress", "off"]

    @classmethod
    def populate(cls, server):
        server.write("page.html", PAGE)

    def test_nothing_is_compressed(self):
        r = self.server.fetch("/page.html", headers=["Accept-Encoding: gzip, br, zstd"])
        self.assertEqual((r.status, r.body), (200, PAGE))
        self.assertIsNone(r.headers.get("content-encoding"))


class CompressFalseInTheConfigFile(unittest.TestCase):
    def test_top_level_false_and_per_site(self):
        tmp = harness.temp_dir(self)
        config = os.path.join(tmp, "lepus.toml")
        on, off = os.path.join(tmp, "on"), os.path.join(tmp, "off")
        for root in (on, off):
            os.makedirs(root)
            with open(os.path.join(root, "page.html"), "wb") as f:
                f.write(PAGE)
        with open(config, "w") as f:
            f.write('compress = false\n[[site]]\nserver_names = ["on.test"]\nroot = "%s"\n'
                    'compress = true\n[[site]]\nserver_names = ["off.test"]\nroot = "%s"\n'
                    % (on, off))
        server = harness.Lepus(["--config", config])
        self.addCleanup(server.stop, self)
        for host, expected in (("on.test", "gzip"), ("off.test", None)):
            r = server.fetch("/page.html", headers=["Host: " + host, "Accept-Encoding: gzip"])
            self.assertEqual(r.headers.get("content-encoding"), expected, host)


class PhpCompression(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.fpm, cls.server = phpfpm.start_site(cls, children=4)
        cls.server.write("page.php", "<?php for ($i = 0; $i < 3000; $i++) "
                         "echo \"<p>line $i of a page that compresses well, as HTML does</p>\\n\";\n")
        # php.ini's output_buffering keeps 4 KiB: end PHP's own buffering first.
        cls.server.write("bursts.php", "<?php\nwhile (ob_get_level()) ob_end_flush();\n"
                         "echo str_repeat('first burst of the page ', 100), \"\\n\"; flush();\n"
                         "usleep(1500000);\n"
                         "echo str_repeat('second burst ', 100), \"\\n\";\n")
        cls.server.write("image.php", "<?php header('Content-Type: image/png'); "
                         "echo str_repeat('x', 5000);\n")

    def test_php_output_is_compressed_in_each_coding(self):
        for coding in ("gzip", "br", "zstd"):
            if coding != "gzip" and not have({"br": "brotli", "zstd": "zstd"}[coding]):
                continue
            status, headers, body = fetch(self.server, "/page.php", coding)
            self.assertEqual(status, 200)
            self.assertEqual(headers.get("content-encoding"), coding)
            self.assertEqual(headers.get("vary"), "Accept-Encoding")
            # A page that is all there when its head goes out gets a length;
            # else it is chunked. Either way the length is the compressed one.
            if "content-length" in headers:
                self.assertEqual(int(headers["content-length"]), len(body))
            self.assertTrue(decode(coding, body) == PAGE, coding)

    def test_not_for_binary_types_or_clients_without_codings(self):
        status, headers, body = fetch(self.server, "/image.php", "gzip")
        self.assertEqual((status, headers.get("content-encoding")), (200, None))
        self.assertTrue(body == b"x" * 5000)
        status, headers, body = fetch(self.server, "/page.php")
        self.assertEqual((status, headers.get("content-encoding")), (200, None))
        self.assertTrue(body == PAGE)

    def test_the_first_burst_arrives_before_the_script_ends(self):
        if self.server.protocol != "h1":
            self.skipTest("HTTP/1.1 framing: the first chunk shows the first burst; curl "
                          "does not show where HTTP/2 DATA frames end")
        with self.server.connect(timeout=10) as s:
            s.sendall(b"GET /bursts.php HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
                      b"Connection: close\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            self.assertIn(b"Content-Encoding: gzip", head)
            self.assertIn(b"Transfer-Encoding: chunked", head)
            # The first chunk: its size line, then that many bytes.
            while b"\r\n" not in rest:
                rest += s.recv(65536)
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            while len(rest) < size:
                rest += s.recv(65536)
            first = rest[:size]
            # The second burst comes 1.5 s after the first: what is here now is
            # the first burst alone, decodable already (a sync flush).
            decoder = __import__("zlib").decompressobj(16 + 15)
            text = decoder.decompress(first)
            self.assertIn(b"first burst of the page", text)
            self.assertNotIn(b"second burst", text)


if __name__ == "__main__":
    harness.main()
