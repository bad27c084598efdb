"""The HTTP reverse proxy (issue 20): lepus in front of a backend written for
these tests (Backend below: Python's threaded http.server with misbehaving
modes chosen by the query string), on TCP and on a Unix socket.

Checks what a client and the backend see: the request as forwarded (hop-by-hop
fields dropped, X-Forwarded-* and Forwarded, Host passed or rewritten, bodies
streamed with Content-Length and chunked), static files first, path prefixes,
the keepalive pool (one backend connection for many requests), the retry of an
idempotent request whose pooled connection the backend closed (never a POST),
round robin over several backends with a refusing one skipped, and the errors:
down 502, queue full 503 + Retry-After, slow 504, malformed 502 (garbage, a
head over --proxy-head-max, a 101 nobody asked for, a short Content-Length),
and a torn response closing the client connection. The overload test drives
2x and 3x what the backend can serve with clients that give up, as the FastCGI
one does: every request ends (200 or 503), goodput holds, no descriptor leaks.
"""
import base64
import hashlib
import http.server
import json
import os
import signal
import subprocess
import socket
import socketserver
import threading
import time
import unittest

import harness
from harness import Lepus, read_response, recv_until


WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_accept(key):
    """RFC 6455 §4.2.2: the Sec-WebSocket-Accept for a Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()


def ws_frame(opcode, payload, mask):
    """One final frame (RFC 6455 §5.2); clients mask, servers do not."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([bit | 127]) + n.to_bytes(8, "big")
    if mask:
        key = os.urandom(4)
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        head += key
    return head + payload


