"""Behind a proxy (issue 17): --real-ip-from and --proxy-protocol. A real PROXY
protocol v1 and v2 header from a Python client sets the client address of the
access log and of --status-allow when the peer (127.0.0.1) is trusted; from an
untrusted peer the header is consumed and ignored, as is a forged
X-Forwarded-For. A connection without the header is closed unanswered."""
import socket
import struct
import time
import unittest

import phpfpm
from harness import BINARY, Lepus, is_closed, read_response

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_v2_tcp4(source, source_port, destination="127.0.0.1", destination_port=80):
    body = socket.inet_aton(source) + socket.inet_aton(destination) + \
        struct.pack("!HH", source_port, destination_port)
    return V2_SIGNATURE + bytes([0x21, 0x11]) + struct.pack("!H", len(body)) + body


def proxy_v2_tcp6(source, source_port):
    body = socket.inet_pton(socket.AF_INET6, source) + socket.inet_pton(socket.AF_INET6, "::1") + \
        struct.pack("!HH", source_port, 80)
    # A TLV (PP2_TYPE_NOOP) after the addresses, as proxies may add.
    body += bytes([0x04, 0x00, 0x02]) + b"xx"
    return V2_SIGNATURE + bytes([0x21, 0x21]) + struct.pack("!H", len(body)) + body


def proxy_v2_local():
    return V2_SIGNATURE + bytes([0x20, 0x00, 0x00, 0x00])


REQUEST = b"GET /_status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n"


