"""HTTP/3 over QUIC end to end (issue 39): --listen quic://ADDR:PORT beside an
https:// listener on the same port, answered by the same router, handlers and
filters as HTTP/1.1 and HTTP/2: static files (small, 10 MiB with a checksum, a
range), a 404, compression, basic auth, a PHP page and a POST body through
php-fpm, several streams on one connection; Alt-Svc on the HTTPS answers; the
access log says HTTP/3.0.

Clients: Python aioquic (pip install aioquic) for the scripted requests, and
Debian's ngtcp2-client (gtlsclient) for the downloads. A test whose client is
missing is skipped and says which. Needs php-fpm and htpasswd (apache2-utils)."""

import asyncio
import gzip
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import unittest

import harness
import phpfpm
from auth_test import htpasswd, wait_until

try:
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection
    from aioquic.quic.events import ConnectionTerminated, StreamReset
    AIOQUIC = True
except ImportError:
    AIOQUIC = False

GTLSCLIENT = shutil.which("gtlsclient")

PHP = ("<?php header('Content-Type: text/plain');\n"
       "echo 'php ', $_SERVER['SERVER_PROTOCOL'], ' ', $_SERVER['REQUEST_METHOD'], ' ',"
       " md5(file_get_contents('php://input')), ' ', $_SERVER['HTTPS'] ?? '-';\n")


class Answer:
    def __init__(self):
        self.headers = {}
        self.status = None
        self.body = bytearray()  # bytes += would copy the body at every packet
        self.reset = False


if AIOQUIC:
    class H3Client(QuicConnectionProtocol):
        """A minimal HTTP/3 client on aioquic: requests on one connection."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.h3 = H3Connection(self._quic)
            self.answers = {}
            self.waiters = {}
            self.terminated = None
            self.closed_waiter = None

        async def closed_by_server(self):
            """The server's CONNECTION_CLOSE (a ConnectionTerminated event)."""
            if self.terminated is None:
                self.closed_waiter = asyncio.get_running_loop().create_future()
                await self.closed_waiter
            return self.terminated

        def quic_event_received(self, event):
            if isinstance(event, ConnectionTerminated):
                self.terminated = event
                for waiter in self.waiters.values():
                    waiter.set_exception(ConnectionError("connection closed: 0x%x"
                                                         % event.error_code))
                self.waiters.clear()
                if self.closed_waiter and not self.closed_waiter.done():
                    self.closed_waiter.set_result(event)
                return
            if isinstance(event, StreamReset) and event.stream_id in self.waiters:
                self.answers[event.stream_id].reset = True
                self.waiters.pop(event.stream_id).set_result(None)
                return
            for e in self.h3.handle_event(event):
                answer = self.answers.get(e.stream_id)
                if answer is None:
                    continue
                if isinstance(e, HeadersReceived):
                    for name, value in e.headers:
                        if name == b":status":
                            answer.status = int(value)
                        else:
                            answer.headers[name.decode().lower()] = value.decode()
                elif isinstance(e, DataReceived):
                    answer.body += e.data
                if getattr(e, "stream_ended", False) and e.stream_id in self.waiters:
                    self.waiters.pop(e.stream_id).set_result(None)

        async def request(self, authority, path, headers=(), method="GET", body=None):
            stream_id = self._quic.get_next_available_stream_id()
            fields = [(b":method", method.encode()), (b":scheme", b"https"),
                      (b":authority", authority.encode()), (b":path", path.encode())]
            for line in headers:
                name, value = line.split(":", 1)
                fields.append((name.strip().lower().encode(), value.strip().encode()))
            self.answers[stream_id] = Answer()
            done = asyncio.get_running_loop().create_future()
            self.waiters[stream_id] = done
            self.h3.send_headers(stream_id, fields, end_stream=body is None)
            if body is not None:
                self.h3.send_data(stream_id, body, end_stream=True)
            self.transmit()
            await done
            answer = self.answers.pop(stream_id)
            answer.body = bytes(answer.body)
            return answer


def h3_requests(port, requests, timeout=60, name="localhost", ca=None):
    """Sends every (path, headers, method, body) on one new HTTP/3 connection
    to `name` (SNI and :authority), whose certificate must verify against `ca`
    (the harness's test certificate by default), at once, and returns their
    Answers in order."""
    if not AIOQUIC:
        raise unittest.SkipTest("aioquic is not installed (pip install aioquic)")

    async def run():
        configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                          server_name=name)
        configuration.load_verify_locations(ca or harness.test_certificate()[0])
        async with connect("127.0.0.1", port, configuration=configuration,
                           create_protocol=H3Client) as client:
            authority = "%s:%d" % (name, port)
            return await asyncio.gather(*(client.request(authority, *r) for r in requests))

    return asyncio.run(asyncio.wait_for(run(), timeout))


