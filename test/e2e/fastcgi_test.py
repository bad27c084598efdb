"""FastCGI end to end: the real lepus binary in front of a real php-fpm
(test/e2e/phpfpm.py) over unix and TCP sockets, keepalive on and off, plus
fcgi_responder (test/fastcgi/responder.cc) for the misbehaving backends.

Needs php-fpm (apt-get install php-fpm; skipped, saying so, without it) and
fcgi_responder, found through $FCGI_RESPONDER or next to the lepus binary's
build tree (a missing one fails: it is built with the tests).
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import unittest

import harness
import phpfpm
from proxy_test import closed_loop_load


def find_responder():
    path = os.environ.get("FCGI_RESPONDER")
    if path:
        return path
    if harness.BINARY:
        build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(harness.BINARY))))
        candidate = os.path.join(build, "test", "fastcgi", "fcgi_responder")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def require_php_fpm():
    harness.require_binary()
    if not phpfpm.find_php_fpm():
        raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")


def populate_site(server):
    for name in os.listdir(phpfpm.PHP_DIR):
        shutil.copy(os.path.join(phpfpm.PHP_DIR, name), server.root)
    server.write("static.txt", "static file\n")
    # An "image" full of PHP code: must never be executed (cgi.fix_pathinfo hole).
    server.write("uploads/evil.jpg", "<?php echo 'EXECUTED'; ?>")
    server.write("app/index.php", "<?php echo 'app index ' . $_SERVER['SCRIPT_NAME'];\n")
    server.write("docs/index.html", "<p>static index</p>\n")


# --- HTTP reading with chunked decoding ---------------------------------------

class Reply:
    def __init__(self, status, headers, body, complete, head):
        self.status, self.headers, self.body, self.complete, self.head = \
            status, headers, body, complete, head

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)


def read_reply(sock, buffer=b"", head_request=False):
    """Reads one response; returns (Reply, leftover). Reply.complete is False
    when the connection ended before the framing said the body was complete."""
    data = harness.recv_until(sock, b"\r\n\r\n", buffer)
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()

    def more():
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise EOFError
        return chunk

    if head_request or status in (204, 304):
        return Reply(status, headers, b"", True, head), rest
    try:
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                while b"\r\n" not in rest:
                    rest += more()
                size_line, rest = rest.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(rest) < size + 2:
                    rest += more()
                if size == 0:
                    return Reply(status, headers, body, True, head), rest[2:]
                body += rest[:size]
                rest = rest[size + 2:]
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(rest) < length:
                rest += more()
            return Reply(status, headers, rest[:length], True, head), rest[length:]
        while True:
            try:
                rest += more()
            except EOFError:
                return Reply(status, headers, rest, True, head), b""
    except (EOFError, ConnectionResetError):
        return Reply(status, headers, rest, False, head), b""


def exchange(port, raw, timeout=20):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        return read_reply(s, head_request=raw.startswith(b"HEAD "))[0]


def get(port, path, headers=(), timeout=20):
    lines = ["GET %s HTTP/1.1" % path, "Host: localhost", "Connection: close"] + list(headers)
    return exchange(port, ("\r\n".join(lines) + "\r\n\r\n").encode(), timeout)


# --- the PHP site, over unix and TCP, keepalive on and off -------------------

class PhpSiteTests:
    TCP = False
    KEEPALIVE = True

    @classmethod
    def setUpClass(cls):
        require_php_fpm()
        # As many children as the default pool: any size is safe with the
        # default --fastcgi-keepalive off, this one lets every connection run at once.
        cls.fpm, cls.server = phpfpm.start_site(
            cls, ["--threads", "2", "--index", "index.php,index.html"], children=8, tcp=cls.TCP)
        populate_site(cls.server)
        cls.sock = None
        cls.leftover = b""

    @classmethod
    def tearDownClass(cls):
        if cls.sock:  # before the stops (class cleanups, which run after this)
            cls.sock.close()

    def request(self, method, target, headers=(), body=None, chunked=False):
        lines = ["%s %s HTTP/1.1" % (method, target), "Host: localhost"] + list(headers)
        if not self.KEEPALIVE:
            lines.append("Connection: close")
        if body is not None and chunked:
            lines.append("Transfer-Encoding: chunked")
            pieces = [body[i:i + 70000] for i in range(0, len(body), 70000)]
            payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        elif body is not None:
            lines.append("Content-Length: %d" % len(body))
            payload = body
        else:
            payload = b""
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + payload
        cls = type(self)
        if not self.KEEPALIVE:
            return exchange(self.server.port, raw)
        if cls.sock is None:
            cls.sock = self.server.connect(timeout=20)
            cls.leftover = b""
        cls.sock.sendall(raw)
        reply, cls.leftover = read_reply(cls.sock, cls.leftover, head_request=method == "HEAD")
        self.assertTrue(reply.complete)
        self.assertNotEqual(reply.header("connection"), "close", "keepalive was dropped")
        return reply

    def test_cgi_variables(self):
        r = self.request("GET", "/env.php?a=1&b=%20x", headers=["X-Thing: 42"])
        self.assertEqual(r.status, 200)
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
        self.assertEqual(env["SERVER_PROTOCOL"], "HTTP/1.1")
        self.assertEqual(env["HTTP_HOST"], "localhost")
        self.assertEqual(env["HTTP_X_THING"], "42")
        self.assertEqual(env["REMOTE_ADDR"], "127.0.0.1")
        self.assertEqual(env["SERVER_PORT"], str(self.server.port))
        self.assertEqual(env["GATEWAY_INTERFACE"], "CGI/1.1")

    def test_post_1mib_body(self):
        body = os.urandom(1 << 20)
        r = self.request("POST", "/echo.php", body=body)
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body), {"md5": hashlib.md5(body).hexdigest(),
                                              "length": len(body)})

    def test_post_chunked_body(self):
        body = os.urandom(300000)
        r = self.request("POST", "/echo.php", body=body, chunked=True)
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body), {"md5": hashlib.md5(body).hexdigest(),
                                              "length": len(body)})

    def test_body_over_limit_is_413(self):
        r = exchange(self.server.port, b"POST /echo.php HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Length: 2000000\r\n\r\n")
        self.assertEqual(r.status, 413)

    def test_status_and_custom_header(self):
        r = self.request("GET", "/status.php")
        self.assertEqual(r.status, 201)
        self.assertEqual(r.header("x-custom"), "yes")
        self.assertEqual(r.body, b"created\n")

    def test_1mib_response(self):
        r = self.request("GET", "/big.php")
        self.assertEqual(r.status, 200)
        expected = (b"abcdefghijklmnopqrstuvwxyz" * 40330)[:1 << 20]
        self.assertEqual(len(r.body), len(expected))
        self.assertTrue(r.body == expected)

    def test_head_has_no_body(self):
        r = self.request("HEAD", "/hello.php")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"")
        # The connection is still in step: the next answer is the right one.
        r = self.request("GET", "/hello.php")
        self.assertEqual(r.body, b"hello 5050")

    def test_directory_index_php(self):
        r = self.request("GET", "/")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"index of /index.php\n")
        r = self.request("GET", "/app/")
        self.assertEqual(r.body, b"app index /app/index.php")
        r = self.request("GET", "/docs/")
        self.assertEqual(r.body, b"<p>static index</p>\n")

    def test_path_info(self):
        r = self.request("GET", "/pathinfo.php/some/path?x=1")
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body), {"PATH_INFO": "/some/path",
                                              "SCRIPT_NAME": "/pathinfo.php",
                                              "PHP_SELF": "/pathinfo.php/some/path"})

    def test_evil_jpg_is_never_executed(self):
        for target in ("/uploads/evil.jpg/x.php", "/uploads/evil.jpg/x.php/more",
                       "/uploads/evil.jpg%2fx.php"):
            r = self.request("GET", target)
            self.assertEqual(r.status, 404, target)
            self.assertNotIn(b"EXECUTED", r.body)

    def test_missing_script_is_404(self):
        r = self.request("GET", "/nope.php")
        self.assertEqual(r.status, 404)
        r = self.request("GET", "/.hidden.php")
        self.assertEqual(r.status, 404)

    def test_script_source_is_never_served(self):
        r = self.request("GET", "/hello.php")
        self.assertEqual(r.body, b"hello 5050")
        self.assertNotIn(b"<?php", self.request("GET", "/").body)

    def test_static_files_still_static(self):
        r = self.request("GET", "/static.txt")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"static file\n")
        self.assertEqual(r.header("content-length"), "12")

    def test_pipelined_php_and_static(self):
        body = os.urandom(100000)
        with self.server.connect(timeout=20) as s:
            s.sendall(b"GET /hello.php HTTP/1.1\r\nHost: x\r\n\r\n"
                      b"POST /echo.php HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body +
                      b"GET /static.txt HTTP/1.1\r\nHost: x\r\n\r\n"
                      b"GET /status.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            leftover = b""
            bodies = []
            for _ in range(4):
                r, leftover = read_reply(s, leftover)
                bodies.append((r.status, r.body))
        self.assertEqual(bodies[0], (200, b"hello 5050"))
        self.assertEqual(json.loads(bodies[1][1])["md5"], hashlib.md5(body).hexdigest())
        self.assertEqual(bodies[2], (200, b"static file\n"))
        self.assertEqual(bodies[3], (201, b"created\n"))

    def test_expect_continue(self):
        with self.server.connect(timeout=20) as s:
            s.sendall(b"POST /echo.php HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      b"Content-Length: 5\r\nConnection: close\r\n\r\n")
            self.assertEqual(harness.recv_until(s, b"\r\n\r\n"), b"HTTP/1.1 100 Continue\r\n\r\n")
            s.sendall(b"hello")
            r, _ = read_reply(s)
        self.assertEqual(json.loads(r.body), {"md5": hashlib.md5(b"hello").hexdigest(),
                                              "length": 5})

    def test_http10_gets_no_chunked_coding(self):
        # A response complete before its head is sent gets a Content-Length...
        r = exchange(self.server.port, b"GET /hello.php HTTP/1.0\r\n\r\n")
        self.assertEqual((r.status, r.body, r.header("content-length")), (200, b"hello 5050", "10"))
        self.assertNotIn("transfer-encoding", r.headers)
        # ...a streamed one ends with the connection (RFC 9112 §6.3).
        r = exchange(self.server.port, b"GET /big.php HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        self.assertEqual(r.status, 200)
        self.assertNotIn("transfer-encoding", r.headers)
        self.assertEqual(len(r.body), 1 << 20)

    def test_50_concurrent_requests(self):
        results = []
        lock = threading.Lock()

        def one(i):
            try:
                r = get(self.server.port, "/env.php?n=%d" % i)
                ok = r.status == 200 and r.complete and json.loads(r.body)["QUERY_STRING"] == "n=%d" % i
            except Exception as error:  # noqa: BLE001 - reported below
                ok = repr(error)
            with lock:
                results.append(ok)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(results, [True] * 50)

    def test_access_log_line(self):
        self.request("GET", "/status.php?log=1")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lines = [l for l in self.server.access_lines() if "/status.php?log=1" in l]
            if lines:
                self.assertIn('" 201 ', lines[0])
                return
            time.sleep(0.1)
        self.fail("no access log line for the request")


class UnixKeepalive(PhpSiteTests, unittest.TestCase):
    TCP, KEEPALIVE = False, True


class UnixClose(PhpSiteTests, unittest.TestCase):
    TCP, KEEPALIVE = False, False


class TcpKeepalive(PhpSiteTests, unittest.TestCase):
    TCP, KEEPALIVE = True, True


class TcpClose(PhpSiteTests, unittest.TestCase):
    TCP, KEEPALIVE = True, False


# --- failures with a real php-fpm --------------------------------------------

class PhpFpmFailures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_php_fpm()

    def wait_for_log(self, server, text):
        deadline = time.monotonic() + 5  # the error log is flushed once a second
        while text not in server.error_log_text():
            self.assertLess(time.monotonic(), deadline, "not in the error log: " + text)
            time.sleep(0.1)

    def start(self, fpm, *args):
        server = harness.Lepus(["--fastcgi", fpm.address] + list(args))
        populate_site(server)
        self.addCleanup(server.stop, self)
        return server

    def fpm(self, children=4, tcp=False):
        fpm = phpfpm.PhpFpm(children=children, tcp=tcp)
        self.addCleanup(fpm.cleanup)
        return fpm

    def test_fpm_down_502_then_recovers(self):
        for tcp in (False, True):
            with self.subTest(tcp=tcp):
                fpm = self.fpm(tcp=tcp)
                server = self.start(fpm, "--threads", "1", "--fastcgi-pool", "2")
                self.assertEqual(get(server.port, "/hello.php").body, b"hello 5050")
                fpm.stop()
                for _ in range(3):
                    self.assertEqual(get(server.port, "/hello.php").status, 502)
                self.assertEqual(get(server.port, "/static.txt").status, 200)
                fpm.start()
                r = get(server.port, "/hello.php")
                self.assertEqual((r.status, r.body), (200, b"hello 5050"))
                # And again: the new php-fpm serves every request.
                self.assertEqual(get(server.port, "/hello.php").status, 200)
                self.wait_for_log(server, "FastCGI %s: " % fpm.address)

    def test_slow_script_504(self):
        fpm = self.fpm()
        server = self.start(fpm, "--threads", "1", "--fastcgi-timeout", "300ms")
        r = get(server.port, "/slow.php?ms=3000")
        self.assertEqual(r.status, 504)
        self.assertEqual(get(server.port, "/hello.php").body, b"hello 5050")
        self.wait_for_log(server, "no answer within --fastcgi-timeout")

    def test_saturated_pool_503_with_retry_after(self):
        fpm = self.fpm()
        server = self.start(fpm, "--threads", "1", "--fastcgi-pool", "1", "--fastcgi-queue", "1")
        slow = [socket.create_connection(("127.0.0.1", server.port), timeout=20)
                for _ in range(2)]
        for s in slow:  # one runs, one waits in the queue
            s.sendall(b"GET /slow.php?ms=1500 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        time.sleep(0.3)  # let both reach lepus; the assertion below does not depend on it
        r = get(server.port, "/hello.php")
        self.assertEqual(r.status, 503)
        self.assertEqual(r.header("retry-after"), "1")
        for s in slow:
            reply = read_reply(s)[0]
            self.assertEqual(reply.body, b"slept 1500\n")
            s.close()

    def test_queue_timeout_503(self):
        fpm = self.fpm()
        server = self.start(fpm, "--threads", "1", "--fastcgi-pool", "1",
                            "--fastcgi-queue-timeout", "200ms")
        with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
            s.sendall(b"GET /slow.php?ms=2000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            time.sleep(0.2)
            r = get(server.port, "/hello.php")
            self.assertEqual(r.status, 503)
            self.assertEqual(read_reply(s)[0].status, 200)

    def test_slow_script_does_not_delay_static(self):
        fpm = self.fpm()
        server = self.start(fpm, "--threads", "1")
        done = threading.Event()
        result = []

        def slow():
            result.append(get(server.port, "/slow.php?ms=2500").status)
            done.set()

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.3)
        for _ in range(5):
            self.assertEqual(get(server.port, "/static.txt").status, 200)
        # The static answers came while the script was still running.
        self.assertFalse(done.is_set())
        t.join(30)
        self.assertEqual(result, [200])


# --- a misbehaving backend: fcgi_responder -----------------------------------

class Responder:
    def __init__(self, tcp=False, extra=(), unix_path=None):
        binary = find_responder()
        if not binary:
            raise AssertionError("fcgi_responder not found (built with the tests in "
                                 "test/fastcgi; or set FCGI_RESPONDER)")
        self.tmp = harness.temp_dir(name="responder")
        listen = "127.0.0.1:0" if tcp else "unix:" + (unix_path or os.path.join(self.tmp, "r.sock"))
        self.proc = subprocess.Popen([binary, "--listen", listen] + list(extra), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            raise RuntimeError("fcgi_responder did not start: %r" % line)
        self.address = line[1]

    def stop(self):
        self.proc.terminate()
        out = self.proc.communicate(timeout=10)[0]
        harness.remove_temp_dir(self.tmp)
        return out


class MisbehavingBackend(unittest.TestCase):
    TCP = False

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.responder = Responder(cls.TCP)
        # One backend connection kept alive, so reuse is observable through mode=count.
        cls.server = harness.Lepus(["--fastcgi", cls.responder.address, "--threads", "1",
                                    "--fastcgi-pool", "1", "--fastcgi-timeout", "1s",
                                    "--fastcgi-keepalive", "on"])
        cls.server.write("x.php", "never read by the responder")

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop(harness.LepusTestCase._Checker())
        finally:
            cls.responder.stop()

    def connections(self):
        r = get(self.server.port, "/x.php?mode=count")
        self.assertEqual(r.status, 200)
        return int(r.body.decode().strip().split("=")[1])

    def wait_for_log(self, text):
        deadline = time.monotonic() + 5  # the error log is flushed once a second
        while text not in self.server.error_log_text():
            self.assertLess(time.monotonic(), deadline, "not in the error log: " + text)
            time.sleep(0.1)

    def test_echo_params_and_body(self):
        body = os.urandom(200000)
        raw = (b"PUT /x.php/tail?mode=echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
        r = exchange(self.server.port, raw)
        echo = json.loads(r.body)
        self.assertEqual(echo["stdin_length"], len(body))
        self.assertEqual(echo["params"]["REQUEST_METHOD"], "PUT")
        self.assertEqual(echo["params"]["PATH_INFO"], "/tail")
        self.assertEqual(echo["params"]["CONTENT_LENGTH"], str(len(body)))

    def test_garbage_record_502(self):
        self.assertEqual(get(self.server.port, "/x.php?mode=garbage").status, 502)
        self.assertEqual(get(self.server.port, "/x.php?mode=status").status, 201)

    def test_close_right_after_head(self):
        # Head, part of the body and the close come together: a clean 502 when
        # lepus sees the close before it has sent the head, else a torn
        # response and a closed connection; never a complete-looking one.
        with self.server.connect(timeout=10) as s:
            s.sendall(b"GET /x.php?mode=close HTTP/1.1\r\nHost: x\r\n\r\n")
            r, _ = read_reply(s)
            if r.status != 502:
                self.assertEqual(r.status, 200)
                self.assertFalse(r.complete, "a torn response must not look complete")
                self.assertTrue(harness.is_closed(s))
        self.assertEqual(get(self.server.port, "/x.php?mode=status").status, 201)

    def test_close_mid_response_closes_client(self):
        # The head reaches the client 200 ms before php-fpm's side breaks off.
        with self.server.connect(timeout=10) as s:
            s.sendall(b"GET /x.php?mode=torn HTTP/1.1\r\nHost: x\r\n\r\n")
            r, _ = read_reply(s)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header("content-length"), "100")
            self.assertFalse(r.complete, "a torn response must not look complete")
            self.assertTrue(harness.is_closed(s))
        r = get(self.server.port, "/x.php?mode=status")
        self.assertEqual((r.status, r.body), (201, b"created\n"))

    def test_silent_backend_504(self):
        self.assertEqual(get(self.server.port, "/x.php?mode=never").status, 504)
        self.assertEqual(get(self.server.port, "/x.php?mode=status").status, 201)

    def test_stderr_goes_to_error_log(self):
        r = get(self.server.port, "/x.php?mode=stderr")
        self.assertEqual(r.body, b"after stderr\n")
        self.wait_for_log('"/x.php": PHP Warning: from fcgi_responder')

    def test_client_disconnect_keeps_backend_connection(self):
        before = self.connections()
        for _ in range(3):
            s = self.server.connect()
            s.sendall(b"GET /x.php?mode=slow&ms=400 HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.1)
            s.close()
        # The pool's only connection drains each abandoned response and is reused.
        self.assertEqual(self.connections(), before)

    def test_large_response_to_slow_reader(self):
        # More than every socket buffer on the way: lepus must stop reading the
        # backend while the client does not read, then deliver every byte.
        size = 16 << 20
        with self.server.connect(timeout=20) as s:
            s.sendall(b"GET /x.php?mode=big&size=%d HTTP/1.1\r\nHost: x\r\n\r\n" % size)
            time.sleep(0.5)
            r, _ = read_reply(s)
        self.assertTrue(r.complete)
        self.assertEqual(len(r.body), size)
        self.assertEqual(r.body[:52], b"abcdefghijklmnopqrstuvwxyz" * 2)
        self.assertEqual(r.body[-4:], bytes(b"abcdefghijklmnopqrstuvwxyz"[(size - 4 + i) % 26]
                                            for i in range(4)))


class PoolLifecycle(unittest.TestCase):
    """Idle timeout and backend restarts, seen through the responder's connection count."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()

    def count(self, server):
        r = get(server.port, "/x.php?mode=count")
        self.assertEqual(r.status, 200)
        return int(r.body.decode().strip().split("=")[1])

    def test_idle_connections_are_closed(self):
        responder = Responder()
        self.addCleanup(responder.stop)
        server = harness.Lepus(["--fastcgi", responder.address, "--threads", "1",
                                "--fastcgi-pool", "1", "--fastcgi-idle-timeout", "200ms",
                                "--fastcgi-keepalive", "on"])
        self.addCleanup(server.stop, self)
        server.write("x.php", "x")
        first = self.count(server)
        self.assertEqual(self.count(server), first)  # reused while fresh
        time.sleep(0.8)
        self.assertEqual(self.count(server), first + 1)  # the idle one was closed

    def test_restarted_backend_is_used_without_error(self):
        tmp = harness.temp_dir(self, "restart")
        path = os.path.join(tmp, "r.sock")
        responder = Responder(unix_path=path)
        server = harness.Lepus(["--fastcgi", responder.address, "--threads", "1",
                                "--fastcgi-pool", "1", "--fastcgi-keepalive", "on"])
        self.addCleanup(server.stop, self)
        server.write("x.php", "x")
        self.assertEqual(self.count(server), 1)
        responder.stop()  # closes the pooled connection under lepus
        responder = Responder(unix_path=path)
        self.addCleanup(responder.stop)
        # The dead pooled connection is replaced, never reported.
        for _ in range(3):
            self.assertEqual(get(server.port, "/x.php?mode=status").status, 201)


