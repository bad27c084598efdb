"""Request bodies are taken whole before a backend connection is (issue 32
item 2), over the protocol matrix (h1, h2, h2c: CMakeLists.txt's protocol_e2e).

Before, a FastCGI or proxy exchange took its pool connection when the request
head arrived and streamed the body while holding it: six POSTs announcing
100,000 bytes and sending one byte now and then made every other PHP request
wait for a connection and answer 503. Now the body goes to memory (up to
--client-body-buffer), then to an unnamed file in --temp-dir, and only the
complete request asks the pool for a connection (nginx's
fastcgi_request_buffering / proxy_request_buffering on).

php-fpm has 2 children, lepus --fastcgi-pool 2 on one reactor with a 2 s
queue timeout. Slow POSTs (the head and 3 bytes of 100,000; over HTTP/1.1, and
in the h2 and h2c runs also as 4 streams of one HTTP/2 connection) stay open
while a GET of a script must still be answered 200; completed afterwards, each
reaches its script whole. A 1 MiB body (past the memory buffer, so through the
temporary file) reaches PHP and an HTTP backend (--proxy to a Python server)
intact; a temporary directory that is gone answers 500 for a large body only;
--max-body-size still answers 413. A [[site]] with `request_buffering = false`
streams as before: there the slow POSTs hold both connections and the GET gets
the queue's 503.
"""
import hashlib
import os
import select
import shutil
import socket
import ssl
import struct
import textwrap
import time
import unittest

import harness
import http_backend
import phpfpm

ANNOUNCED = 100000
FIRST = b"abc"
REST = bytes(range(256)) * (ANNOUNCED // 256) + b"x" * (ANNOUNCED % 256 - len(FIRST))
assert len(FIRST + REST) == ANNOUNCED
LARGE = os.urandom(1 << 20)  # past the 64k memory buffer: the temporary file

ECHO_PHP = ("<?php header('Content-Type: text/plain');"
            " $b = file_get_contents('php://input'); echo strlen($b), ' ', md5($b);\n")


def digest(body):
    return b"%d %s" % (len(body), hashlib.md5(body).hexdigest().encode())


# --- slow clients -------------------------------------------------------------------------


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream) + payload


def hpack(fields):
    """Literal header fields without indexing, new names (RFC 7541 §6.2.2)."""
    out = b""
    for name, value in fields:
        assert len(name) < 127 and len(value) < 127
        out += b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
    return out


class SlowPosts:
    """POSTs that announce ANNOUNCED bytes, send FIRST and stall: `count` over
    HTTP/1.1, and with http2 also 4 streams on one HTTP/2 connection (TLS
    with ALPN h2 to the server's tls_port, or h2c)."""

    def __init__(self, server, path, host, count=4, http2=None):
        self.server, self.path, self.host = server, path, host
        self.h1 = []
        self.h2 = None
        try:
            for _ in range(count):
                s = server.connect(timeout=20)
                s.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: "
                           "application/octet-stream\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                           % (path, host, ANNOUNCED)).encode() + FIRST)
                self.h1.append(s)
            if http2:
                self.h2 = self.open_h2(http2)
        except Exception:
            self.close()
            raise

    def open_h2(self, protocol):
        s = socket.create_connection(("127.0.0.1", self.server.tls_port if protocol == "h2"
                                      else self.server.port), timeout=20)
        if protocol == "h2":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            s = context.wrap_socket(s, server_hostname="localhost")
        out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)  # SETTINGS
        for stream in (1, 3, 5, 7):
            block = hpack([(b":method", b"POST"), (b":scheme", b"https" if protocol == "h2"
                                                     else b"http"),
                           (b":path", self.path.encode()), (b":authority", self.host.encode()),
                           (b"content-length", str(ANNOUNCED).encode())])
            out += h2_frame(1, 0x4, stream, block) + h2_frame(0, 0, stream, FIRST)
        s.sendall(out)
        return s

    def finish_h1(self, test):
        """Sends the rest of each HTTP/1.1 body: each is answered 200 with its digest."""
        for s in self.h1:
            s.sendall(REST)
        for s in self.h1:
            r = harness.read_response(s)
            test.assertEqual(r.status, 200, r.body[:300])
            test.assertEqual(r.body, digest(FIRST + REST))

    def close(self):
        for s in self.h1 + ([self.h2] if self.h2 else []):
            s.close()