class ProxyServer:
    """A lepus with --proxy-protocol whose status page only 203.0.113.0/24 and
    2001:db8::/32 may read: a 200 there tells which client address lepus took."""

    def __init__(self, test, real_ip_from):
        self.test = test
        self.server = Lepus(["--proxy-protocol", "--real-ip-from", real_ip_from,
                             "--status-path", "/_status",
                             "--status-allow", "203.0.113.0/24,2001:db8::/32"])

    def send(self, header, extra_headers=b""):
        with self.server.connect() as s:
            s.sendall(header + REQUEST % extra_headers)
            return read_response(s).status

    def last_client(self, count):
        """The client address of the last access-log line, once `count` lines are there."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = self.server.access_lines()
            if len(found) >= count:
                return found[count - 1].split(" ", 1)[0]
            time.sleep(0.1)
        self.test.fail("no access-log line %d" % count)

    def stop(self):
        self.server.stop(self.test)


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class TrustedProxy(unittest.TestCase):
    def setUp(self):
        self.proxy = ProxyServer(self, "127.0.0.1")

    def tearDown(self):
        self.proxy.stop()

    def test_v1_header_sets_the_client(self):
        status = self.proxy.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 80\r\n")
        self.assertEqual(status, 200)
        self.assertEqual(self.proxy.last_client(1), "203.0.113.9")
        status = self.proxy.send(b"PROXY TCP6 2001:db8::9 ::1 51000 80\r\n")
        self.assertEqual(status, 200)
        self.assertEqual(self.proxy.last_client(2), "2001:db8::9")

    def test_v2_header_sets_the_client(self):
        self.assertEqual(self.proxy.send(proxy_v2_tcp4("203.0.113.10", 40000)), 200)
        self.assertEqual(self.proxy.last_client(1), "203.0.113.10")
        self.assertEqual(self.proxy.send(proxy_v2_tcp6("2001:db8::10", 40000)), 200)
        self.assertEqual(self.proxy.last_client(2), "2001:db8::10")

    def test_local_and_unknown_keep_the_peer(self):
        # A health check of the proxy itself: the connection's own address.
        self.assertEqual(self.proxy.send(proxy_v2_local()), 403)
        self.assertEqual(self.proxy.last_client(1), "127.0.0.1")
        self.assertEqual(self.proxy.send(b"PROXY UNKNOWN\r\n"), 403)
        self.assertEqual(self.proxy.last_client(2), "127.0.0.1")

    def test_header_split_across_writes(self):
        header = b"PROXY TCP4 203.0.113.11 127.0.0.1 51000 80\r\n"
        with self.proxy.server.connect() as s:
            for i in range(0, len(header), 7):
                s.sendall(header[i:i + 7])
                time.sleep(0.02)
            s.sendall(REQUEST % b"")
            self.assertEqual(read_response(s).status, 200)
        self.assertEqual(self.proxy.last_client(1), "203.0.113.11")

    def test_keepalive_requests_after_the_header(self):
        with self.proxy.server.connect() as s:
            s.sendall(b"PROXY TCP4 203.0.113.12 127.0.0.1 51000 80\r\n" +
                      b"GET /_status HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
            first = read_response(s, buffer=b"")
            second = read_response(s, buffer=first.leftover)
            self.assertEqual((first.status, second.status), (200, 200))

    def test_missing_or_broken_header_closes_unanswered(self):
        for data in (REQUEST % b"", b"PROXY TCP4 203.0.113.9\r\n" + REQUEST % b"",
                     b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"):
            with self.subTest(data=data[:30]):
                with self.proxy.server.connect() as s:
                    s.sendall(data)
                    s.settimeout(10)
                    try:
                        answer = s.recv(100)
                    except ConnectionResetError:
                        answer = b""
                    self.assertEqual(answer, b"", "answered instead of closing")


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
@unittest.skipUnless(phpfpm.find_php_fpm(), "php-fpm not installed (apt-get install php-fpm)")
class RemoteAddrForPhp(unittest.TestCase):
    """REMOTE_ADDR, as a real php-fpm sees it, is the client the PROXY header names."""

    def test_remote_addr(self):
        # One reactor; php-fpm sees the address through the CGI parameters alone.
        _, server = phpfpm.start_site(self, ["--threads", "1", "--proxy-protocol",
                                             "--real-ip-from", "127.0.0.1"], children=2)
        server.write("ip.php", "<?php echo $_SERVER['REMOTE_ADDR'];")
        for header, client in ((b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 80\r\n", b"203.0.113.9"),
                               (proxy_v2_tcp6("2001:db8::9", 4000), b"2001:db8::9"),
                               (proxy_v2_local(), b"127.0.0.1")):
            with server.connect() as s:
                s.sendall(header + b"GET /ip.php HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")
                r = read_response(s)
            self.assertEqual((r.status, r.body), (200, client))


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class UntrustedPeer(unittest.TestCase):
    """The peer (127.0.0.1) is not in --real-ip-from: nothing it says is believed."""

    def setUp(self):
        self.proxy = ProxyServer(self, "10.0.0.0/8")

    def tearDown(self):
        self.proxy.stop()

    def test_forged_proxy_headers_are_ignored(self):
        self.assertEqual(self.proxy.send(b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 80\r\n"), 403)
        self.assertEqual(self.proxy.last_client(1), "127.0.0.1")
        self.assertEqual(self.proxy.send(proxy_v2_tcp4("203.0.113.9", 40000)), 403)
        self.assertEqual(self.proxy.last_client(2), "127.0.0.1")

    def test_forged_x_forwarded_for_is_ignored(self):
        status = self.proxy.send(b"PROXY UNKNOWN\r\n", b"X-Forwarded-For: 203.0.113.9\r\n")
        self.assertEqual(status, 403)
        self.assertEqual(self.proxy.last_client(1), "127.0.0.1")


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class TrustedForwardedFor(unittest.TestCase):
    def setUp(self):
        self.server = Lepus(["--real-ip-from", "127.0.0.1,10.0.0.0/8", "--status-path", "/_status",
                             "--status-allow", "203.0.113.0/24"])

    def tearDown(self):
        self.server.stop(self)

    def clients(self, count):
        deadline = time.monotonic() + 20
        while len(self.server.access_lines()) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return [l.split(" ", 1)[0] for l in self.server.access_lines()]

    def test_rightmost_untrusted_address_is_the_client(self):
        get = self.server.get
        self.assertEqual(get("/_status", ["X-Forwarded-For: 203.0.113.9"]).status, 200)
        # A forged entry on the left, a trusted hop on the right.
        self.assertEqual(get("/_status", ["X-Forwarded-For: 203.0.113.66, 198.51.100.7, 10.1.1.1"])
                         .status, 403)
        self.assertEqual(get("/_status", ["X-Forwarded-For: 6.6.6.6",
                                          "X-Forwarded-For: 203.0.113.10"]).status, 200)
        self.assertEqual(get("/_status").status, 403)
        self.assertEqual(self.clients(4), ["203.0.113.9", "198.51.100.7", "203.0.113.10",
                                           "127.0.0.1"])

    def test_each_request_of_a_keepalive_connection_has_its_own_client(self):
        with self.server.connect() as s:
            s.sendall(b"GET /_status HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 203.0.113.1\r\n\r\n"
                      b"GET /_status HTTP/1.1\r\nHost: x\r\n\r\n")
            first = read_response(s, buffer=b"")
            second = read_response(s, buffer=first.leftover)
        self.assertEqual((first.status, second.status), (200, 403))
        self.assertEqual(self.clients(2), ["203.0.113.1", "127.0.0.1"])


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class WithoutProxyProtocol(unittest.TestCase):
    def test_forged_x_forwarded_for_from_an_untrusted_peer_is_ignored(self):
        server = Lepus(["--real-ip-from", "10.0.0.0/8", "--status-path", "/_status",
                        "--status-allow", "203.0.113.0/24"])
        try:
            r = server.get("/_status", ["X-Forwarded-For: 203.0.113.9"])
            self.assertEqual(r.status, 403)
            r = server.get("/_status", ["X-Forwarded-For: 203.0.113.9, 10.1.1.1"])
            self.assertEqual(r.status, 403)
            deadline = time.monotonic() + 20
            while len(server.access_lines()) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertEqual([l.split(" ", 1)[0] for l in server.access_lines()],
                             ["127.0.0.1", "127.0.0.1"])
        finally:
            server.stop(self)

    def test_an_incomplete_proxy_header_is_closed_at_the_header_timeout(self):
        server = Lepus(["--proxy-protocol", "--real-ip-from", "127.0.0.1",
                        "--header-timeout", "1s"])
        try:
            for start in (b"", b"PROXY TCP4 203.0.113.9", V2_SIGNATURE[:7]):
                with self.subTest(start=start):
                    with server.connect() as s:
                        s.sendall(start)
                        self.assertTrue(is_closed(s, timeout=20), "still open")
        finally:
            server.stop(self)

    def test_a_proxy_header_without_proxy_protocol_is_a_bad_request(self):
        server = Lepus(["--real-ip-from", "127.0.0.1"])
        try:
            r = server.request(b"PROXY TCP4 203.0.113.9 127.0.0.1 51000 80\r\n" + REQUEST % b"")
            self.assertEqual(r.status, 400)
        finally:
            server.stop(self)

    def test_real_ip_from_is_validated(self):
        import subprocess
        for value in ("10.0.0.0/33", "nonsense", "unix"):
            with self.subTest(value=value):
                done = subprocess.run([BINARY, "--real-ip-from", value], capture_output=True,
                                      text=True, timeout=10)
                self.assertEqual(done.returncode, 2, done.stderr)
                self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
                self.assertIn("--real-ip-from", done.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
