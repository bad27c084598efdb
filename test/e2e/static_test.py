"""Static files end to end (issue 4): methods, headers, conditional requests,
ranges, directories, precompressed siblings, traversal attempts, the parser's
error statuses, pipelining, slow clients, and the access log.

A matrix test (issue 31): CTest runs it over HTTP/1.1, h2 and h2c. The file
features go through harness.Lepus.fetch(); the checks of HTTP/1.1 framing
(pipelining, keep-alive, 100-continue, the parser's answers, a slow reader of
one connection) speak raw HTTP/1.1 and say so when skipped over HTTP/2."""
import gzip
import hashlib
import os
import re
import socket
import time

import harness
from harness import LepusTestCase, read_response, is_closed, recv_until

HOST = "Host: localhost\r\n"


class StaticFiles(LepusTestCase):
    ARGS = ("--threads", "2", "--max-body-size", "64k")

    @classmethod
    def populate(cls, server):
        server.write("index.html", "<h1>home</h1>\n")
        server.write("hello.txt", "hello, world\n")
        server.write("style.css", "body{}\n")
        server.write("data.json", "{}\n")
        server.write("blob.unknownext", b"\x00\x01")
        server.write("digits.txt", "0123456789" * 10)
        server.write("docs/index.html", "<p>docs</p>")
        server.write("empty/.keep", "")
        server.write("app.js", "console.log(1);\n" * 100)
        with open(os.path.join(server.root, "app.js.gz"), "wb") as f:
            f.write(gzip.compress(b"console.log(1);\n" * 100))
        server.write(".git/config", "[core]\n")
        server.write(".env", "SECRET=1\n")
        cls.big = os.urandom(1 << 20) * 10
        server.write("big.bin", cls.big)
        # Kept whole in the file cache (under 128 KiB), and large enough that a
        # plain connection sends it from the file by sendfile (16 KiB and up).
        cls.medium = os.urandom(100 << 10)
        server.write("medium.bin", cls.medium)
        os.symlink("/etc", os.path.join(server.root, "etc-link"))
        os.symlink("/etc/passwd", os.path.join(server.root, "passwd-link"))
        os.symlink("hello.txt", os.path.join(server.root, "hello-link.txt"))
        server.write("space name.txt", "spaced")

    def get(self, path, *headers, method="GET"):
        return self.server.fetch(path, headers=list(headers), method=method)

    def http1_only(self, why):
        if self.server.protocol != "h1":
            self.skipTest("HTTP/1.1 framing: " + why)

    # --- methods and headers ------------------------------------------------
    def test_get_file_with_headers(self):
        r = self.get("/hello.txt")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"hello, world\n")
        self.assertEqual(r.header("content-type"), "text/plain; charset=utf-8")
        self.assertEqual(r.header("content-length"), "13")
        self.assertEqual(r.header("server"), "lepus")
        self.assertEqual(r.header("accept-ranges"), "bytes")
        self.assertRegex(r.header("date"), r"^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$")
        self.assertRegex(r.header("last-modified"), r"GMT$")
        self.assertRegex(r.header("etag"), r'^"[0-9a-f]+-[0-9a-f]+"$')

    def test_content_types(self):
        self.assertEqual(self.get("/style.css").header("content-type"), "text/css; charset=utf-8")
        self.assertIn("application/json", self.get("/data.json").header("content-type"))
        self.assertEqual(self.get("/blob.unknownext").header("content-type"),
                         "application/octet-stream")
        self.assertEqual(self.get("/").header("content-type"), "text/html; charset=utf-8")

    def test_head_has_headers_and_no_body(self):
        head = self.get("/hello.txt", method="HEAD")
        self.assertEqual((head.status, head.body), (200, b""))
        self.assertEqual(head.header("content-length"), "13")

    def test_head_sends_no_body_bytes_before_the_next_response(self):
        self.http1_only("a HEAD and a GET pipelined on one connection")
        with self.server.connect() as s:
            s.sendall(b"HEAD /hello.txt HTTP/1.1\r\n" + HOST.encode() + b"\r\n"
                      b"GET /hello.txt HTTP/1.1\r\n" + HOST.encode() + b"Connection: close\r\n\r\n")
            head = read_response(s, head_only=True)
            self.assertEqual(head.status, 200)
            self.assertEqual(head.header("content-length"), "13")
            # The next response starts right after the HEAD's headers: no body was sent.
            get = read_response(s, buffer=head.leftover)
            self.assertEqual(get.body, b"hello, world\n")

    def test_options_and_other_methods(self):
        r = self.get("/hello.txt", method="OPTIONS")
        self.assertEqual(r.status, 204)
        self.assertIn("GET", r.header("allow"))
        for method in ("DELETE", "PUT", "PATCH", "TRACE"):
            r = self.get("/hello.txt", method=method)
            self.assertEqual(r.status, 405, method)
            self.assertIn("HEAD", r.header("allow"))

    def test_post_body_is_discarded_and_connection_reused(self):
        self.http1_only("Content-Length and chunked bodies pipelined on one connection")
        with self.server.connect() as s:
            s.sendall(b"POST /hello.txt HTTP/1.1\r\n" + HOST.encode() +
                      b"Content-Length: 5\r\n\r\nabcde"
                      b"POST /hello.txt HTTP/1.1\r\n" + HOST.encode() +
                      b"Transfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n"
                      b"GET /hello.txt HTTP/1.1\r\n" + HOST.encode() + b"\r\n")
            first = read_response(s)
            self.assertEqual(first.status, 405)
            second = read_response(s, buffer=first.leftover)
            self.assertEqual(second.status, 405)
            third = read_response(s, buffer=second.leftover)
            self.assertEqual((third.status, third.body), (200, b"hello, world\n"))

    def test_body_too_large_gets_413(self):
        r = self.server.fetch("/hello.txt", method="POST", body=b"x" * 70000)
        self.assertEqual(r.status, 413)

    def test_body_too_large_closes_the_connection(self):
        self.http1_only("Connection: close after a declared length")
        r = self.server.request("POST /hello.txt HTTP/1.1\r\n" + HOST +
                                "Content-Length: 1000000\r\n\r\n")
        self.assertEqual(r.status, 413)
        self.assertEqual(r.header("connection"), "close")

    def test_expect_100_continue(self):
        self.http1_only("the interim 100 response before the body is sent")
        with self.server.connect() as s:
            s.sendall(b"POST /hello.txt HTTP/1.1\r\n" + HOST.encode() +
                      b"Content-Length: 4\r\nExpect: 100-continue\r\n\r\n")
            interim = read_response(s)
            self.assertEqual(interim.status, 100)
            s.sendall(b"body")
            final = read_response(s, buffer=interim.leftover)
            self.assertEqual(final.status, 405)

    # --- conditional requests -----------------------------------------------
    def test_conditional_requests(self):
        r = self.get("/hello.txt")
        etag, modified = r.header("etag"), r.header("last-modified")
        self.assertEqual(self.get("/hello.txt", "If-None-Match: " + etag).status, 304)
        self.assertEqual(self.get("/hello.txt", 'If-None-Match: "x", W/' + etag).status, 304)
        self.assertEqual(self.get("/hello.txt", "If-None-Match: *").status, 304)
        self.assertEqual(self.get("/hello.txt", 'If-None-Match: "other"').status, 200)
        self.assertEqual(self.get("/hello.txt", "If-Modified-Since: " + modified).status, 304)
        self.assertEqual(self.get("/hello.txt",
                                  "If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT").status, 200)
        self.assertEqual(self.get("/hello.txt", 'If-Match: "other"').status, 412)
        self.assertEqual(self.get("/hello.txt", "If-Match: " + etag).status, 200)
        self.assertEqual(self.get("/hello.txt",
                                  "If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT").status, 412)
        not_modified = self.get("/hello.txt", "If-None-Match: " + etag)
        self.assertEqual(not_modified.body, b"")
        self.assertEqual(not_modified.header("etag"), etag)

    # --- ranges ---------------------------------------------------------------
    def test_single_ranges(self):
        r = self.get("/digits.txt", "Range: bytes=0-4")
        self.assertEqual((r.status, r.body), (206, b"01234"))
        self.assertEqual(r.header("content-range"), "bytes 0-4/100")
        r = self.get("/digits.txt", "Range: bytes=95-")
        self.assertEqual((r.status, r.body), (206, b"56789"))
        r = self.get("/digits.txt", "Range: bytes=-3")
        self.assertEqual((r.status, r.body), (206, b"789"))
        r = self.get("/big.bin", "Range: bytes=5000000-5000099")
        self.assertEqual((r.status, r.body), (206, self.big[5000000:5000100]))

    def test_a_cached_file_whole_and_in_ranges(self):
        for _ in range(2):  # the first request loads the cache, the second is served from it
            r = self.get("/medium.bin")
            self.assertEqual((r.status, r.body), (200, self.medium))
        r = self.get("/medium.bin", "Range: bytes=30000-59999")  # 30,000 bytes: from the file
        self.assertEqual((r.status, r.body), (206, self.medium[30000:60000]))
        r = self.get("/medium.bin", "Range: bytes=-100")  # 100 bytes: from memory
        self.assertEqual((r.status, r.body), (206, self.medium[-100:]))

    def test_a_cached_file_pipelined(self):
        self.http1_only("three requests pipelined on one connection")
        request = (b"GET /medium.bin HTTP/1.1\r\nHost: x\r\n\r\n"
                   b"GET /medium.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-40999\r\n\r\n"
                   b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
        with self.server.connect() as s:
            s.sendall(request)
            first = harness.read_response(s)
            second = harness.read_response(s, buffer=first.leftover)
            third = harness.read_response(s, buffer=second.leftover)
        self.assertEqual((first.status, first.body), (200, self.medium))
        self.assertEqual((second.status, second.body), (206, self.medium[1000:41000]))
        self.assertEqual((third.status, third.body), (200, b"hello, world\n"))

    def test_unsatisfiable_and_multiple_ranges(self):
        r = self.get("/digits.txt", "Range: bytes=500-600")
        self.assertEqual(r.status, 416)
        self.assertEqual(r.header("content-range"), "bytes */100")
        r = self.get("/digits.txt", "Range: bytes=0-1,5-6")
        self.assertEqual(r.status, 206)  # multipart/byteranges: response_details_test.py
        self.assertTrue(r.header("content-type").startswith("multipart/byteranges; boundary="))
        r = self.get("/digits.txt", "Range: bytes=0-,0-")  # overlapping: whole file
        self.assertEqual((r.status, len(r.body)), (200, 100))
        r = self.get("/digits.txt", "Range: bytes=abc")
        self.assertEqual(r.status, 200)

    def test_if_range(self):
        etag = self.get("/digits.txt").header("etag")
        r = self.get("/digits.txt", "Range: bytes=0-1", "If-Range: " + etag)
        self.assertEqual(r.status, 206)
        r = self.get("/digits.txt", "Range: bytes=0-1", 'If-Range: "stale"')
        self.assertEqual(r.status, 200)

    # --- directories --------------------------------------------------------
    def test_directory_redirect_keeps_query(self):
        r = self.get("/docs?x=1")
        self.assertEqual(r.status, 301)
        self.assertTrue(r.header("location").endswith("/docs/?x=1"), r.header("location"))

    def test_directory_index_and_missing_index(self):
        r = self.get("/docs/")
        self.assertEqual((r.status, r.body), (200, b"<p>docs</p>"))
        self.assertEqual(self.get("/empty/").status, 404)
        self.assertEqual(self.get("/nothing/here").status, 404)

    def test_percent_encoded_name(self):
        self.assertEqual(self.get("/space%20name.txt").body, b"spaced")

    # --- precompressed siblings -----------------------------------------------
    def test_gzip_sibling(self):
        r = self.get("/app.js", "Accept-Encoding: gzip, deflate")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("content-encoding"), "gzip")
        self.assertIn("Accept-Encoding", r.header("vary"))
        self.assertEqual(gzip.decompress(r.body), b"console.log(1);\n" * 100)
        plain = self.get("/app.js")
        self.assertIsNone(plain.header("content-encoding"))
        self.assertEqual(plain.body, b"console.log(1);\n" * 100)

    # --- safety ---------------------------------------------------------------
    def test_traversal_attempts_never_leave_the_root(self):
        for path in ("/../etc/passwd", "/%2e%2e/etc/passwd", "/docs/..%2f..%2fetc/passwd",
                     "/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/docs/../../etc/passwd",
                     "/etc-link/passwd", "/passwd-link", "/a/%00/b", "/hello.txt%00.html",
                     "/%zz"):
            r = self.get(path)
            self.assertIn(r.status, (400, 403, 404), path)
            self.assertNotIn(b"root:", r.body, path)

    def test_symlink_inside_root_is_served(self):
        self.assertEqual(self.get("/hello-link.txt").body, b"hello, world\n")

    def test_well_known_is_served_whatever_dotfiles_says(self):
        # RFC 8615 (issue 34): certbot --webroot writes its token there.
        self.server.write(".well-known/acme-challenge/tok3n", "tok3n.key\n")
        self.server.write(".well-known/security.txt", "Contact: mailto:a@b.test\n")
        self.server.write(".well-known/.hidden", "no\n")
        r = self.get("/.well-known/acme-challenge/tok3n")
        self.assertEqual((r.status, r.body), (200, b"tok3n.key\n"))
        self.assertEqual(self.get("/.well-known/security.txt").status, 200)
        self.assertEqual(self.get("/.well-known/.hidden").status, 404)

    def test_dotfiles_hidden(self):
        self.assertEqual(self.get("/.git/config").status, 404)
        self.assertEqual(self.get("/.env").status, 404)
        self.assertEqual(self.get("/%2egit/config").status, 404)

    # --- the parser's answers -----------------------------------------------
    def test_bad_requests(self):
        self.http1_only("malformed HTTP/1.1 heads (http2_attacks_test has HTTP/2's)")
        cases = [
            (b"GET / HTTP/1.1\r\n\r\n", 400),                           # no Host
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),      # two Hosts
            (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),                # space before colon
            (b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400),      # obs-fold
            (b"GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", 400),           # bare CR
            (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", 400),    # NUL
            (b"BR(EW / HTTP/1.1\r\nHost: a\r\n\r\n", 400),               # no method token
            (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            # RFC 9112 §6.3: chunked must be the final coding (400); an unknown coding is 501.
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400),
            (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n", 414),
            (b"GET / HTTP/1.1\r\nHost: a\r\n" + b"X-A: b\r\n" * 120 + b"\r\n", 431),
            (b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n", 431),
        ]
        for raw, status in cases:
            r = self.server.request(raw)
            self.assertEqual(r.status, status, raw[:60])
            self.assertEqual(r.header("connection"), "close", raw[:60])
            self.assertIn(str(status).encode(), r.body)
        # RFC 9110 §9.1: a method lepus does not know is a method (a backend's,
        # issue 37); with files only, nothing implements it: 501, from the files.
        r = self.server.request(b"BREW / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        self.assertEqual(r.status, 501)

    def test_error_closes_the_connection(self):
        self.http1_only("Content-Length with chunked, then the close")
        with self.server.connect() as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
            r = read_response(s)
            self.assertEqual(r.status, 400)
            self.assertTrue(is_closed(s))

    # --- connections ----------------------------------------------------------
    def test_http10_keepalive(self):
        self.http1_only("HTTP/1.0 keep-alive")
        with self.server.connect() as s:
            s.sendall(b"GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            r = read_response(s)
            self.assertEqual(r.header("connection"), "keep-alive")
            s.sendall(b"GET /hello.txt HTTP/1.0\r\n\r\n")
            r = read_response(s, buffer=r.leftover)
            self.assertEqual(r.body, b"hello, world\n")
            self.assertTrue(is_closed(s))

    def test_pipeline_of_100_requests(self):
        self.http1_only("pipelining (http2_test has many streams on one connection)")
        paths = ["/hello.txt", "/digits.txt", "/style.css", "/missing"] * 25
        raw = b"".join(b"GET %s HTTP/1.1\r\nHost: a\r\n\r\n" % p.encode() for p in paths)
        with self.server.connect() as s:
            s.sendall(raw)
            leftover = b""
            for p in paths:
                r = read_response(s, buffer=leftover)
                leftover = r.leftover
                expected = 404 if p == "/missing" else 200
                self.assertEqual(r.status, expected, p)
                if p == "/hello.txt":
                    self.assertEqual(r.body, b"hello, world\n")

    def test_one_byte_at_a_time(self):
        self.http1_only("a request head split at every byte")
        raw = b"GET /hello.txt HTTP/1.1\r\nHost: a\r\nUser-Agent: slow\r\n\r\n"
        with self.server.connect() as s:
            for byte in raw:
                s.sendall(bytes([byte]))
                time.sleep(0.002)
            r = read_response(s)
            self.assertEqual((r.status, r.body), (200, b"hello, world\n"))

    def test_big_file_intact_for_slow_reader(self):
        self.http1_only("a small receive window of one plain socket (http2_test has a "
                        "stream its reader does not drain)")
        with self.server.connect() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
            s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            data = harness.read_slowly_to_end(s, 2 << 20)
        head, body = data.split(b"\r\n\r\n", 1)
        self.assertIn(b"200 OK", head)
        self.assertEqual(hashlib.md5(body).hexdigest(), hashlib.md5(self.big).hexdigest())

    def test_access_log_in_combined_format(self):
        self.get("/hello.txt?q=1", "User-Agent: tester/1.0", "Referer: http://r/")
        version = re.escape(self.server.http_version[len("HTTP/"):])
        pattern = re.compile(r'^127\.0\.0\.1 - - \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] '
                             r'"GET /hello\.txt\?q=1 HTTP/%s" 200 13 "http://r/" "tester/1\.0"$'
                             % version)
        deadline = time.time() + 5
        while time.time() < deadline:
            if any(pattern.match(line) for line in self.server.access_lines()):
                return
            time.sleep(0.2)
        self.fail("no matching access log line in:\n" + "\n".join(self.server.access_lines()[-5:]))


class AutoIndex(LepusTestCase):
    ARGS = ("--autoindex",)

    @classmethod
    def populate(cls, server):
        server.write("files/b.txt", "b")
        server.write("files/a <&>.txt", "a")
        server.write("files/.hidden", "h")

    def test_listing_is_sorted_and_escaped(self):
        r = self.server.fetch("/files/")
        self.assertEqual(r.status, 200)
        body = r.body.decode()
        self.assertIn("a &lt;&amp;&gt;.txt", body)
        self.assertLess(body.index("a &lt;"), body.index("b.txt"))
        self.assertNotIn(".hidden", body)


if __name__ == "__main__":
    harness.main()
