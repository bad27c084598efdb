"""QUIC picks up a new certificate when TCP does (issue 39): the certificate
files replaced, then SIGHUP (a reload) or SIGUSR2 (what the ACME thread sends
after a renewal): a new HTTP/3 connection is handed the new certificate, as a
new HTTPS one is; a certificate that does not load keeps the running one.

Needs aioquic (pip install aioquic) and openssl."""

import asyncio
import os
import shutil
import signal
import socket
import ssl
import subprocess
import unittest

import harness
import h3client

try:
    from aioquic.asyncio import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration

    class HandshakeOnly(QuicConnectionProtocol):
        """Takes no stream: the server's HTTP/3 control streams are ignored."""

        def quic_event_received(self, event):
            pass
except ImportError:
    pass


def make_certificate(directory, tag):
    """A self-signed certificate for localhost; its serial number."""
    cert = os.path.join(directory, "cert-%s.pem" % tag)
    key = os.path.join(directory, "key-%s.pem" % tag)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost " + tag, "-addext",
                    "subjectAltName=DNS:localhost"], check=True, capture_output=True)
    serial = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-serial"], check=True,
                            capture_output=True, text=True).stdout.strip().split("=")[1]
    return cert, key, int(serial, 16)


def quic_serial(port, timeout=20):
    """The serial number of the certificate a new QUIC connection is handed."""
    async def run():
        configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                          server_name="localhost", verify_mode=ssl.CERT_NONE)
        async with connect("127.0.0.1", port, configuration=configuration,
                           create_protocol=HandshakeOnly) as client:
            return client._quic.tls._peer_certificate.serial_number
    return asyncio.run(asyncio.wait_for(run(), timeout))


def tcp_serial(port):
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as s:
            der = s.getpeercert(binary_form=True)
    done = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial"], input=der,
                          capture_output=True, check=True)
    return int(done.stdout.decode().strip().split("=")[1], 16)


class QuicCertificateReload(unittest.TestCase):
    def setUp(self):
        if not h3client.AIOQUIC:
            self.skipTest(h3client.MISSING_REASON)
        harness.require_binary()
        if not harness.binary_has_quic():
            self.skipTest("this lepus has no quic:// listener")
        self.dir = harness.temp_dir(self, "h3-certs")
        self.cert = os.path.join(self.dir, "live.pem")
        self.key = os.path.join(self.dir, "live.key")
        first_cert, first_key, self.first = make_certificate(self.dir, "first")
        shutil.copy(first_cert, self.cert)
        shutil.copy(first_key, self.key)
        self.port = harness.free_tcp_and_udp_port()
        self.server = harness.Lepus(["--listen", "https://127.0.0.1:%d" % self.port,
                                     "--listen", "quic://127.0.0.1:%d" % self.port,
                                     "--tls-cert", self.cert, "--tls-key", self.key,
                                     "--threads", "2"], protocol="h1")
        self.addCleanup(self.server.stop, self)

    def renew(self):
        cert, key, serial = make_certificate(self.dir, "second")
        shutil.copy(cert, self.cert)
        shutil.copy(key, self.key)
        return serial

    def check_renewed_after(self, sig, logged):
        self.assertEqual(quic_serial(self.port), self.first)
        second = self.renew()
        self.server.proc.send_signal(sig)
        self.assertTrue(self.server.error_lines(logged), self.server.error_log_text()[-2000:])
        self.assertEqual(tcp_serial(self.port), second)
        # Every reactor's endpoint: connections from several source ports.
        for _ in range(4):
            self.assertEqual(quic_serial(self.port), second)

    def test_sighup_gives_quic_the_new_certificate(self):
        self.check_renewed_after(signal.SIGHUP, "SIGHUP: configuration reloaded")

    def test_acme_renewal_signal_gives_quic_the_new_certificate(self):
        # SIGUSR2 is what the ACME thread sends once it stored a renewed certificate.
        self.check_renewed_after(signal.SIGUSR2, "certificates read again")

    def test_a_bad_certificate_keeps_the_running_one(self):
        with open(self.cert, "w") as f:
            f.write("truncated\n")
        self.server.proc.send_signal(signal.SIGHUP)
        self.assertTrue(self.server.error_lines("keeping the running"))
        self.assertEqual(quic_serial(self.port), self.first)


if __name__ == "__main__":
    unittest.main(verbosity=2)