def h3_get(port, path, headers=(), method="GET", body=None):
    return h3_requests(port, [(path, headers, method, body)])[0]


class Http3(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="http3")
        cls.root = os.path.join(cls.dir, "www")
        passwords = os.path.join(cls.dir, "htpasswd")
        htpasswd(passwords, "bob", "secret", create=True)
        cert, key = harness.test_certificate()
        cls.port = harness.free_port()  # TCP for https://, the same number on UDP for quic://
        config = os.path.join(cls.dir, "lepus.toml")

        # A second site with a certificate of its own, chosen by SNI as on TCP.
        cls.site_cert = os.path.join(cls.dir, "site.pem")
        site_key = os.path.join(cls.dir, "site.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", site_key, "-out",
                        cls.site_cert, "-days", "2", "-subj", "/CN=site.test", "-addext",
                        "subjectAltName=DNS:site.test"], check=True, capture_output=True)
        cls.site_root = os.path.join(cls.dir, "site")
        os.makedirs(cls.site_root)
        with open(os.path.join(cls.site_root, "index.html"), "w") as f:
            f.write("the other site\n")

        def write_config(address):
            with open(config, "w") as f:
                f.write('[[site]]\nroot = "%s"\nfastcgi = "%s"\n'
                        'auth = [{ paths = ["/private/"], realm = "Private", htpasswd = "%s" }]\n'
                        % (cls.root, address, passwords))
                f.write('[[site]]\nserver_names = ["site.test"]\nroot = "%s"\n'
                        'tls = { cert = "%s", key = "%s" }\n'
                        % (cls.site_root, cls.site_cert, site_key))
            return ["--config", config, "--listen", "https://127.0.0.1:%d" % cls.port,
                    "--listen", "quic://127.0.0.1:%d" % cls.port, "--tls-cert", cert,
                    "--tls-key", key, "--threads", "2", "--status-path", "/status"]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=2, fastcgi=False,
                                                root=cls.root, protocol="h1")
        cls.big = os.urandom(10 * 1024 * 1024)
        cls.text = ("lepus speaks HTTP/3. " * 400).encode()
        for name, content in (("index.html", "hello over h3\n"), ("big.bin", cls.big),
                              ("page.txt", cls.text), ("private/secret.txt", "for bob\n"),
                              ("info.php", PHP)):
            cls.server.write(name, content)

    def test_small_file(self):
        answer = h3_get(self.port, "/index.html")
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.body, b"hello over h3\n")
        self.assertEqual(answer.headers.get("content-length"), "14")
        self.assertNotIn("alt-svc", answer.headers)  # it is HTTP/3 already
        wait_until(self, lambda: any('"GET /index.html HTTP/3.0" 200 14' in line
                                     for line in self.server.access_lines()),
                   "the access log line of the HTTP/3 request")

    def test_big_file_checksum(self):
        answer = h3_get(self.port, "/big.bin")
        self.assertEqual(answer.status, 200)
        self.assertEqual(len(answer.body), len(self.big))
        self.assertEqual(hashlib.sha256(answer.body).hexdigest(),
                         hashlib.sha256(self.big).hexdigest())

    def test_range(self):
        answer = h3_get(self.port, "/big.bin", ["Range: bytes=1000-1999"])
        self.assertEqual(answer.status, 206)
        self.assertEqual(answer.body, self.big[1000:2000])
        self.assertEqual(answer.headers.get("content-range"),
                         "bytes 1000-1999/%d" % len(self.big))

    def test_not_found(self):
        answer = h3_get(self.port, "/missing.html")
        self.assertEqual(answer.status, 404)

    def test_compression(self):
        answer = h3_get(self.port, "/page.txt", ["Accept-Encoding: gzip"])
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.headers.get("content-encoding"), "gzip")
        self.assertEqual(gzip.decompress(answer.body), self.text)

    def test_basic_auth(self):
        refused = h3_get(self.port, "/private/secret.txt")
        self.assertEqual(refused.status, 401)
        self.assertIn("Private", refused.headers.get("www-authenticate", ""))
        wrong = h3_get(self.port, "/private/secret.txt", ["Authorization: Basic Ym9iOndyb25n"])
        self.assertEqual(wrong.status, 401)
        granted = h3_get(self.port, "/private/secret.txt",
                         ["Authorization: Basic Ym9iOnNlY3JldA=="])  # bob:secret
        self.assertEqual(granted.status, 200)
        self.assertEqual(granted.body, b"for bob\n")

    def test_php_page(self):
        answer = h3_get(self.port, "/info.php")
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.body.decode(), "php HTTP/3.0 GET %s on"
                         % hashlib.md5(b"").hexdigest())

    def test_php_post_body(self):
        body = os.urandom(300 * 1024)  # more than the stream's flow-control window
        answer = h3_get(self.port, "/info.php", ["Content-Type: application/octet-stream"],
                        method="POST", body=body)
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.body.decode(), "php HTTP/3.0 POST %s on"
                         % hashlib.md5(body).hexdigest())

    def test_streams_on_one_connection(self):
        requests = [("/index.html", (), "GET", None), ("/missing", (), "GET", None),
                    ("/info.php", (), "GET", None), ("/big.bin", ["Range: bytes=0-99"], "GET",
                                                     None)] * 5
        answers = h3_requests(self.port, requests)
        self.assertEqual([a.status for a in answers], [200, 404, 200, 206] * 5)
        self.assertEqual(answers[3].body, self.big[:100])

    def test_more_streams_than_the_limit_on_one_connection(self):
        # 250 requests at once, past the 100 concurrent streams: the client
        # opens more as streams close. Their answers fill more than one pass of
        # packets, which once aborted the server (a pass that stopped with a
        # packet half built: ngtcp2's "!ppe_pending" assertion).
        answers = h3_requests(self.port, [("/page.txt", (), "GET", None)] * 250)
        self.assertEqual([a.status for a in answers], [200] * 250)
        self.assertTrue(all(a.body == self.text for a in answers))

    def test_alt_svc_on_https(self):
        # The TCP side of the same port (HTTP/1.1 over TLS, then HTTP/2) advertises h3.
        for flag in ("--http1.1", "--http2"):
            result = subprocess.run(
                ["curl", "-sk", flag, "-o", "/dev/null", "-D", "-",
                 "https://127.0.0.1:%d/index.html" % self.port],
                capture_output=True, text=True, timeout=30)
            headers = result.stdout.lower()
            self.assertIn('alt-svc: h3=":%d"' % self.port, headers, flag)
        plain = self.server.fetch("/index.html")  # the plain listener: no TLS, no Alt-Svc
        self.assertIsNone(plain.header("alt-svc"))

    def test_sni_picks_the_site_certificate(self):
        # The handshake verifies only against the site's own certificate.
        answer = h3_requests(self.port, [("/index.html", (), "GET", None)], name="site.test",
                             ca=self.site_cert)[0]
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.body, b"the other site\n")

    def test_status_page(self):
        h3_requests(self.port, [("/index.html", (), "GET", None)] * 3)
        answer = h3_get(self.port, "/status")
        self.assertEqual(answer.status, 200)
        reactors = json.loads(answer.body)["reactors"]
        total = lambda key: sum(r["http3"][key] for r in reactors)
        self.assertGreaterEqual(total("connections_total"), 2)
        self.assertGreaterEqual(total("connections"), 1)  # this one, at least
        self.assertGreaterEqual(total("streams_total"), 4)
        self.assertGreater(total("packets_received"), 0)
        self.assertGreater(total("packets_sent"), 0)

    def test_garbage_datagrams_are_dropped(self):
        # Not QUIC, a short header for no connection, a truncated Initial, a
        # version no one speaks: dropped, and the server goes on serving.
        junk = [b"", b"hello", os.urandom(1200), b"\x40" + os.urandom(30),
                b"\xc0\x00\x00\x00\x01\x08" + os.urandom(20),
                b"\xc0\x1a\x2a\x3a\x4a\x08" + os.urandom(1200)]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for datagram in junk * 20:
                s.sendto(datagram, ("127.0.0.1", self.port))
        self.assertEqual(h3_get(self.port, "/index.html").status, 200)

    def test_migrating_client_is_followed_across_reactors(self):
        # The client moves to a new local port mid-download (RFC 9000 §9); its
        # packets then hash to either reactor's socket, and one that lands on
        # the other reactor is handed to the connection's owner (the reactor
        # named in the connection ID). Repeated until a hand-off happened
        # (each try: one chance in two), every download complete.
        if not GTLSCLIENT:
            self.skipTest("gtlsclient is not installed (apt-get install ngtcp2-client)")
        handed_over = lambda: sum(r["http3"]["packets_handed_over"] for r in
                                  json.loads(h3_get(self.port, "/status").body)["reactors"])
        first = handed_over()
        for attempt in range(20):
            download = harness.temp_dir(self, name="h3-migrate")
            result = subprocess.run(
                [GTLSCLIENT, "--quiet", "--exit-on-all-streams-close", "--change-local-addr=50ms",
                 "--delay-stream=100ms", "--download", download, "127.0.0.1", str(self.port),
                 "https://localhost:%d/big.bin" % self.port], capture_output=True, timeout=60)
            self.assertEqual(result.returncode, 0, result.stderr[-2000:])
            with open(os.path.join(download, "big.bin"), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).digest(),
                                 hashlib.sha256(self.big).digest())
            if handed_over() > first:
                return
        self.fail("no packet was handed to another reactor in 20 migrations")

    def test_handshake_flood_gets_retry_and_the_server_answers(self):
        # 200 handshakes begun from as many ports and never continued (their
        # Initials are real, made by aioquic; the answers are never read):
        # past 64 in progress on a reactor, a new client gets a Retry (RFC 9000
        # §8.1.2), proves its address with the token, and is served.
        if not AIOQUIC:
            self.skipTest("aioquic is not installed (pip install aioquic)")
        retries = lambda: sum(r["http3"]["retries"] for r in
                              json.loads(h3_get(self.port, "/status").body)["reactors"])
        before = retries()
        flood = []
        try:
            for _ in range(200):
                client = QuicConnection(configuration=QuicConfiguration(
                    is_client=True, alpn_protocols=H3_ALPN, server_name="localhost"))
                client.connect(("127.0.0.1", self.port), now=time.time())
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind(("127.0.0.1", 0))
                flood.append(s)
                for data, address in client.datagrams_to_send(now=time.time()):
                    s.sendto(data, address)
            answer = h3_get(self.port, "/index.html")
            self.assertEqual(answer.status, 200)
            self.assertEqual(answer.body, b"hello over h3\n")
            self.assertGreater(retries(), before)
        finally:
            for s in flood:
                s.close()

    def test_gtlsclient_download(self):
        if not GTLSCLIENT:
            self.skipTest("gtlsclient is not installed (apt-get install ngtcp2-client)")
        download = harness.temp_dir(self, name="h3-download")
        result = subprocess.run(
            [GTLSCLIENT, "--quiet", "--exit-on-all-streams-close", "--download", download,
             "127.0.0.1", str(self.port), "https://localhost:%d/big.bin" % self.port,
             "https://localhost:%d/index.html" % self.port],
            capture_output=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        with open(os.path.join(download, "big.bin"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).digest(), hashlib.sha256(self.big).digest())
        with open(os.path.join(download, "index.html"), "rb") as f:
            self.assertEqual(f.read(), b"hello over h3\n")


class Http3Shutdown(unittest.TestCase):
    def test_sigterm_lets_a_download_in_flight_finish(self):
        # The drain waits for HTTP/3 streams as for TCP connections: the
        # response in flight is complete, then the connection closes with
        # H3_NO_ERROR and lepus exits 0.
        if not AIOQUIC:
            self.skipTest("aioquic is not installed (pip install aioquic)")
        cert, key = harness.test_certificate()
        port = harness.free_port()
        server = harness.Lepus(["--listen", "quic://127.0.0.1:%d" % port, "--tls-cert", cert,
                                "--tls-key", key], protocol="h1")
        self.addCleanup(server.stop, self)
        big = os.urandom(10 * 1024 * 1024)
        server.write("big.bin", big)

        async def run():
            configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                              server_name="localhost")
            configuration.load_verify_locations(cert)
            async with connect("127.0.0.1", port, configuration=configuration,
                               create_protocol=H3Client) as client:
                download = asyncio.ensure_future(client.request("localhost:%d" % port,
                                                                "/big.bin"))
                while not client.answers or next(iter(client.answers.values())).status is None:
                    await asyncio.sleep(0.001)  # until the head is in
                server.proc.send_signal(signal.SIGTERM)
                answer = await download
                closed = await client.closed_by_server()
                return answer, closed

        answer, closed = asyncio.run(asyncio.wait_for(run(), 60))
        self.assertEqual(answer.status, 200)
        self.assertEqual(hashlib.sha256(answer.body).digest(), hashlib.sha256(big).digest())
        self.assertEqual(closed.error_code, 0x100)
        self.assertEqual(server.proc.wait(timeout=20), 0)

    def test_sigterm_closes_open_connections_with_no_error(self):
        if not AIOQUIC:
            self.skipTest("aioquic is not installed (pip install aioquic)")
        cert, key = harness.test_certificate()
        port = harness.free_port()
        server = harness.Lepus(["--listen", "quic://127.0.0.1:%d" % port, "--tls-cert", cert,
                                "--tls-key", key], protocol="h1")
        self.addCleanup(server.stop, self)
        server.write("index.html", "bye\n")

        async def run():
            configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                              server_name="localhost")
            configuration.load_verify_locations(cert)
            async with connect("127.0.0.1", port, configuration=configuration,
                               create_protocol=H3Client) as client:
                answer = await client.request("localhost:%d" % port, "/index.html")
                self.assertEqual(answer.body, b"bye\n")
                server.proc.send_signal(signal.SIGTERM)
                return await client.closed_by_server()

        closed = asyncio.run(asyncio.wait_for(run(), 20))
        self.assertEqual(closed.error_code, 0x100)  # H3_NO_ERROR
        self.assertEqual(server.proc.wait(timeout=20), 0)


if __name__ == "__main__":
    harness.main()