def read_h2_frames(sock, seconds, done):
    """Frames (type, flags, stream, payload) until done(frames) or `seconds` pass."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    data, frames = b"", []
    while not done(frames) and time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
        while len(data) >= 9 and len(data) >= 9 + int.from_bytes(data[:3], "big"):
            length = int.from_bytes(data[:3], "big")
            frames.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF,
                           data[9:9 + length]))
            data = data[9 + length:]
    return frames


def read_resets(sock, streams, seconds):
    """{stream: RST_STREAM error code} for the `streams` reset within `seconds`."""
    frames = read_h2_frames(sock, seconds, lambda frames: streams <= {
        f[2] for f in frames if f[0] == 3})
    return {f[2]: int.from_bytes(f[3][:4], "big") for f in frames if f[0] == 3}


def read_data(sock, stream, seconds):
    """The DATA payload of `stream` up to its END_STREAM."""
    frames = read_h2_frames(sock, seconds, lambda frames: any(
        f[2] == stream and f[1] & 1 for f in frames))
    return b"".join(f[3] for f in frames if f[0] == 0 and f[2] == stream)


def http2_run():
    return harness.PROTOCOL if harness.PROTOCOL in ("h2", "h2c") else None


class Trickles:
    """`count` POSTs of `size` announced bytes, their bodies sent a piece at a
    time by send(): HTTP/1.1 connections, or in the h2 and h2c runs streams of
    one HTTP/2 connection. ended() says which exchanges lepus ended (the
    HTTP/1.1 connection closed, the stream reset or answered)."""

    def __init__(self, server, path, host, count, size):
        self.protocol = http2_run()
        self.ids = [1 + 2 * i for i in range(count)]
        self.h1, self.h2 = [], None
        self.buffer, self.frames, self.closed = b"", [], set()
        head = ("POST %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                "Content-Length: %d\r\n\r\n" % (path, host, size)).encode()
        if not self.protocol:
            for _ in self.ids:
                s = server.connect(timeout=20)
                s.sendall(head)
                self.h1.append(s)
            return
        s = socket.create_connection(("127.0.0.1", server.tls_port if self.protocol == "h2"
                                      else server.port), timeout=20)
        if self.protocol == "h2":
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            context.set_alpn_protocols(["h2"])
            s = context.wrap_socket(s, server_hostname="localhost")
        out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0)
        scheme = b"https" if self.protocol == "h2" else b"http"
        for stream in self.ids:
            out += h2_frame(1, 0x4, stream, hpack([
                (b":method", b"POST"), (b":scheme", scheme), (b":path", path.encode()),
                (b":authority", host.encode()), (b"content-length", str(size).encode())]))
        s.sendall(out)
        self.h2 = s

    def send(self, piece, last=False):
        """Sends `piece` of each body still going (`last`: its end)."""
        for i, stream in enumerate(self.ids):
            if i in self.ended():
                continue
            try:
                if self.h2:
                    self.h2.sendall(h2_frame(0, 1 if last else 0, stream, piece))
                else:
                    self.h1[i].sendall(piece)
            except OSError:
                self.closed.add(i)

    def ended(self):
        if self.h2:
            self.read_h2()
            return {i for i, stream in enumerate(self.ids) if i in self.closed or any(
                f[2] == stream and (f[0] == 3 or f[1] & 1) for f in self.frames)}
        for i, s in enumerate(self.h1):
            if i in self.closed or not select.select([s], [], [], 0)[0]:
                continue
            try:
                if s.recv(1, socket.MSG_PEEK) == b"":
                    self.closed.add(i)
            except OSError:
                self.closed.add(i)
        return set(self.closed)

    def read_h2(self):
        self.h2.setblocking(False)
        try:
            while True:
                chunk = self.h2.recv(65536)
                if not chunk:
                    self.closed.update(range(len(self.ids)))
                    break
                self.buffer += chunk
        except (BlockingIOError, ssl.SSLWantReadError):
            pass
        except OSError:
            self.closed.update(range(len(self.ids)))
        finally:
            self.h2.setblocking(True)
        data = self.buffer
        while len(data) >= 9 and len(data) >= 9 + int.from_bytes(data[:3], "big"):
            length = int.from_bytes(data[:3], "big")
            self.frames.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF,
                                data[9:9 + length]))
            data = data[9 + length:]
        self.buffer = data

    def resets(self):
        return {f[2]: int.from_bytes(f[3][:4], "big") for f in self.frames if f[0] == 3}

    def answers(self):
        """{exchange: (status, body)} of the answers read so far (HTTP/1.1: all of them)."""
        if not self.h2:
            return {i: (r.status, r.body) for i, r in
                    enumerate(harness.read_response(s) for s in self.h1)}
        out = {}
        for i, stream in enumerate(self.ids):
            heads = [f for f in self.frames if f[0] == 1 and f[2] == stream]
            if heads:
                body = b"".join(f[3] for f in self.frames if f[0] == 0 and f[2] == stream)
                out[i] = (heads[0][3], body)  # the header block, HPACK-coded
        return out

    def close(self):
        for s in self.h1 + ([self.h2] if self.h2 else []):
            s.close()


def assert_gets_pass_slow_posts(test, post_path, host, get_path, headers, gets, body):
    """While SlowPosts to `post_path` on Host `host` are open, each with 3 of
    its 100,000 bytes sent, `gets` GETs of `get_path` (more than the backend
    has connections) are answered with `body`; then the slow POSTs finish."""
    slow = SlowPosts(test.server, post_path, host, http2=http2_run())
    try:
        for _ in range(gets):
            try:
                r = test.server.fetch(get_path, headers, timeout=5)
            except ConnectionError as e:
                test.fail("the GET was not answered while the slow POSTs wait: %s" % e)
            test.assertEqual(r.status, 200, r.body[:300])
            test.assertEqual(r.body, body)
        slow.finish_h1(test)
    finally:
        slow.close()


def assert_trickles_cut_off(test, server, post_path, get_path, host):
    """Two POSTs to `post_path` that send a byte every 0.5 s, to a server
    whose pool has 2 connections, `request_buffering = false` and a 2 s body
    timeout: both are cut off (HTTP/2: reset, CANCEL), then a GET of
    `get_path` is served, the pool's connections free again."""
    trickles = Trickles(server, post_path, host, 2, ANNOUNCED)
    try:
        start = time.monotonic()
        while len(trickles.ended()) < 2 and time.monotonic() - start < 15:
            trickles.send(b"x")
            time.sleep(0.5)
        test.assertEqual(trickles.ended(), {0, 1}, "still open after 15 s")
        if trickles.h2:
            test.assertEqual(trickles.resets(), {1: 8, 3: 8})  # CANCEL
        r = server.fetch(get_path, ["Host: " + host], timeout=10)
        test.assertEqual(r.status, 200, r.body[:300])
    finally:
        trickles.close()


