"""HTTP/3's UDP side (issue 39): batched receives and sends (recvmmsg,
sendmmsg) with UDP GSO where the kernel has it, and with GSO turned off
(LEPUS_QUIC_NO_GSO, the tests' switch): 10 MiB each way arrives byte-exact
on both paths; the status page's packets_lost under packet loss (nftables in
a network namespace, test/e2e/lossy_net.py) and without; a Version
Negotiation packet (RFC 9000 §6) for a hand-made datagram of an unknown
version, and a bound on how many; the start's warning that --proxy-protocol
does not apply to a quic:// listener.

Needs aioquic (pip install aioquic); the loss test needs root and nftables or
tc netem, and skips saying so otherwise."""

import hashlib
import http.server
import json
import os
import socket
import struct
import subprocess
import sys
import time
import unittest

import harness
import h3client
import http_backend
import lossy_net

HERE = os.path.dirname(os.path.abspath(__file__))
BIG = os.urandom(10 * 1024 * 1024)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


class HashingHandler(http_backend.Handler):
    """Answers a POST with the SHA-256 of its body."""

    def do_POST(self):
        left = int(self.headers.get("Content-Length", "0"))
        digest = hashlib.sha256()
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        self.send_body(digest.hexdigest().encode(), "text/plain")


def quic_counters(server):
    """The http3 counters of every reactor, summed."""
    status = json.loads(server.fetch("/status?format=json").body)
    total = {}
    for reactor in status["reactors"]:
        for name, value in reactor["http3"].items():
            total[name] = total.get(name, 0) + value
    return total


class GsoMixin:
    """lepus over h3, its files first and then a hashing backend (--proxy), GSO
    on or off."""
    NO_GSO = None

    @classmethod
    def setUpClass(cls):
        if not h3client.AIOQUIC:
            raise unittest.SkipTest(h3client.MISSING_REASON)
        cls.backend = http_backend.HttpBackend(HashingHandler)
        cls.addClassCleanup(cls.backend.stop)
        saved = os.environ.pop("LEPUS_QUIC_NO_GSO", None)
        if cls.NO_GSO:
            os.environ["LEPUS_QUIC_NO_GSO"] = "1"
        try:
            cls.server = harness.Lepus(
                ["--threads", "2", "--max-body-size", "16m", "--status-path", "/status",
                 "--compress", "off", "--proxy", cls.backend.address],
                protocol="h3")
        finally:
            os.environ.pop("LEPUS_QUIC_NO_GSO", None)
            if saved is not None:
                os.environ["LEPUS_QUIC_NO_GSO"] = saved
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())
        cls.server.write("big.bin", BIG)

    def test_10_mib_download_is_byte_exact(self):
        before = quic_counters(self.server)
        response = self.server.fetch("/big.bin", timeout=120)
        self.assertEqual(response.status, 200)
        self.assertEqual(sha256(response.body), sha256(BIG))
        after = quic_counters(self.server)
        sent = after["packets_sent"] - before["packets_sent"]
        calls = after["send_calls"] - before["send_calls"]
        self.assertGreater(sent, 7000)  # 10 MiB in packets of at most 1500 bytes
        # Batched: several packets per system call, whether GSO runs or sendmmsg.
        self.assertLess(calls, sent)

    def test_10_mib_upload_is_byte_exact(self):
        response = self.server.fetch("/upload", method="POST", body=BIG, timeout=120)
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body.decode(), sha256(BIG))

    def test_the_start_says_which_send_path(self):
        expected = "UDP GSO off" if self.NO_GSO else "UDP GSO on"
        self.assertTrue(self.server.error_lines("QUIC: " + expected),
                        self.server.error_log_text()[-2000:])


class WithGso(GsoMixin, unittest.TestCase):
    NO_GSO = False


class WithoutGso(GsoMixin, unittest.TestCase):
    NO_GSO = True


