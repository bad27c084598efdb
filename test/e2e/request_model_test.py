"""One request model (issue 31, items 1 and 3): whichever engine took the
request, PHP and a proxied backend see the same host (HTTP_HOST, SERVER_NAME,
the Host sent on) and an explicit protocol (SERVER_PROTOCOL HTTP/1.1, or
HTTP/2.0 as nginx says it), and the client address after --real-ip-from
belongs to the request: REMOTE_ADDR, X-Forwarded-For to a backend and the
access log take each request's own X-Forwarded-For.

A matrix test (CTest runs it over HTTP/1.1, h2 and h2c). The HTTP/2-only cases
are raw frames on an h2c connection, run once (in the h2c run): :authority and
a host field that disagree, userinfo in :authority (each a 400, as nginx
answers and as HTTP/1.1 answers a bad Host; nghttp2 itself resets a stream
with two host fields or a '/' in :authority), a host field alone,
and concurrent streams from a trusted proxy, each with its own client.

Needs php-fpm (the suite installs it)."""
import http.server
import threading
import time
import unittest

import harness
import phpfpm
from http2_test import END_HEADERS, END_STREAM, HEADERS, WIDE_OPEN, frame, hpack, read_streams

VARS = ("<?php foreach (['HTTP_HOST', 'SERVER_NAME', 'SERVER_PROTOCOL', 'REMOTE_ADDR']"
        " as $k) echo $k, '=', $_SERVER[$k] ?? 'NULL', \"\\n\";\n")
# Slow enough that the streams of one connection overlap in lepus.
WHO = "<?php usleep(200000); echo $_SERVER['REMOTE_ADDR'] ?? 'NULL';\n"
TRUSTED = ["--real-ip-from", "127.0.0.1/32"]

# HPACK static table entries for the statuses a test expects (RFC 7541 Appendix A).
INDEXED_STATUS = {0x88: 200, 0x8c: 400, 0x8d: 404}


class EchoHandler(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the request head it received, as it came."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = (self.requestline + "\r\n" + "".join(
            "%s: %s\r\n" % (name, value) for name, value in self.headers.items())).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def vars_of(body):
    return dict(line.split("=", 1) for line in body.decode().splitlines() if "=" in line)


def status_of(head):
    """The :status of an HTTP/2 response's HPACK block (nghttp2 puts it first)."""
    if head is None:
        return None
    if head[0] in INDEXED_STATUS:
        return INDEXED_STATUS[head[0]]
    # A literal with the name ":status" (index 8): three digits follow its length.
    return int(head[head.index(b"\x03") + 1:][:3])


class RequestModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        # As many children as lepus may hold connections ("8 connections in all"):
        # an idle pooled connection of one reactor keeps a child, and the four
        # streams of the concurrent test must not wait for it.
        cls.fpm = phpfpm.PhpFpm(children=8)
        cls.backend = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
        cls.backend.daemon_threads = True
        threading.Thread(target=cls.backend.serve_forever, daemon=True).start()
        cls.scripts = cls.proxy = None
        try:
            cls.scripts = harness.Lepus(["--fastcgi", cls.fpm.address] + TRUSTED)
            cls.proxy = harness.Lepus(
                ["--proxy", "http://127.0.0.1:%d" % cls.backend.server_address[1]] + TRUSTED)
        except Exception:
            cls.tearDownClass()
            raise
        cls.scripts.write("vars.php", VARS)
        cls.scripts.write("who.php", WHO)

    @classmethod
    def tearDownClass(cls):
        try:
            for server in (cls.scripts, cls.proxy):
                if server:
                    server.stop(harness.LepusTestCase._Checker())
        finally:
            cls.backend.shutdown()
            cls.backend.server_close()
            cls.fpm.cleanup()

    def expected_protocol(self):
        return self.scripts.http_version

    def access_client(self, server, target):
        """The client address of the access-log line of `target` (the logger writes
        it a little after the answer)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for line in server.access_lines():
                if (' "GET %s ' % target) in line:
                    return line.split(" ", 1)[0]
            time.sleep(0.05)
        self.fail("no access-log line for %s" % target)

    # --- the host and the protocol, every engine -------------------------------

    def test_php_sees_the_host_and_the_protocol(self):
        # Over HTTP/2, curl sends the Host given here as :authority.
        response = self.scripts.fetch("/vars.php", headers=["Host: a.test:8080"])
        self.assertEqual(response.status, 200, response.body)
        got = vars_of(response.body)
        self.assertEqual(got["HTTP_HOST"], "a.test:8080")
        # No site names itself: the address the client reached, whatever the protocol.
        self.assertEqual(got["SERVER_NAME"], "127.0.0.1")
        self.assertEqual(got["SERVER_PROTOCOL"], self.expected_protocol())

    def test_php_sees_the_host_of_the_url(self):
        response = self.scripts.fetch("/vars.php")
        self.assertEqual(response.status, 200, response.body)
        authority = self.scripts.url("/").split("/")[2]  # 127.0.0.1:port of the listener
        got = vars_of(response.body)
        self.assertEqual(got["HTTP_HOST"], authority)

    def test_the_backend_gets_the_host_once(self):
        response = self.proxy.fetch("/echo", headers=["Host: b.test:81"])
        self.assertEqual(response.status, 200, response.body)
        lines = response.body.decode().split("\r\n")
        self.assertEqual(lines[0], "GET /echo HTTP/1.1")
        hosts = [line for line in lines if line.lower().startswith("host:")]
        self.assertEqual(hosts, ["Host: b.test:81"], lines)
        self.assertIn("X-Forwarded-Host: b.test:81", lines)

    # --- the client address, per request ----------------------------------------

    def test_php_and_the_access_log_see_each_requests_client(self):
        for n, client in ((1, "203.0.113.7"), (2, "198.51.100.8"), (3, None)):
            target = "/vars.php?serial=%d" % n
            headers = ["X-Forwarded-For: %s" % client] if client else []
            response = self.scripts.fetch(target, headers=headers)
            self.assertEqual(response.status, 200, response.body)
            self.assertEqual(vars_of(response.body)["REMOTE_ADDR"], client or "127.0.0.1")
            self.assertEqual(self.access_client(self.scripts, target), client or "127.0.0.1")

    def test_the_backend_gets_each_requests_client(self):
        for n, client in ((1, "203.0.113.9"), (2, "198.51.100.10")):
            target = "/echo?serial=%d" % n
            response = self.proxy.fetch(target, headers=["X-Forwarded-For: %s" % client])
            self.assertEqual(response.status, 200, response.body)
            lines = response.body.decode().split("\r\n")
            # The client's list, then the client lepus took (nginx's
            # $proxy_add_x_forwarded_for after real_ip).
            self.assertIn("X-Forwarded-For: %s, %s" % (client, client), lines)
            forwarded = "Forwarded: for=%s;proto=%s;" % (
                client, "https" if self.proxy.over_tls else "http")
            self.assertTrue(any(line.startswith(forwarded) for line in lines), lines)
            self.assertEqual(self.access_client(self.proxy, target), client)

    # --- HTTP/2 only: raw frames on h2c -----------------------------------------

    def h2c_streams(self, server, requests):
        """Sends every request ({stream: [(name, value)...]}) at once on one new
        h2c connection; {stream: (status, body)}."""
        self.require_h2c()
        blocks = b"".join(frame(HEADERS, END_HEADERS | END_STREAM, stream, hpack(fields))
                          for stream, fields in requests.items())
        with server.connect() as sock:
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + WIDE_OPEN + blocks)
            got = read_streams(sock, list(requests))
        return {stream: (status_of(head), body) for stream, (head, body) in got.items()}

    def require_h2c(self):
        if harness.PROTOCOL == "h1":
            self.skipTest("HTTP/2 only: :authority and streams are HTTP/2's")
        if harness.PROTOCOL != "h2c":
            self.skipTest("HTTP/2 raw frames run once, in the h2c run")

    @staticmethod
    def fields(path, authority=None, extra=()):
        out = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", path)]
        if authority is not None:
            out.append((b":authority", authority))
        return out + list(extra)

    def test_authority_and_a_different_host_field_are_refused(self):
        # RFC 9113 §8.3.1: both present, they must be the same; else malformed.
        # The same connection goes on: stream 3 agrees (in another case) and is served.
        got = self.h2c_streams(self.scripts, {
            1: self.fields(b"/vars.php", b"b.test", [(b"host", b"a.test")]),
            3: self.fields(b"/vars.php", b"c.test", [(b"host", b"C.test")])})
        self.assertEqual(got[1][0], 400, got[1])
        self.assertEqual(got[3][0], 200, got[3])
        self.assertEqual(vars_of(got[3][1])["HTTP_HOST"], "c.test")

    def test_userinfo_in_the_host_is_refused_as_over_http1(self):
        got = self.h2c_streams(self.proxy, {
            1: self.fields(b"/echo", b"evil@a.test"),
            3: self.fields(b"/echo", None, [(b"host", b"evil@a.test")]),
            5: self.fields(b"/echo", b"a.test:8080@b.test")})
        for stream in (1, 3, 5):
            self.assertEqual(got[stream][0], 400, (stream, got[stream]))
        # The same over HTTP/1.1.
        with self.proxy.connect() as sock:
            sock.sendall(b"GET /echo HTTP/1.1\r\nHost: evil@a.test\r\nConnection: close\r\n\r\n")
            self.assertEqual(harness.read_response(sock).status, 400)

    def test_a_host_field_alone_is_the_host(self):
        got = self.h2c_streams(self.scripts, {
            1: self.fields(b"/vars.php", None, [(b"host", b"a.test:8080")])})
        self.assertEqual(got[1][0], 200, got[1])
        variables = vars_of(got[1][1])
        self.assertEqual(variables["HTTP_HOST"], "a.test:8080")
        self.assertEqual(variables["SERVER_PROTOCOL"], "HTTP/2.0")

    def test_concurrent_streams_from_a_trusted_proxy_keep_their_clients(self):
        """Four streams of one connection from 127.0.0.1 (trusted), each naming
        another client, all in PHP at once: each sees its own in REMOTE_ADDR
        and has it in its access-log line."""
        clients = {1: "203.0.113.1", 3: "203.0.113.3", 5: "203.0.113.5", 7: "203.0.113.7"}
        requests = {stream: self.fields(b"/who.php?stream=%d" % stream, b"localhost",
                                        [(b"x-forwarded-for", client.encode())])
                    for stream, client in clients.items()}
        got = self.h2c_streams(self.scripts, requests)
        for stream, client in clients.items():
            self.assertEqual(got[stream], (200, client.encode()), stream)
        for stream, client in clients.items():
            self.assertEqual(self.access_client(self.scripts, "/who.php?stream=%d" % stream),
                             client, stream)


if __name__ == "__main__":
    harness.main()