def ws_read(read):
    """(opcode, payload) of the next frame; `read(n)` returns exactly n bytes."""
    b0, b1 = read(2)
    n = b1 & 0x7F
    if n == 126:
        n = int.from_bytes(read(2), "big")
    elif n == 127:
        n = int.from_bytes(read(8), "big")
    key = read(4) if b1 & 0x80 else None
    payload = read(n)
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return b0 & 0x0F, payload


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.requests_here = 0
        with self.server.lock:
            self.server.connections += 1

    def log_message(self, *args):
        pass

    def body(self):
        if "Content-Length" in self.headers:
            return self.rfile.read(int(self.headers["Content-Length"]))
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def raw(self, data):
        self.wfile.write(data)
        self.wfile.flush()

    def answer(self, status=200, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        self.requests_here += 1
        path, _, query = self.path.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        mode = params.get("mode", "echo")
        if mode == "stall-upload":  # reads the body only after a while, then counts it
            time.sleep(int(params.get("ms", "1500")) / 1000)
            self.answer(200, b"%d" % len(self.body()))
            return
        body = self.body()
        with self.server.lock:
            self.server.seen.append((self.command, self.path, dict(self.headers.items()), body))
        if mode == "echo":
            report = {"method": self.command, "path": self.path, "body": body.decode("latin-1"),
                      "headers": [[k, v] for k, v in self.headers.items()],
                      "backend": self.server.name}
            data = json.dumps(report).encode()
            self.answer(200, data, [("Content-Type", "application/json"), ("X-Backend", "yes"),
                                    ("Connection", "X-Secret"), ("X-Secret", "hop")])
        elif mode == "chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"one ", b"two ", b"three"):
                self.raw(b"%x\r\n%s\r\n" % (len(part), part))
                time.sleep(0.05)
            self.raw(b"0\r\nX-Trailer: t\r\n\r\n")
        elif mode == "big":
            size = int(params.get("size", "1000000"))
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = b"x" * 65536
            left = size if self.command != "HEAD" else 0
            while left:
                n = min(left, len(block))
                self.wfile.write(block[:n])
                left -= n
        elif mode == "close-delimited":
            self.raw(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end")
            self.close_connection = True
        elif mode == "slowhead":
            time.sleep(int(params.get("ms", "2000")) / 1000)
            self.answer(200, b"late\n")
        elif mode == "slowbody":
            self.send_response(200)
            self.send_header("Content-Length", "10")
            self.end_headers()
            self.raw(b"12345")
            time.sleep(int(params.get("ms", "2000")) / 1000)
            self.raw(b"67890")
        elif mode == "slow":  # a fixed service time, for the overload test
            time.sleep(int(params.get("ms", "100")) / 1000)
            self.answer(200, b"done\n")
        elif mode == "early-close":
            self.raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
            self.close_connection = True
        elif mode == "short":  # a Content-Length the body does not have
            self.raw(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort")
            self.close_connection = True
        elif mode == "nothing":
            self.close_connection = True
        elif mode == "garbage":
            self.raw(b"SPEAKING SOMETHING ELSE\r\n\r\n")
            self.close_connection = True
        elif mode == "bighead":
            self.raw(b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * int(params.get("size", "40000")) +
                     b"\r\nContent-Length: 2\r\n\r\nok")
        elif mode == "switch":  # 101 whether asked or not (the smuggling pattern)
            self.raw(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\n\r\n")
            self.close_connection = True
        elif mode == "interim":
            self.raw(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
            self.answer(200, b"after interim\n")
        elif mode == "ws":
            # A WebSocket echo (upper-cased) server, RFC 6455.
            if self.headers.get("Upgrade", "").lower() != "websocket":
                self.answer(426, b"upgrade required\n", [("Upgrade", "websocket")])
                return
            self.raw(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n" %
                     ws_accept(self.headers["Sec-WebSocket-Key"]).encode())
            self.close_connection = True
            read = self.rfile.read
            while True:
                try:
                    opcode, payload = ws_read(read)
                except (ValueError, OSError):
                    return
                if opcode == 8:  # close: answer it, then the TCP close
                    self.raw(ws_frame(8, payload, mask=False))
                    return
                self.raw(ws_frame(opcode, payload.upper(), mask=False))
        elif mode == "drop-reused":
            # Answers the first request of a connection; a later one finds it
            # closed (the keepalive race, made certain).
            if self.requests_here > 1:
                self.close_connection = True
                return
            self.answer(200, b"fresh connection\n")
        else:
            self.answer(404, b"unknown mode\n")

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = handle_any


class Backend(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, name="a", unix_path=None, port=0):
        self.name = name
        self.lock = threading.Lock()
        self.seen = []
        self.connections = 0
        if unix_path:
            self.address_family = socket.AF_UNIX
            socketserver.TCPServer.__init__(self, unix_path, Handler)
            self.address = "unix:" + unix_path
        else:
            http.server.HTTPServer.__init__(self, ("127.0.0.1", port), Handler)
            self.address = "http://127.0.0.1:%d" % self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def server_bind(self):
        if self.address_family == socket.AF_UNIX:
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = "localhost", 0
        else:
            http.server.HTTPServer.server_bind(self)

    def get_request(self):
        request, address = super().get_request()
        return request, address or ("unix", 0)

    def handle_error(self, request, client_address):
        pass  # lepus going away mid-answer (timeouts, torn responses) is expected here

    def stop(self):
        self.shutdown()
        self.server_close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(port, raw, timeout=20):
    """One request on a new connection: the Response, or None when lepus closed
    without a complete one."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        try:
            return read_response(s)
        except ConnectionError:
            return None


def wait_for_log(test, server, text):
    deadline = time.monotonic() + 5  # the error log is flushed once a second
    while text not in server.error_log_text():
        test.assertLess(time.monotonic(), deadline, "not in the error log: " + text)
        time.sleep(0.1)


def body_of(r):
    """The body as sent: lepus frames a streamed one with Content-Length when it
    had it all before the head went out, else chunked."""
    return dechunk(r.body) if r.header("transfer-encoding") == "chunked" else r.body


def dechunk(body):
    out = b""
    while True:
        size_line, body = body.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return out
        out, body = out + body[:size], body[size + 2:]


def get(port, path, headers=b"", method=b"GET"):
    return exchange(port, b"%s %s HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n%s\r\n" %
                    (method, path.encode(), headers))


class ProxyBasics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = Backend()
        cls.addClassCleanup(cls.backend.stop)
        cls.server = Lepus(["--proxy", cls.backend.address, "--threads", "1",
                            "--proxy-pool", "2", "--proxy-timeout", "1s",
                            "--proxy-head-max", "8k"])
        cls.server.write("static.txt", "static file\n")
        cls.server.write("dir/index.html", "index\n")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def echo(self, raw):
        r = exchange(self.server.port, raw)
        self.assertEqual(r.status, 200, r.body)
        return r, json.loads(r.body)

    def test_static_file_first_then_backend(self):
        r = get(self.server.port, "/static.txt")
        self.assertEqual((r.status, r.body), (200, b"static file\n"))
        self.assertIsNone(r.header("x-backend"))
        r = get(self.server.port, "/app/page?x=1&mode=echo")
        self.assertEqual(r.header("x-backend"), "yes")
        self.assertEqual(json.loads(r.body)["path"], "/app/page?x=1&mode=echo")

    def test_forwarded_headers_and_hop_by_hop(self):
        r, seen = self.echo(
            b"GET /x HTTP/1.1\r\nHost: app.test\r\nConnection: close, X-Drop\r\nX-Drop: 1\r\n"
            b"Keep-Alive: 5\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: x\r\n"
            b"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\nX-Kept: yes\r\n\r\n")
        headers = {k.lower(): v for k, v in seen["headers"]}
        for gone in ("x-drop", "keep-alive", "te", "upgrade", "proxy-connection"):
            self.assertNotIn(gone, headers)
        self.assertNotEqual(headers.get("connection", "").lower(), "close")
        self.assertEqual(headers["host"], "app.test")
        self.assertEqual(headers["x-kept"], "yes")
        self.assertEqual(headers["x-forwarded-for"], "203.0.113.7, 127.0.0.1")
        self.assertEqual(headers["x-forwarded-proto"], "http")  # the client's own is replaced
        self.assertEqual(headers["x-forwarded-host"], "app.test")
        self.assertEqual(headers["forwarded"], "for=127.0.0.1;proto=http;host=app.test")
        # The backend's hop-by-hop fields (X-Secret, named in its Connection) stay there.
        self.assertIsNone(r.header("x-secret"))
        self.assertEqual(r.header("content-type"), "application/json")

    def test_request_bodies_content_length_and_chunked(self):
        payload = b"a=1&b=" + b"z" * 200000
        r, seen = self.echo(b"POST /form HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n"
                            b"Connection: close\r\n\r\n%s" % (len(payload), payload))
        self.assertEqual(seen["body"].encode("latin-1"), payload)
        chunks = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        r, seen = self.echo(b"PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                            b"Connection: close\r\n\r\n" + chunks)
        self.assertEqual(seen["body"], "hello world")
        headers = {k.lower(): v for k, v in seen["headers"]}
        self.assertEqual(headers.get("transfer-encoding"), "chunked")

    def test_expect_continue_answered_by_lepus_not_forwarded(self):
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(b"POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n"
                      b"Expect: 100-continue\r\nConnection: close\r\n\r\n")
            interim = recv_until(s, b"\r\n\r\n")
            self.assertTrue(interim.startswith(b"HTTP/1.1 100 Continue\r\n"), interim)
            s.sendall(b"body")
            r = read_response(s, buffer=interim.split(b"\r\n\r\n", 1)[1])
        seen = json.loads(r.body)
        self.assertEqual(seen["body"], "body")
        self.assertNotIn("expect", [k.lower() for k, _ in seen["headers"]])

    def test_response_framings(self):
        r = get(self.server.port, "/c?mode=chunked")
        self.assertEqual(r.header("transfer-encoding"), "chunked")
        self.assertEqual((r.status, dechunk(r.body)), (200, b"one two three"))
        r = get(self.server.port, "/c?mode=close-delimited")
        self.assertEqual((r.status, body_of(r)), (200, b"until the end"))
        r = get(self.server.port, "/c?mode=interim")
        self.assertEqual((r.status, r.body), (200, b"after interim\n"))
        r = get(self.server.port, "/b?mode=big&size=3000000")
        self.assertEqual((r.status, len(r.body)), (200, 3000000))
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(b"HEAD /h?mode=big&size=1234 HTTP/1.1\r\nHost: h\r\n\r\n")
            r = read_response(s, head_only=True)
            self.assertEqual((r.status, r.header("content-length")), (200, "1234"))
            # No body followed: the connection serves the next request.
            s.sendall(b"GET /static.txt HTTP/1.1\r\nHost: h\r\n\r\n")
            r = read_response(s, buffer=r.leftover)
            self.assertEqual(r.body, b"static file\n")

    def test_keepalive_pool_reuses_backend_connections(self):
        before = self.backend.connections
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            for _ in range(20):
                s.sendall(b"GET /k?mode=echo HTTP/1.1\r\nHost: h\r\n\r\n")
                self.assertEqual(read_response(s).status, 200)
        for _ in range(10):
            self.assertEqual(get(self.server.port, "/k?mode=echo").status, 200)
        self.assertLessEqual(self.backend.connections - before, 2)

    def test_errors_502_504(self):
        cases = [("garbage", 502), ("bighead", 502), ("switch", 502), ("nothing", 502),
                 ("slowhead&ms=3000", 504)]
        for mode, status in cases:
            with self.subTest(mode=mode):
                r = get(self.server.port, "/e?mode=" + mode)
                self.assertEqual(r.status, status)
        # A Content-Length the backend does not keep: never a complete-looking
        # answer (502 when the end came before lepus sent the head, else a close).
        r = get(self.server.port, "/e?mode=short")
        self.assertTrue(r is None or r.status == 502, r and r.status)
        wait_for_log(self, self.server, "no answer within --proxy-timeout")
        wait_for_log(self, self.server, "response head too large")
        self.assertEqual(get(self.server.port, "/ok?mode=echo").status, 200)

    def test_torn_response_closes_the_client_connection(self):
        for mode in ("early-close", "slowbody&ms=3000"):
            with self.subTest(mode=mode):
                with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
                    s.sendall(b"GET /t?mode=%s HTTP/1.1\r\nHost: h\r\n\r\n" % mode.encode())
                    # A 502 when nothing was sent yet, else a response cut short and a close:
                    # never a complete-looking one.
                    try:
                        r = read_response(s)
                        self.assertEqual(r.status, 502)
                    except ConnectionError:
                        pass

    def test_keepalive_race_retried_for_get_never_for_post(self):
        # One backend connection (one reactor, pool 2: the LIFO pool hands the warm one).
        self.assertEqual(get(self.server.port, "/r?mode=drop-reused").status, 200)
        r = get(self.server.port, "/r?mode=drop-reused")
        self.assertEqual((r.status, r.body), (200, b"fresh connection\n"))
        self.assertEqual(get(self.server.port, "/r?mode=drop-reused").status, 200)
        r = exchange(self.server.port, b"POST /r?mode=drop-reused HTTP/1.1\r\nHost: h\r\n"
                     b"Content-Length: 1\r\nConnection: close\r\n\r\nx")
        self.assertEqual(r.status, 502)
        wait_for_log(self, self.server, "pooled connection was closed by the backend, retrying")


class ProxyWebSocket(unittest.TestCase):
    """WebSocket through lepus: the 101 the client asked for turns the
    connection into a tunnel (counted on the status page) until a close."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend()
        cls.addClassCleanup(cls.backend.stop)
        cls.server = Lepus(["--proxy", cls.backend.address, "--threads", "1",
                            "--status-path", "/_status", "--keepalive-timeout", "2s"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def open(self):
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(b"GET /chat?mode=ws HTTP/1.1\r\nHost: app.test\r\nUpgrade: websocket\r\n"
                  b"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                  b"Sec-WebSocket-Version: 13\r\n\r\n" % key.encode())
        data = recv_until(s, b"\r\n\r\n")
        head, rest = data.split(b"\r\n\r\n", 1)
        buffer = bytearray(rest)

        def read(n):
            while len(buffer) < n:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                buffer.extend(chunk)
            out = bytes(buffer[:n])
            del buffer[:n]
            return out

        return s, head.decode("latin-1"), key, read

    def reactor(self):
        return json.loads(get(self.server.port, "/_status").body)["reactors"][0]

    def tunnels(self):
        return self.reactor()["connections"]["tunnels"]

    def test_echo_through_the_tunnel(self):
        s, head, key, read = self.open()
        with s:
            self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
            self.assertIn("Sec-WebSocket-Accept: " + ws_accept(key), head)
            self.assertIn("Upgrade: websocket", head)
            reactor = self.reactor()
            self.assertEqual(reactor["connections"]["tunnels"], 1)
            # The tunnel's backend connection has left the pool (issue 32).
            self.assertEqual((reactor["proxy"]["busy"], reactor["proxy"]["tunnels"]), (0, 1))
            s.sendall(ws_frame(1, b"hello", mask=True))
            self.assertEqual(ws_read(read), (1, b"HELLO"))
            big = os.urandom(300000).hex().encode()[:300000].lower()
            s.sendall(ws_frame(2, big, mask=True))
            self.assertEqual(ws_read(read), (2, big.upper()))
            s.sendall(ws_frame(8, b"\x03\xe8", mask=True))
            self.assertEqual(ws_read(read), (8, b"\x03\xe8"))
            self.assertTrue(harness.is_closed(s))
        deadline = time.monotonic() + 5
        while self.tunnels() != 0:
            self.assertLess(time.monotonic(), deadline, "the tunnel is still counted")
            time.sleep(0.05)
        proxy = self.reactor()["proxy"]
        self.assertEqual((proxy["busy"], proxy["queued"], proxy["tunnels"]), (0, 0, 0))
        # The access log has the 101 with the bytes relayed.
        deadline = time.monotonic() + 5
        while not any('"GET /chat?mode=ws HTTP/1.1" 101 ' in line
                      for line in self.server.access_lines()):
            self.assertLess(time.monotonic(), deadline, "no 101 in the access log")
            time.sleep(0.1)

    def test_idle_tunnel_closed_after_keepalive_timeout(self):
        s, head, _, read = self.open()
        with s:
            self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
            self.assertTrue(harness.is_closed(s, timeout=10))

    def test_upgrade_refused_by_backend_is_a_normal_answer(self):
        r = exchange(self.server.port, b"GET /x?mode=echo HTTP/1.1\r\nHost: h\r\n"
                     b"Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        self.assertEqual(r.status, 200)
        seen = {k.lower(): v for k, v in json.loads(r.body)["headers"]}
        self.assertEqual(seen["upgrade"], "websocket")  # asked for, so passed on
        # A 101 to a request that did not ask: 502 (tested in ProxyBasics too).
        self.assertEqual(get(self.server.port, "/x?mode=switch").status, 502)


class ProxyDrain(unittest.TestCase):
    def test_client_leaving_mid_response_keeps_the_backend_connection(self):
        backend = Backend()
        self.addCleanup(backend.stop)
        server = Lepus(["--proxy", backend.address, "--threads", "1", "--proxy-pool", "1",
                        "--status-path", "/_status"])
        self.addCleanup(server.stop, self)

        def pool():
            return json.loads(get(server.port, "/_status").body)["reactors"][0]["proxy"]

        self.assertEqual(get(server.port, "/w?mode=echo").status, 200)
        connections = backend.connections
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(b"GET /big?mode=big&size=5000000 HTTP/1.1\r\nHost: h\r\n\r\n")
                recv_until(s, b"\r\n\r\n")  # the head, then the client leaves
            # lepus reads the rest of the response into the void, then pools the connection.
            deadline = time.monotonic() + 10
            while pool() != {"busy": 0, "idle": 1, "queued": 0, "tunnels": 0}:
                self.assertLess(time.monotonic(), deadline, "not drained: %s" % pool())
                time.sleep(0.05)
            self.assertEqual(get(server.port, "/w?mode=echo").status, 200)
        self.assertEqual(backend.connections, connections)


class ProxyBackPressure(unittest.TestCase):
    def test_slow_client_does_not_make_lepus_buffer_the_response(self):
        backend = Backend()
        self.addCleanup(backend.stop)
        server = Lepus(["--proxy", backend.address, "--threads", "1"])
        self.addCleanup(server.stop, self)
        size = 64 << 20
        self.assertEqual(get(server.port, "/w?mode=big&size=100000").status, 200)
        before = server.rss_kib()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall(b"GET /big?mode=big&size=%d HTTP/1.1\r\nHost: h\r\n\r\n" % size)
            data = recv_until(s, b"\r\n\r\n")
            time.sleep(1.5)  # the backend could have sent it all by now; lepus must not hold it
            grown = server.rss_kib() - before
            got = len(data.split(b"\r\n\r\n", 1)[1])
            while got < size:
                chunk = s.recv(1 << 20)
                self.assertTrue(chunk, "closed after %d bytes" % got)
                got += len(chunk)
        self.assertEqual(got, size)
        # The bounds: 256 KiB behind the backend socket, 64 KiB queued for the client.
        self.assertLess(grown, 16 * 1024, "lepus grew by %d KiB for a slow client" % grown)


    def test_upload_to_a_stalled_backend_is_not_buffered(self):
        backend = Backend()
        self.addCleanup(backend.stop)
        size = 32 << 20
        server = Lepus(["--proxy", backend.address, "--threads", "1", "--max-body-size", "64m"])
        self.addCleanup(server.stop, self)
        self.assertEqual(get(server.port, "/w?mode=echo").status, 200)
        before = server.rss_kib()
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(b"PUT /up?mode=stall-upload&ms=1500 HTTP/1.1\r\nHost: h\r\n"
                      b"Content-Length: %d\r\n\r\n" % size)
            sender = threading.Thread(target=s.sendall, args=(b"u" * size,), daemon=True)
            sender.start()
            time.sleep(1)  # the backend reads nothing yet: lepus must stop reading the client
            grown = server.rss_kib() - before
            r = read_response(s)
            sender.join(30)
        self.assertEqual((r.status, r.body), (200, b"%d" % size))
        self.assertLess(grown, 16 * 1024, "lepus grew by %d KiB for a stalled backend" % grown)


class ProxyConfig(unittest.TestCase):
    def test_site_paths_host_and_unix_socket(self):
        tmp = harness.temp_dir(self)
        backend = Backend(unix_path=os.path.join(tmp, "app.sock"))
        self.addCleanup(backend.stop)
        config = os.path.join(tmp, "lepus.toml")
        root = os.path.join(tmp, "site")
        os.makedirs(os.path.join(root, "api"))
        with open(os.path.join(root, "api", "file.txt"), "w") as f:
            f.write("a file under /api/\n")
        with open(os.path.join(root, "page.txt"), "w") as f:
            f.write("page\n")
        with open(config, "w") as f:
            f.write('[[site]]\nroot = "%s"\nproxy = { address = "%s", paths = ["/api/"], '
                    'host = "backend.internal" }\n' % (root, backend.address))
        server = Lepus(["--config", config])
        self.addCleanup(server.stop, self)
        r = get(server.port, "/api/file.txt?mode=echo")  # the prefix wins over files
        self.assertEqual(r.status, 200)
        seen = json.loads(r.body)
        headers = {k.lower(): v for k, v in seen["headers"]}
        self.assertEqual(headers["host"], "backend.internal")
        self.assertEqual(headers["x-forwarded-host"], "app.test")
        self.assertEqual(get(server.port, "/page.txt").body, b"page\n")
        self.assertEqual(get(server.port, "/missing?mode=echo").status, 404)

    def test_sighup_changes_the_backend_settings(self):
        backend = Backend()
        self.addCleanup(backend.stop)
        tmp = harness.temp_dir(self)
        config = os.path.join(tmp, "lepus.toml")
        os.makedirs(os.path.join(tmp, "www"))

        def write(host):
            with open(config, "w") as f:
                f.write('[[site]]\nroot = "%s"\nproxy = { address = "%s", host = "%s" }\n'
                        % (os.path.join(tmp, "www"), backend.address, host))

        def host_seen():
            r = get(server.port, "/h?mode=echo")
            return {k.lower(): v for k, v in json.loads(r.body)["headers"]}["host"]

        write("first.internal")
        server = Lepus(["--config", config])
        self.addCleanup(server.stop, self)
        self.assertEqual(host_seen(), "first.internal")
        write("second.internal")
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while host_seen() != "second.internal":  # requests keep being answered meanwhile
            self.assertLess(time.monotonic(), deadline, "the reload did not apply")
            time.sleep(0.1)

    def test_bad_flags_exit_2(self):
        tmp = harness.temp_dir(self)
        for args in (["--proxy", "https://127.0.0.1:1"], ["--proxy", "example.com"],
                     ["--proxy", "http://127.0.0.1:1/app/"], ["--proxy-timeout", "0"]):
            with self.subTest(args=args):
                done = subprocess.run([harness.require_binary(), tmp] + args,
                                      capture_output=True, text=True, timeout=10)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)


class ProxyBackends(unittest.TestCase):
    def test_round_robin_and_a_refusing_backend_skipped(self):
        a, b = Backend("a"), Backend("b")
        self.addCleanup(a.stop)
        self.addCleanup(b.stop)
        dead = "http://127.0.0.1:%d" % free_port()
        tmp = harness.temp_dir(self)
        config = os.path.join(tmp, "lepus.toml")
        os.makedirs(os.path.join(tmp, "www"))
        with open(config, "w") as f:
            f.write('threads = 1\n[[site]]\nroot = "%s"\nproxy = { address = ["%s", "%s", "%s"] }\n'
                    % (os.path.join(tmp, "www"), a.address, dead, b.address))
        server = Lepus(["--config", config])
        self.addCleanup(server.stop, self)
        names = [json.loads(get(server.port, "/rr?mode=echo").body)["backend"] for _ in range(12)]
        # Every request answered, by both live backends; the dead one costs no 502.
        self.assertEqual(set(names), {"a", "b"})
        self.assertGreaterEqual(min(names.count("a"), names.count("b")), 4, names)
        wait_for_log(self, server, "Connection refused")

    def test_backend_down_502_then_back(self):
        port = free_port()
        server = Lepus(["--proxy", "http://127.0.0.1:%d" % port, "--threads", "1"])
        self.addCleanup(server.stop, self)
        server.write("static.txt", "static\n")
        for _ in range(3):
            self.assertEqual(get(server.port, "/x").status, 502)
        self.assertEqual(get(server.port, "/static.txt").status, 200)
        backend = Backend(port=port)
        self.addCleanup(backend.stop)
        # The only backend is tried again at once, however lately it refused.
        self.assertEqual(get(server.port, "/x?mode=echo").status, 200)


    def test_connect_timeout_504(self):
        # A listener whose accept queue is full and never drained: the kernel
        # drops further SYNs, so a connect neither succeeds nor fails.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        self.addCleanup(listener.close)
        fillers = []
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(listener.getsockname())
            fillers.append(filler)
            self.addCleanup(filler.close)
        time.sleep(0.2)
        server = Lepus(["--proxy", "http://127.0.0.1:%d" % listener.getsockname()[1],
                        "--threads", "1", "--proxy-connect-timeout", "300ms"])
        self.addCleanup(server.stop, self)
        self.assertEqual(get(server.port, "/x").status, 504)
        wait_for_log(self, server, "no connection within --proxy-connect-timeout")


def closed_loop_load(port, request, clients, seconds):
    """`clients` threads each send `request` (bytes, Connection: close) on a
    fresh connection, one at a time, for `seconds`, giving up on an answer
    after 2 s and pausing 200 ms after a 503 (as its Retry-After asks).
    Returns the outcomes that ended in time: (status or "gave up" or
    "error ...", Retry-After)."""
    results, lock, stop = [], threading.Lock(), threading.Event()

    def client():
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.sendall(request)
                    r = read_response(s)
                    outcome = (r.status, r.header("retry-after"))
            except socket.timeout:
                outcome = ("gave up", None)
            except (ConnectionError, OSError) as e:
                outcome = ("error " + repr(e), None)
            with lock:
                results.append((time.monotonic(), outcome))
            if outcome[0] == 503:
                stop.wait(0.2)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    return [o for t, o in results if t <= start + seconds]


class ProxyOverload(unittest.TestCase):
    """2x and 3x the load the backend can serve (pool 4, 100 ms a request: 40/s)
    from clients that give up after 2 s: every request ends (200, or 503 with
    Retry-After, or the client's own timeout while queued), the backend keeps
    serving at its capacity, and nothing leaks."""
    POOL, SERVICE_MS = 4, 100

    def test_goodput_held_at_2x_and_3x(self):
        backend = Backend()
        self.addCleanup(backend.stop)
        server = Lepus(["--proxy", backend.address, "--threads", "1", "--proxy-pool",
                        str(self.POOL), "--proxy-queue", "8", "--proxy-queue-timeout", "1s"],
                       access_log=False)
        self.addCleanup(server.stop, self)
        self.assertEqual(get(server.port, "/o?mode=echo").status, 200)
        fds_before = server.fd_count()
        capacity = self.POOL * 1000 / self.SERVICE_MS  # requests per second
        for factor in (2, 3):
            with self.subTest(load="%dx" % factor):
                # A closed loop: each client holds one request at a time.
                clients = self.POOL * factor
                seconds = 4
                outcomes = closed_loop_load(
                    server.port, b"GET /o?mode=slow&ms=%d HTTP/1.1\r\nHost: h\r\n"
                    b"Connection: close\r\n\r\n" % self.SERVICE_MS, clients * 2, seconds)
                statuses = [s for s, _ in outcomes]
                ok = statuses.count(200)
                bad = [o for o in outcomes if o[0] not in (200, 503, "gave up")]
                self.assertEqual(bad, [])
                self.assertTrue(all(ra == "1" for s, ra in outcomes if s == 503))
                self.assertIn(503, statuses)
                # Goodput: at least half of what the backend can do (the machine is shared).
                self.assertGreaterEqual(ok / seconds, capacity / 2,
                                        "200s %d in %d s, statuses %s" %
                                        (ok, seconds, sorted(set(map(str, statuses)))))
        # Nothing leaked: the client sockets are gone, at most the pool stays.
        deadline = time.monotonic() + 10
        while server.fd_count() > fds_before + self.POOL and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertLessEqual(server.fd_count(), fds_before + self.POOL)
        self.assertEqual(get(server.port, "/o?mode=echo").status, 200)


if __name__ == "__main__":
    harness.main()