# --- PHP ----------------------------------------------------------------------------------


class PhpBuffering(unittest.TestCase):
    """php-fpm with 2 children behind --fastcgi-pool 2; site "stream.test"
    has `request_buffering = false`, the default site buffers."""

    @classmethod
    def setUpClass(cls):
        cls.fpm = phpfpm.PhpFpm(children=2)
        cls.addClassCleanup(cls.fpm.cleanup)
        cls.dir = harness.temp_dir(cls, "request-buffering")
        for site in ("www", "stream"):
            os.makedirs(os.path.join(cls.dir, site))
            with open(os.path.join(cls.dir, site, "echo.php"), "w") as f:
                f.write(ECHO_PHP)
            with open(os.path.join(cls.dir, site, "hello.php"), "w") as f:
                f.write("<?php echo 'hello from ', $_SERVER['HTTP_HOST'], \"\\n\";\n")
        cls.config = os.path.join(cls.dir, "lepus.toml")
        with open(cls.config, "w") as f:
            f.write(textwrap.dedent("""\
                [[site]]
                server_names = ["www.test"]
                root = "{d}/www"
                default = true

                [[site]]
                server_names = ["stream.test"]
                root = "{d}/stream"
                request_buffering = false
                """).format(d=cls.dir))
        cls.server = harness.Lepus(cls.args())
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())

    @classmethod
    def args(cls, *extra):
        return ["--config", cls.config, "--fastcgi", cls.fpm.address, "--fastcgi-pool", "2",
                "--threads", "1", "--fastcgi-queue-timeout", "2s", "--max-body-size", "2m",
                "--compress", "off"] + list(extra)

    def test_slow_posts_do_not_hold_php(self):
        # Two GETs: more requests than php-fpm children.
        assert_gets_pass_slow_posts(self, "/echo.php", "www.test", "/hello.php",
                                    ["Host: www.test"], 2, b"hello from www.test\n")

    def test_without_buffering_a_slow_post_holds_php_as_before(self):
        # request_buffering = false: the body streams to php-fpm, so the two
        # slow POSTs hold both connections and the GET waits out the queue.
        slow = SlowPosts(self.server, "/echo.php", "stream.test", count=2)
        try:
            r = self.server.fetch("/hello.php", ["Host: stream.test"], timeout=10)
            self.assertEqual(r.status, 503, r.body[:300])
            slow.finish_h1(self)  # and the streamed bodies are whole
        finally:
            slow.close()
        r = self.server.fetch("/hello.php", ["Host: stream.test"])
        self.assertEqual(r.status, 200)

    def test_without_buffering_a_trickled_body_is_cut_off_at_the_minimum_rate(self):
        # request_buffering = false: the body holds a php-fpm connection while
        # it comes, so it must keep up --min-body-rate (240 bytes/s) over each
        # body timeout. A byte every 0.5 s never meets the 2 s body timeout's
        # silence, and before the rate it held both connections for as long as
        # the client liked (the GET then got the queue's 503).
        server = harness.Lepus(self.args("--body-timeout", "2s"))
        try:
            assert_trickles_cut_off(self, server, "/echo.php", "/hello.php", "stream.test")
        finally:
            server.stop(harness.LepusTestCase._Checker())

    def test_without_buffering_a_slow_body_above_the_minimum_rate_arrives_whole(self):
        # 1000 bytes every 0.5 s (2000 bytes/s) for 6 s: three body timeout
        # intervals, each well above the rate.
        server = harness.Lepus(self.args("--body-timeout", "2s"))
        body = bytes(range(256)) * 47  # 12,032 bytes
        try:
            trickles = Trickles(server, "/echo.php", "stream.test", 1, len(body))
            try:
                for at in range(0, len(body), 1000):
                    trickles.send(body[at:at + 1000], last=at + 1000 >= len(body))
                    time.sleep(0.5)
                deadline = time.monotonic() + 15
                while trickles.h2 and not trickles.ended() and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.assertFalse(trickles.h2 and trickles.resets())
                answers = trickles.answers()
                self.assertEqual(len(answers), 1)
                head, got = answers[0]
                self.assertEqual(got, digest(body))
                if not trickles.h2:
                    self.assertEqual(head, 200)
            finally:
                trickles.close()
        finally:
            server.stop(harness.LepusTestCase._Checker())

    def test_bodies_reach_php_whole(self):
        for host in ("www.test", "stream.test"):
            for body in (b"", b"a=1&b=2", os.urandom(70000), LARGE):
                with self.subTest(host=host, size=len(body)):
                    r = self.server.fetch("/echo.php", ["Host: " + host], method="POST",
                                          body=body)
                    self.assertEqual(r.status, 200, r.body[:300])
                    self.assertEqual(r.body, digest(body))

    def test_a_chunked_body_reaches_php_whole(self):
        if harness.PROTOCOL in ("h2", "h2c"):
            self.skipTest("HTTP/2 has no chunked transfer coding (RFC 9113 §8.2.2)")
        r = self.server.fetch("/echo.php", ["Host: www.test", "Transfer-Encoding: chunked"],
                              method="POST", body=LARGE)
        self.assertEqual(r.status, 200, r.body[:300])
        self.assertEqual(r.body, digest(LARGE))

    def test_a_body_over_max_body_size_is_413(self):
        # The engines refuse it before any buffering (the bound of memory and disk).
        head = ("POST /echo.php HTTP/1.1\r\nHost: www.test\r\nContent-Length: %d\r\n\r\n"
                % (3 << 20))
        r = self.server.request(head)
        self.assertEqual(r.status, 413)
        # Chunked, only its size tells: refused once past the limit.
        with self.server.connect() as s:
            s.sendall(b"POST /echo.php HTTP/1.1\r\nHost: www.test\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"%x\r\n" % (1 << 20) + b"z" * (1 << 20) + b"\r\n"
            try:
                for _ in range(3):
                    s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused while sending
            r = harness.read_response(s)
        self.assertEqual(r.status, 413)

    def test_a_client_that_stops_sending_its_body_meets_the_body_timeout(self):
        # With buffering no backend timeout ends the wait: the body timeout
        # does, for the client alone (HTTP/1.1: closed; HTTP/2: the stream is
        # reset, the connection and its other streams go on).
        server = harness.Lepus(self.args("--body-timeout", "1s"))
        try:
            slow = SlowPosts(server, "/echo.php", "www.test", count=1, http2=http2_run())
            try:
                self.assertTrue(harness.is_closed(slow.h1[0], timeout=15))
                if slow.h2:
                    resets = read_resets(slow.h2, {1, 3, 5, 7}, seconds=15)
                    self.assertEqual(resets, {1: 8, 3: 8, 5: 8, 7: 8})  # CANCEL
                    # The connection still serves a request.
                    block = hpack([(b":method", b"GET"), (b":scheme", b"https" if http2_run() ==
                                   "h2" else b"http"), (b":path", b"/hello.php"),
                                   (b":authority", b"www.test")])
                    slow.h2.sendall(h2_frame(1, 0x5, 9, block))
                    self.assertIn(b"hello from www.test", read_data(slow.h2, 9, seconds=15))
            finally:
                slow.close()
        finally:
            server.stop(harness.LepusTestCase._Checker())

    def test_a_temp_dir_that_is_gone_answers_500_for_a_large_body(self):
        temp = os.path.join(self.dir, "gone")
        os.makedirs(temp)
        server = harness.Lepus(self.args("--temp-dir", temp))
        try:
            shutil.rmtree(temp)
            small = server.fetch("/echo.php", ["Host: www.test"], method="POST", body=b"x" * 1000)
            self.assertEqual(small.body, digest(b"x" * 1000))  # in memory: no file needed
            r = server.fetch("/echo.php", ["Host: www.test"], method="POST", body=LARGE)
            self.assertEqual(r.status, 500)
            # The body was read to its end: the connection stays usable.
            self.assertEqual(server.fetch("/hello.php", ["Host: www.test"]).status, 200)
            # The error log is written by its own thread: bounded wait for the line.
            deadline = time.monotonic() + 10
            while "temporary file" not in server.error_log_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertIn("cannot create a temporary file", server.error_log_text())
        finally:
            server.stop(harness.LepusTestCase._Checker())


# --- an HTTP backend ----------------------------------------------------------------------


class Handler(http_backend.Handler):
    def do_GET(self):
        self.send_body(b"hello from the backend\n", "text/plain")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        self.send_body(digest(self.rfile.read(length)), "text/plain")


class Backend(http_backend.HttpBackend):
    def __init__(self):
        http_backend.HttpBackend.__init__(self, Handler)

    def handle_error(self, request, client_address):
        pass  # a test's client left mid-body


class ProxyBuffering(unittest.TestCase):
    """lepus --proxy BACKEND --proxy-pool 2 on one reactor."""

    @classmethod
    def setUpClass(cls):
        cls.backend = Backend()
        cls.addClassCleanup(cls.backend.stop)
        cls.server = harness.Lepus(["--proxy", cls.backend.address, "--proxy-pool", "2",
                                    "--threads", "1", "--proxy-queue-timeout", "2s",
                                    "--max-body-size", "2m", "--compress", "off"])
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())

    def test_slow_posts_do_not_empty_the_pool(self):
        # Three GETs: more requests than pooled connections.
        assert_gets_pass_slow_posts(self, "/echo", "localhost", "/hello", [], 3,
                                    b"hello from the backend\n")

    def test_without_buffering_a_trickled_body_is_cut_off_at_the_minimum_rate(self):
        # As through php-fpm: a byte every 0.5 s held both pool connections.
        server = harness.Lepus(["--proxy", self.backend.address, "--proxy-pool", "2",
                                "--threads", "1", "--proxy-queue-timeout", "2s",
                                "--request-buffering", "off", "--body-timeout", "2s"])
        try:
            assert_trickles_cut_off(self, server, "/echo", "/hello", "localhost")
        finally:
            server.stop(harness.LepusTestCase._Checker())

    def test_bodies_reach_the_backend_whole(self):
        for body in (b"a=1", os.urandom(70000), LARGE):
            with self.subTest(size=len(body)):
                r = self.server.fetch("/echo", method="POST", body=body)
                self.assertEqual(r.status, 200, r.body[:300])
                self.assertEqual(r.body, digest(body))


if __name__ == "__main__":
    harness.main()