class ConnectionPerRequest(unittest.TestCase):
    """The default --fastcgi-keepalive off: BEGIN_REQUEST without FCGI_KEEP_CONN, so
    the backend closes after END_REQUEST (§5.1) and each request has a connection
    of its own; the pool still bounds the requests the backend is given at once."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.responder = Responder()
        cls.server = harness.Lepus(["--fastcgi", cls.responder.address, "--threads", "1",
                                    "--fastcgi-pool", "1", "--status-path", "/_status"])
        cls.server.write("x.php", "x")

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop(harness.LepusTestCase._Checker())
        finally:
            cls.responder.stop()

    def count(self):
        r = get(self.server.port, "/x.php?mode=count")
        self.assertEqual(r.status, 200)
        return int(r.body.decode().strip().split("=")[1])

    def fastcgi_gauges(self):
        r = get(self.server.port, "/_status")
        self.assertEqual(r.status, 200)
        return json.loads(r.body)["reactors"][0]["fastcgi"]

    def test_a_new_connection_per_request(self):
        first = self.count()
        self.assertEqual(get(self.server.port, "/x.php?mode=status").status, 201)
        self.assertEqual(self.count(), first + 2)
        self.assertEqual(self.fastcgi_gauges(), {"busy": 0, "idle": 0, "queued": 0})

    def test_abandoned_response_is_drained_then_closed(self):
        # A client that goes away does not free the slot while the backend still
        # runs its request: the next request waits for the end (pool 1), then
        # gets a connection of its own.
        with self.server.connect() as s:
            s.sendall(b"GET /x.php?mode=slow&ms=400 HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.1)
        r = get(self.server.port, "/x.php?mode=status")
        self.assertEqual((r.status, r.body), (201, b"created\n"))
        self.assertEqual(self.fastcgi_gauges(), {"busy": 0, "idle": 0, "queued": 0})


class KeepaliveConfigKeys(unittest.TestCase):
    """`fastcgi_keepalive` in a config file, and a site's own `keepalive`, seen
    through the responder's connection count (one connection reused, or one each)."""

    def setUp(self):
        harness.require_binary()
        self.responder = Responder()
        self.addCleanup(self.responder.stop)
        self.dir = harness.temp_dir(self, "keepalive")
        os.makedirs(os.path.join(self.dir, "www"))
        with open(os.path.join(self.dir, "www", "x.php"), "w") as f:
            f.write("x")

    def serve(self, text):
        path = os.path.join(self.dir, "lepus.toml")
        with open(path, "w") as f:
            f.write('root = "%s"\nthreads = 1\nfastcgi_pool = 1\n' % os.path.join(self.dir, "www"))
            f.write(text.replace("ADDRESS", self.responder.address))
        server = harness.Lepus(["--config", path])
        self.addCleanup(server.stop, self)
        return server

    def new_connections(self, server):
        counts = []
        for _ in range(3):
            r = get(server.port, "/x.php?mode=count")
            self.assertEqual(r.status, 200)
            counts.append(int(r.body.decode().strip().split("=")[1]))
        return counts[2] - counts[0]

    def test_global_key(self):
        for value, new in (("true", 0), ("false", 2), ('"on"', 0)):
            with self.subTest(value=value):
                server = self.serve('fastcgi = "ADDRESS"\nfastcgi_keepalive = %s\n' % value)
                self.assertEqual(self.new_connections(server), new)

    def test_site_key_overrides_the_global_one(self):
        for site, new in (("true", 0), ("false", 2)):
            with self.subTest(site=site):
                server = self.serve(
                    'fastcgi_keepalive = %s\n[[site]]\nserver_names = ["localhost"]\n'
                    'default = true\nroot = "%s"\nfastcgi = { address = "ADDRESS", keepalive = %s }\n'
                    % ("false" if site == "true" else "true", os.path.join(self.dir, "www"), site))
                self.assertEqual(self.new_connections(server), new)

    def test_bad_values_are_refused(self):
        for text in ('fastcgi = "ADDRESS"\nfastcgi_keepalive = "maybe"\n',
                     '[[site]]\nserver_names = ["localhost"]\ndefault = true\n'
                     'fastcgi = { address = "ADDRESS", keepalive = "on" }\n'):
            with self.subTest(text=text):
                path = os.path.join(self.dir, "bad.toml")
                with open(path, "w") as f:
                    f.write(text.replace("ADDRESS", self.responder.address))
                result = subprocess.run([harness.BINARY, "-t", "--config", path],
                                        capture_output=True, text=True, timeout=30)
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn("keepalive", result.stderr)


