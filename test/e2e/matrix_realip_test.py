"""Real IP behind a PROXY-protocol load balancer in the protocol matrix (issue
31): realip_test.py's client-address checks over HTTP/1.1, HTTP/2 over TLS
and h2c. A relay written here plays the load balancer: it opens each
connection to lepus with a PROXY v1 or v2 header naming another client, then
passes curl's bytes through untouched (TLS and the h2c preface come after the
header, as behind HAProxy). PHP's REMOTE_ADDR and the access log must name
that client, not a forged X-Forwarded-For; a connection without the header
is closed unanswered whatever protocol it speaks (request_model_test.py has
X-Forwarded-For from a trusted proxy, per request, in the matrix).

realip_test.py keeps the byte-level checks of the header itself (split across
writes, malformed, LOCAL and UNKNOWN, the header timeout). Needs php-fpm."""
import socket
import struct
import threading
import time
import unittest

import harness
import phpfpm

WHO = "<?php echo $_SERVER['REMOTE_ADDR'] ?? 'NULL';\n"
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def proxy_v1(client):
    return ("PROXY TCP4 %s 127.0.0.1 40001 80\r\n" % client).encode()


def proxy_v2(client):
    # haproxy's proxy-protocol.txt §2.2: the PROXY command (0x21), TCP over
    # IPv4 (0x11), 12 address bytes.
    addresses = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack(
        ">HH", 40002, 80)
    return V2_SIGNATURE + b"\x21\x11" + struct.pack(">H", len(addresses)) + addresses


class Relay:
    """A TCP relay on a free loopback port: each accepted connection gets a new
    connection to `target` that starts with header(), then bytes both ways."""

    def __init__(self, target, header):
        self.target, self.header = target, header
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.threads = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.target), timeout=30)
            upstream.sendall(self.header)
            for source, sink in ((client, upstream), (upstream, client)):
                thread = threading.Thread(target=self.pump, args=(source, sink), daemon=True)
                thread.start()
                self.threads.append(thread)

    @staticmethod
    def pump(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()
        for thread in self.threads:
            thread.join(timeout=10)


class MatrixRealIp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        if harness.PROTOCOL == "h3":
            # The PROXY protocol is a preamble of a TCP connection; a QUIC
            # connection has no such preamble and its UDP peer is the client
            # (nginx refuses proxy_protocol on a quic listener likewise).
            raise unittest.SkipTest("the PROXY protocol has no HTTP/3 (QUIC) form")
        cls.fpm, cls.server = phpfpm.start_site(
            cls, ["--proxy-protocol", "--real-ip-from", "127.0.0.1"], children=2)
        cls.server.write("who.php", WHO)
        cls.server.write("page.txt", "page\n")
        cls.lepus_port = cls.server.tls_port if cls.server.protocol == "h2" else cls.server.port

    def through(self, header, path, headers=()):
        relay = Relay(self.lepus_port, header)
        self.addCleanup(relay.close)
        return self.server.fetch(path, headers=list(headers), curl_options=[
            "--connect-to", "127.0.0.1:%d:127.0.0.1:%d" % (self.lepus_port, relay.port)])

    def access_client(self, target):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for line in self.server.access_lines():
                if (' "GET %s ' % target) in line:
                    return line.split(" ", 1)[0]
            time.sleep(0.05)
        self.fail("no access-log line for %s" % target)

    def test_a_v1_header_names_the_client_for_php_and_the_log(self):
        response = self.through(proxy_v1("203.0.113.7"), "/who.php?v=1")
        self.assertEqual((response.status, response.body), (200, b"203.0.113.7"))
        self.assertEqual(self.access_client("/who.php?v=1"), "203.0.113.7")

    def test_a_v2_header_names_the_client_for_a_static_file(self):
        response = self.through(proxy_v2("198.51.100.9"), "/page.txt?v=2")
        self.assertEqual((response.status, response.body), (200, b"page\n"))
        self.assertEqual(self.access_client("/page.txt?v=2"), "198.51.100.9")

    def test_the_header_wins_over_a_forged_x_forwarded_for(self):
        # With --proxy-protocol the PROXY header names the client and the
        # request's X-Forwarded-For is the client's own text (router.cc, as
        # nginx's real_ip_header proxy_protocol), on every stream.
        response = self.through(proxy_v1("203.0.113.8"), "/who.php?v=xff",
                                ["X-Forwarded-For: 192.0.2.1"])
        self.assertEqual(response.body, b"203.0.113.8")

    def test_a_connection_without_the_header_is_closed_unanswered(self):
        with self.assertRaises(ConnectionError):
            self.server.fetch("/page.txt", timeout=10)


if __name__ == "__main__":
    harness.main()