class Losses(unittest.TestCase):
    """packets_lost counts what loss recovery declared lost (RFC 9002 §6)."""

    def download(self, server, net=None):
        out = os.path.join(server.tmp, "fetched")
        argv = [sys.executable, os.path.join(HERE, "h3client.py"), "--timeout", "120", "-o",
                out, server.url("/big.bin")]
        done = subprocess.run(net.command(argv) if net else argv, capture_output=True, text=True,
                              timeout=180)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        with open(out, "rb") as f:
            self.assertEqual(sha256(f.read()), sha256(BIG))

    def lost_after_download(self, percent):
        if not h3client.AIOQUIC:
            self.skipTest(h3client.MISSING_REASON)
        with lossy_net.LossyNamespace(percent) as net:
            server = harness.Lepus(["--status-path", "/status", "--compress", "off"],
                                   protocol="h3", preexec=net.enter)
            try:
                server.write("big.bin", BIG)
                self.download(server, net)
                dropped = net.dropped()
                # A stream's losses are counted when it closes, or when its
                # connection ends: if the client's CONNECTION_CLOSE was one of
                # the packets dropped, that is the server's idle timeout (30 s)
                # later. So under loss the status page is asked until it counts
                # some, for up to 45 s.
                deadline = time.monotonic() + (45 if percent else 0)
                while True:
                    lost = self.packets_lost(server, net)
                    if lost > 0 or time.monotonic() >= deadline:
                        return lost, dropped
                    time.sleep(1)
            finally:
                server.stop(self)

    def packets_lost(self, server, net):
        """packets_lost summed over the reactors, from the status page asked
        from inside the namespace too."""
        out = os.path.join(server.tmp, "status.json")
        done = subprocess.run(net.command([
            sys.executable, os.path.join(HERE, "h3client.py"), "--timeout", "30", "-o",
            out, server.url("/status?format=json")]), capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        with open(out) as f:
            status = json.load(f)
        return sum(r["http3"]["packets_lost"] for r in status["reactors"])

    def test_packets_lost_counted_under_loss(self):
        lost, dropped = self.lost_after_download(5)
        self.assertGreater(dropped, 0, "the loss rule dropped nothing")
        self.assertGreater(lost, 0)

    def test_no_packets_lost_without_loss(self):
        # 64 KiB: a bigger file can overflow the Python client's socket
        # buffer on loopback, a real loss that ngtcp2 rightly counts.
        if not h3client.AIOQUIC:
            self.skipTest(h3client.MISSING_REASON)
        server = harness.Lepus(["--status-path", "/status", "--compress", "off"], protocol="h3")
        try:
            small = os.urandom(64 * 1024)
            server.write("small.bin", small)
            for _ in range(3):
                self.assertEqual(sha256(server.fetch("/small.bin").body), sha256(small))
            counters = quic_counters(server)
            self.assertGreater(counters["packets_sent"], 150)
            self.assertEqual(counters["packets_lost"], 0)
        finally:
            server.stop(self)


def unknown_version_datagram(dcid, scid, size=1200, version=0x1A2A3A4A):
    """A long-header packet (RFC 9000 §17.2) of a reserved version (§15), padded to `size`."""
    head = bytes([0xC0]) + struct.pack("!I", version) + bytes([len(dcid)]) + dcid + \
        bytes([len(scid)]) + scid
    return head + b"\0" * (size - len(head))


class VersionNegotiation(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not h3client.AIOQUIC:
            raise unittest.SkipTest(h3client.MISSING_REASON)
        cls.server = harness.Lepus(["--threads", "1", "--status-path", "/status"],
                                   protocol="h3")
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())
        cls.server.write("index.html", "still here\n")

    def client(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(s.close)
        s.connect(("127.0.0.1", self.server.quic_port))
        return s

    def test_unknown_version_gets_the_versions_we_speak(self):
        s = self.client()
        dcid, scid = os.urandom(8), os.urandom(5)
        s.send(unknown_version_datagram(dcid, scid))
        s.settimeout(5)
        reply = s.recv(2048)
        self.assertEqual(reply[0] & 0x80, 0x80)  # a long header (§17.2.1)
        self.assertEqual(struct.unpack("!I", reply[1:5])[0], 0)  # version 0: Version Negotiation
        # Its DCID is our SCID, its SCID our DCID.
        at = 5
        self.assertEqual(reply[at + 1:at + 1 + reply[at]], scid)
        at += 1 + reply[at]
        self.assertEqual(reply[at + 1:at + 1 + reply[at]], dcid)
        at += 1 + reply[at]
        versions = [struct.unpack("!I", reply[i:i + 4])[0] for i in range(at, len(reply), 4)]
        self.assertIn(1, versions)  # QUIC v1
        self.assertNotIn(0x1A2A3A4A, versions)
        self.assertLess(len(reply), 1200)  # never more than the datagram that asked
        self.assertEqual(self.server.fetch("/index.html").body, b"still here\n")

    def test_small_datagrams_and_version_negotiation_packets_get_nothing(self):
        s = self.client()
        s.send(unknown_version_datagram(os.urandom(8), os.urandom(8), size=600))  # §14.1
        s.send(unknown_version_datagram(os.urandom(8), os.urandom(8), version=0))  # §6.1
        s.settimeout(1)
        with self.assertRaises(socket.timeout):
            s.recv(2048)

    def test_a_flood_is_bounded(self):
        s = self.client()
        before = quic_counters(self.server)["version_negotiations"]
        for _ in range(400):
            s.send(unknown_version_datagram(os.urandom(8), os.urandom(8)))
        s.settimeout(1)
        replies = 0
        try:
            while True:
                s.recv(2048)
                replies += 1
        except socket.timeout:
            pass
        sent = quic_counters(self.server)["version_negotiations"] - before
        self.assertGreater(replies, 0)
        # 100 per second: the flood may straddle one second boundary, or two
        # on a slow machine; never one answer per datagram.
        self.assertLessEqual(sent, 300)
        self.assertLessEqual(replies, sent)


class ProxyProtocolWarning(unittest.TestCase):
    """The PROXY protocol is a TCP preamble: with a quic:// listener the start
    says that it applies to the TCP listeners only, and serves on."""
    WARNING = "--proxy-protocol applies to TCP listeners only"

    def test_warned_with_a_quic_listener(self):
        server = harness.Lepus(["--proxy-protocol"], protocol="h3")
        try:
            self.assertIn("lepus: warning: " + self.WARNING, server.stderr())
        finally:
            server.stop(self)

    def test_not_warned_without_one(self):
        server = harness.Lepus(["--proxy-protocol"], protocol="h1")
        try:
            self.assertNotIn(self.WARNING, server.stderr())
        finally:
            server.stop(self)

    def test_not_warned_without_proxy_protocol(self):
        server = harness.Lepus([], protocol="h3")
        try:
            self.assertNotIn(self.WARNING, server.stderr())
        finally:
            server.stop(self)


if __name__ == "__main__":
    unittest.main(verbosity=2)