class CommandLine(unittest.TestCase):
    def test_bad_fastcgi_flags_exit_2_with_one_line(self):
        harness.require_binary()
        root = harness.temp_dir(self, "cli")
        for args in (["--fastcgi", "nope"], ["--fastcgi", "unix:"],
                     ["--fastcgi", "127.0.0.1:70000"], ["--fastcgi-ext", "php"],
                     ["--fastcgi-pool", "0"], ["--fastcgi-timeout", "0"],
                     ["--fastcgi-queue-timeout", "soon"], ["--fastcgi-keepalive", "yes"]):
            result = subprocess.run([harness.BINARY, root] + args, capture_output=True, text=True,
                                    timeout=10)
            self.assertEqual(result.returncode, 2, args)
            self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
            self.assertTrue(result.stderr.startswith("lepus: "), result.stderr)


class MisbehavingBackendTcp(MisbehavingBackend):
    TCP = True


class FastCgiOverload(unittest.TestCase):
    """1x, 2x and 3x the load php-fpm can serve (4 children, pool 4, queue 2,
    100 ms a script: 40/s) from closed-loop clients: at 1x every request is
    answered 200; beyond pool + queue the rest get a 503 with Retry-After at
    once (never a client left waiting until it gives up), and the goodput
    holds at the capacity (at least half of it: the machine is shared)."""
    POOL, SERVICE_MS = 4, 100

    def test_goodput_held_at_1x_2x_and_3x_with_fast_503s(self):
        require_php_fpm()
        fpm = phpfpm.PhpFpm(children=self.POOL)
        self.addCleanup(fpm.cleanup)
        server = harness.Lepus(["--fastcgi", fpm.address, "--threads", "1", "--fastcgi-pool",
                                str(self.POOL), "--fastcgi-queue", "2",
                                "--fastcgi-queue-timeout", "1s"], access_log=False)
        populate_site(server)
        self.addCleanup(server.stop, self)
        self.assertEqual(get(server.port, "/hello.php").status, 200)
        capacity = self.POOL * 1000 / self.SERVICE_MS  # requests per second
        request = (b"GET /slow.php?ms=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                   % self.SERVICE_MS)
        for factor in (1, 2, 3):
            with self.subTest(load="%dx" % factor):
                seconds = 4
                outcomes = closed_loop_load(server.port, request, self.POOL * factor, seconds)
                statuses = [status for status, _ in outcomes]
                self.assertEqual([o for o in outcomes if o[0] not in (200, 503)], [])
                self.assertTrue(all(retry == "1" for status, retry in outcomes if status == 503))
                if factor == 1:
                    self.assertNotIn(503, statuses)
                else:
                    self.assertIn(503, statuses)
                ok = statuses.count(200)
                self.assertGreaterEqual(ok / seconds, capacity / 2,
                                        "200s %d in %d s at %dx" % (ok, seconds, factor))
        self.assertEqual(get(server.port, "/hello.php").body, b"hello 5050")


if __name__ == "__main__":
    harness.main()
