"""HTTPS: lepus with an https:// listener, driven by real TLS clients.

Certificates are made at test time with the `openssl` command: a test CA, two
site names (a.test, b.test), an expired one, RSA and ECDSA keys. Clients:
Python's ssl module, curl --cacert, openssl s_client (SNI, ALPN, TLS 1.1,
resumption with -sess_out/-sess_in). The static-file behaviour (ranges,
conditional requests, large bodies, pipelining, keepalive) runs again over
TLS; CTest runs this file on both event engines.
"""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

import harness
import phpfpm

OPENSSL = shutil.which("openssl")
CURL = shutil.which("curl")


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kwargs)


class TestPki:
    """A CA and leaf certificates in a temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="lepus-tls-")
        os.makedirs(os.path.join(self.dir, "newcerts"))
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write("1000\n")
        self.config = os.path.join(self.dir, "ca.cnf")
        with open(self.config, "w") as f:
            f.write("[ca]\ndefault_ca = test_ca\n[test_ca]\ndir = %s\n"
                    "database = $dir/index.txt\nnew_certs_dir = $dir/newcerts\n"
                    "serial = $dir/serial\ndefault_md = sha256\npolicy = any\n"
                    "copy_extensions = copy\nunique_subject = no\n"
                    "[any]\ncommonName = supplied\n" % self.dir)
        self.ca_key = self.path("ca.key")
        self.ca = self.path("ca.pem")
        self.check(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-keyout", self.ca_key, "-out", self.ca, "-days", "3",
                    "-subj", "/CN=lepus test CA"])

    def path(self, name):
        return os.path.join(self.dir, name)

    def check(self, args):
        result = run([OPENSSL] + args)
        if result.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (" ".join(args), result.stderr))
        return result

    def leaf(self, name, kind="ec", expired=False, tag=""):
        """Returns (cert, key) for `name`, signed by the CA."""
        stem = self.path("%s-%s%s%s" % (name, kind, "-expired" if expired else "", tag))
        key_args = ["-newkey", "rsa:2048"] if kind == "rsa" else [
            "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
        self.check(["req", "-new", "-nodes"] + key_args + [
            "-keyout", stem + ".key", "-out", stem + ".csr", "-subj", "/CN=" + name,
            "-addext", "subjectAltName=DNS:" + name])
        dates = ["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"] if expired \
            else ["-days", "2"]
        self.check(["ca", "-batch", "-notext", "-config", self.config, "-cert", self.ca,
                    "-keyfile", self.ca_key, "-in", stem + ".csr", "-out", stem + ".pem"] + dates)
        return stem + ".pem", stem + ".key"

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def start_tls_server(args, listen_tls="https://127.0.0.1:0"):
    """lepus with a plain listener (what the harness reads) and a TLS one."""
    server = harness.Lepus(["--listen", listen_tls] + list(args))
    line = server.proc.stdout.readline()
    match = re.search(r"https://127\.0\.0\.1:(\d+)/", line)
    if not match:
        server.stop()
        raise RuntimeError("no TLS listener in %r" % line)
    server.tls_port = int(match.group(1))
    return server


def s_client(port, *args, stdin="", timeout=20):
    return subprocess.run([OPENSSL, "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                          input=stdin, capture_output=True, text=True, timeout=timeout)


def status_tls(server):
    r = server.get("/_lepus/status")
    totals = {}
    for reactor in json.loads(r.body)["reactors"]:
        for key, value in reactor["tls"].items():
            totals[key] = totals.get(key, 0) + value
    return totals


def log_has(server, text, timeout=10):
    """Whether `text` reaches the error log (written by an async logger) in time."""
    deadline = time.monotonic() + timeout
    while text not in server.error_log_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def require_tools():
    if not harness.BINARY:
        raise unittest.SkipTest("LEPUS_BINARY is not set")
    if not OPENSSL:
        raise unittest.SkipTest("the openssl command is not installed")


class TlsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_tools()
        cls.pki = TestPki()
        cls.a_ec = cls.pki.leaf("a.test", "ec")
        cls.a_rsa = cls.pki.leaf("a.test", "rsa")
        cls.b_ec = cls.pki.leaf("b.test", "ec")
        cls.default = cls.pki.leaf("default.test", "ec")
        cls.expired = cls.pki.leaf("old.test", "ec", expired=True)
        tmp = tempfile.mkdtemp(prefix="lepus-tls-sites-", dir=cls.pki.dir)
        roots = {}
        for name in ("a", "b", "old", "default"):
            roots[name] = os.path.join(tmp, name)
            os.makedirs(roots[name])
            with open(os.path.join(roots[name], "who.txt"), "w") as f:
                f.write("site %s\n" % name)
        cls.big = os.urandom(10 << 20)
        with open(os.path.join(roots["default"], "big.bin"), "wb") as f:
            f.write(cls.big)
        cls.medium = os.urandom(100 << 10)
        with open(os.path.join(roots["default"], "medium.bin"), "wb") as f:
            f.write(cls.medium)
        cls.config = os.path.join(tmp, "lepus.toml")
        with open(cls.config, "w") as f:
            f.write('status_path = "/_lepus/status"\nheader_timeout = "1s"\n\n'
                    '[[site]]\nserver_names = ["default.test"]\nroot = "%s"\ndefault = true\n\n'
                    '[[site]]\nserver_names = ["a.test"]\nroot = "%s"\n'
                    'tls = [{ cert = "%s", key = "%s" }, { cert = "%s", key = "%s" }]\n\n'
                    '[[site]]\nserver_names = ["b.test"]\nroot = "%s"\n'
                    'tls = { cert = "%s", key = "%s" }\n\n'
                    '[[site]]\nserver_names = ["old.test"]\nroot = "%s"\n'
                    'tls = { cert = "%s", key = "%s" }\n'
                    % (roots["default"], roots["a"], cls.a_ec[0], cls.a_ec[1], cls.a_rsa[0],
                       cls.a_rsa[1], roots["b"], cls.b_ec[0], cls.b_ec[1], roots["old"],
                       cls.expired[0], cls.expired[1]))
        cls.server = start_tls_server(["--config", cls.config, "--tls-cert", cls.default[0],
                                       "--tls-key", cls.default[1]])
        cls.context = ssl.create_default_context(cafile=cls.pki.ca)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())
        cls.pki.cleanup()

    # --- helpers -------------------------------------------------------------
    def tls_connect(self, name="default.test", context=None):
        raw = socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=20)
        return (context or self.context).wrap_socket(raw, server_hostname=name)

    def tls_get(self, path, name="default.test", headers=()):
        with self.tls_connect(name) as s:
            lines = ["GET %s HTTP/1.1" % path, "Host: " + name, "Connection: close"]
            s.sendall(("\r\n".join(lines + list(headers)) + "\r\n\r\n").encode())
            return harness.read_response(s)

    def subject_of(self, *args):
        out = s_client(self.server.tls_port, *args).stdout
        match = re.search(r"subject=.*CN\s*=\s*([\w.]+)", out)
        return match.group(1) if match else out

    # --- certificates and handshakes ------------------------------------------
    def test_python_ssl_gets_a_file_with_the_site_certificate(self):
        r = self.tls_get("/who.txt", "a.test")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"site a\n")

    def test_sni_picks_the_certificate_of_each_site(self):
        self.assertEqual(self.subject_of("-servername", "a.test"), "a.test")
        self.assertEqual(self.subject_of("-servername", "b.test"), "b.test")
        self.assertEqual(self.subject_of("-servername", "unknown.test"), "default.test")
        self.assertEqual(self.subject_of("-noservername"), "default.test")

    def test_curl_verifies_against_the_test_ca(self):
        if not CURL:
            self.skipTest("curl is not installed")
        result = run([CURL, "-sS", "--cacert", self.pki.ca, "--resolve",
                      "b.test:%d:127.0.0.1" % self.server.tls_port,
                      "https://b.test:%d/who.txt" % self.server.tls_port])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "site b\n")

    def test_an_expired_certificate_is_served_and_refused_by_clients(self):
        if not CURL:
            self.skipTest("curl is not installed")
        url = "https://old.test:%d/who.txt" % self.server.tls_port
        resolve = ["--resolve", "old.test:%d:127.0.0.1" % self.server.tls_port]
        refused = run([CURL, "-sS", "--cacert", self.pki.ca] + resolve + [url])
        self.assertEqual(refused.returncode, 60, refused.stderr)  # CURLE_PEER_FAILED_VERIFICATION
        self.assertIn("expired", refused.stderr)
        accepted = run([CURL, "-sS", "-k"] + resolve + [url])
        self.assertEqual(accepted.stdout, "site old\n")

    def test_rsa_and_ecdsa_certificates_of_one_site(self):
        rsa = s_client(self.server.tls_port, "-servername", "a.test", "-tls1_2", "-cipher",
                       "ECDHE-RSA-AES128-GCM-SHA256").stdout
        ecdsa = s_client(self.server.tls_port, "-servername", "a.test", "-tls1_2", "-cipher",
                         "ECDHE-ECDSA-AES128-GCM-SHA256").stdout
        self.assertIn("Server public key is 2048 bit", rsa)
        self.assertIn("Server public key is 256 bit", ecdsa)

    def test_server_cipher_order_for_1_2_client_order_for_1_3(self):
        out12 = s_client(self.server.tls_port, "-tls1_2", "-cipher",
                         "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256").stdout
        self.assertRegex(out12, r"Cipher\s*: ECDHE-ECDSA-AES128-GCM-SHA256")
        # OpenSSL's own 1.3 order puts ChaCha20 before AES-128: the client's wins.
        out13 = s_client(self.server.tls_port, "-tls1_3", "-ciphersuites",
                         "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256").stdout
        self.assertIn("Cipher is TLS_AES_128_GCM_SHA256", out13)

    def test_alpn_prefers_h2_and_offers_http_1_1(self):
        out = s_client(self.server.tls_port, "-alpn", "h2,http/1.1").stdout
        self.assertIn("ALPN protocol: h2", out)  # HTTP/2 (issue 19): test/e2e/http2_test.py
        out = s_client(self.server.tls_port, "-alpn", "http/1.1").stdout
        self.assertIn("ALPN protocol: http/1.1", out)
        with self.tls_connect(context=self.alpn_context()) as s:
            self.assertEqual(s.selected_alpn_protocol(), "http/1.1")

    def alpn_context(self):
        context = ssl.create_default_context(cafile=self.pki.ca)
        context.set_alpn_protocols(["http/1.1"])
        return context

    def test_tls_1_3_and_1_2_work_and_1_1_is_refused(self):
        out13 = s_client(self.server.tls_port, "-tls1_3").stdout
        self.assertIn("TLSv1.3", out13)
        out12 = s_client(self.server.tls_port, "-tls1_2").stdout
        self.assertRegex(out12, r"Protocol\s*: TLSv1.2")
        self.assertRegex(out12, r"Cipher\s*: ECDHE-")
        before = status_tls(self.server)["handshake_failures"]
        old = s_client(self.server.tls_port, "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        self.assertNotEqual(old.returncode, 0)
        self.assertIn("Cipher is (NONE)", old.stdout)
        self.assertGreater(status_tls(self.server)["handshake_failures"], before)

    def test_session_resumption_with_tickets(self):
        request = "GET /who.txt HTTP/1.1\r\nHost: default.test\r\nConnection: close\r\n\r\n"
        for version in ("-tls1_3", "-tls1_2"):
            session = os.path.join(self.pki.dir, "session%s.pem" % version)
            first = s_client(self.server.tls_port, version, "-sess_out", session, "-ign_eof",
                             stdin=request)
            self.assertIn("site default", first.stdout)
            self.assertTrue(os.path.exists(session), first.stdout)
            second = s_client(self.server.tls_port, version, "-sess_in", session, "-ign_eof",
                              stdin=request)
            self.assertIn("Reused,", second.stdout, version)
            self.assertIn("site default", second.stdout)
        self.assertGreater(status_tls(self.server)["resumed"], 0)

    # --- bad input -------------------------------------------------------------
    def test_plain_http_on_the_tls_port_gets_400(self):
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10) as s:
            s.sendall(b"GET /who.txt HTTP/1.1\r\nHost: default.test\r\n\r\n")
            r = harness.read_response(s)
            self.assertEqual(r.status, 400)
            self.assertEqual(r.body, b"The plain HTTP request was sent to HTTPS port\n")
            self.assertTrue(harness.is_closed(s))

    def test_garbage_gets_an_alert_and_close(self):
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10) as s:
            s.sendall(b"\x16\x03\x01\x00\x05hello" + os.urandom(64))
            data = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except ConnectionResetError:
                pass
            self.assertTrue(data.startswith(b"\x15\x03"), data)  # an alert record

    def test_a_stalled_handshake_is_closed_at_the_header_timeout(self):
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10) as s:
            self.assertTrue(harness.is_closed(s, timeout=8))
        with socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10) as s:
            s.sendall(b"\x16\x03\x01\x02\x00\x01")  # the first bytes of a ClientHello
            self.assertTrue(harness.is_closed(s, timeout=8))

    # --- static files over TLS -------------------------------------------------
    def test_large_bodies(self):
        r = self.tls_get("/medium.bin")
        self.assertEqual(r.body, self.medium)
        r = self.tls_get("/big.bin")
        self.assertEqual(len(r.body), len(self.big))
        self.assertEqual(r.body, self.big)

    def test_ktls_follows_the_kernel_and_can_be_turned_off(self):
        # lepus asked the kernel for its tls module at start-up (which loads it
        # where it exists): the log says kTLS is on exactly when the kernel
        # lists it now. Files arrive whole either way, and with --ktls off.
        with open("/proc/sys/net/ipv4/tcp_available_ulp") as f:
            kernel_has_tls = "tls" in f.read().split()
        expected = "TLS: kTLS on" if kernel_has_tls else "TLS: kTLS off: this kernel has no tls module"
        self.assertTrue(log_has(self.server, expected), self.server.error_log_text())
        server = start_tls_server(["--config", self.config, "--tls-cert", self.default[0],
                                   "--tls-key", self.default[1], "--ktls", "off"])
        try:
            raw = socket.create_connection(("127.0.0.1", server.tls_port), timeout=20)
            with self.context.wrap_socket(raw, server_hostname="default.test") as s:
                s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: default.test\r\n"
                          b"Connection: close\r\n\r\n")
                r = harness.read_response(s)
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, self.big)
            self.assertTrue(log_has(server, "TLS: kTLS off (--ktls off)"), server.error_log_text())
        finally:
            server.stop(harness.LepusTestCase._Checker())

    def test_a_slow_reader_gets_the_whole_body_and_close_notify(self):
        # A client with a small window that stops reading near the end: lepus's
        # last writes leave part of the body queued unsent (--notsent-lowat
        # lets 32 KiB wait), and the close_notify after them must still go
        # out, not be refused and dropped. Without it this client sees a
        # truncated stream (ragged EOFs are not suppressed here).
        for path, body in (("/medium.bin", self.medium), ("/big.bin", self.big)):
            for stall_kib in (16, 48, 96):
                with self.subTest(path=path, stall_kib=stall_kib):
                    raw = socket.socket()
                    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
                    raw.settimeout(20)
                    raw.connect(("127.0.0.1", self.server.tls_port))
                    with self.context.wrap_socket(raw, server_hostname="default.test",
                                                  suppress_ragged_eofs=False) as s:
                        s.sendall(b"GET %s HTTP/1.1\r\nHost: default.test\r\n"
                                  b"Connection: close\r\n\r\n" % path.encode())
                        received = bytearray()
                        stalled = False
                        while True:
                            chunk = s.recv(16384)  # SSLEOFError without close_notify
                            if not chunk:
                                break
                            received += chunk
                            if not stalled and len(received) >= len(body) - stall_kib * 1024:
                                stalled = True
                                time.sleep(0.2)  # lepus fills the window and waits
                    head, _, rest = bytes(received).partition(b"\r\n\r\n")
                    self.assertIn(b"200 OK", head)
                    self.assertEqual(rest, body)

    def test_ranges_and_conditional_requests(self):
        r = self.tls_get("/big.bin", headers=["Range: bytes=100-199"])
        self.assertEqual(r.status, 206)
        self.assertEqual(r.body, self.big[100:200])
        r = self.tls_get("/big.bin", headers=["Range: bytes=-70000"])
        self.assertEqual(r.body, self.big[-70000:])
        r = self.tls_get("/who.txt")
        etag = r.header("etag")
        r = self.tls_get("/who.txt", headers=["If-None-Match: " + etag])
        self.assertEqual(r.status, 304)

    def test_keepalive_and_pipelining(self):
        with self.tls_connect() as s:
            for _ in range(3):
                s.sendall(b"GET /who.txt HTTP/1.1\r\nHost: default.test\r\n\r\n")
                r = harness.read_response(s)
                self.assertEqual(r.body, b"site default\n")
                self.assertNotEqual(r.header("connection"), "close")
            s.sendall(b"GET /who.txt HTTP/1.1\r\nHost: default.test\r\n\r\n" * 20 +
                      b"GET /medium.bin HTTP/1.1\r\nHost: default.test\r\n\r\n")
            leftover = b""
            for _ in range(20):
                r = harness.read_response(s, buffer=leftover)
                leftover = r.leftover
                self.assertEqual(r.body, b"site default\n")
            r = harness.read_response(s, buffer=leftover)
            self.assertEqual(r.body, self.medium)

    def test_plain_listener_still_plain(self):
        r = self.server.get("/who.txt")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"site default\n")

    def test_status_page_counts_tls(self):
        self.tls_get("/who.txt")
        totals = status_tls(self.server)
        self.assertGreater(totals["connections"], 0)
        self.assertGreater(totals["handshakes"], 0)
        text = self.server.get("/_lepus/status?format=prometheus").body.decode()
        self.assertRegex(text, r'lepus_tls_handshakes_total\{reactor="0"\} \d+')
        self.assertIn("lepus_tls_handshake_failures_total", text)


class TlsStartupTests(unittest.TestCase):
    """Bad certificates and keys: one line on stderr, exit 2 (1 with -t)."""

    @classmethod
    def setUpClass(cls):
        require_tools()
        cls.pki = TestPki()
        cls.a = cls.pki.leaf("a.test", "ec")
        cls.b = cls.pki.leaf("b.test", "rsa")
        cls.root = cls.pki.path("www")
        os.makedirs(cls.root)
        cls.garbage = cls.pki.path("garbage.pem")
        with open(cls.garbage, "w") as f:
            f.write("not a certificate\n")

    @classmethod
    def tearDownClass(cls):
        cls.pki.cleanup()

    def lepus(self, *args):
        return run([harness.BINARY, self.root, "--listen", "https://127.0.0.1:0"] + list(args))

    def assert_one_line(self, result, code, *words):
        self.assertEqual(result.returncode, code, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        for word in words:
            self.assertIn(word, lines[0])

    def test_missing_certificate(self):
        missing = self.pki.path("missing.pem")
        self.assert_one_line(self.lepus("--tls-cert", missing, "--tls-key", self.a[1]), 2,
                             missing, "No such file")

    def test_no_certificate_for_a_tls_listener(self):
        self.assert_one_line(self.lepus(), 2, "--tls-cert")

    def test_not_a_certificate(self):
        self.assert_one_line(self.lepus("--tls-cert", self.garbage, "--tls-key", self.a[1]), 2,
                             self.garbage)

    def test_mismatched_key(self):
        self.assert_one_line(self.lepus("--tls-cert", self.a[0], "--tls-key", self.b[1]), 2,
                             self.b[1], self.a[0], "does not match")

    def test_check_config_loads_every_site_certificate(self):
        config = self.pki.path("check.toml")
        with open(config, "w") as f:
            f.write('listen = ["https://127.0.0.1:0"]\n[[site]]\nserver_names = ["a.test"]\n'
                    'root = "%s"\ntls = { cert = "%s", key = "%s" }\n'
                    '[[site]]\nserver_names = ["b.test"]\nroot = "%s"\n'
                    'tls = { cert = "%s", key = "%s" }\n'
                    % (self.root, self.a[0], self.a[1], self.root, self.b[0], self.a[1]))
        result = run([harness.BINARY, "-t", "--config", config])
        self.assert_one_line(result, 1, "does not match", self.b[0])
        with open(config, "w") as f:
            f.write('listen = ["https://127.0.0.1:0"]\n[[site]]\nserver_names = ["a.test"]\n'
                    'root = "%s"\ntls = { cert = "%s", key = "%s" }\n'
                    % (self.root, self.a[0], self.a[1]))
        result = run([harness.BINARY, "-t", "--config", config])
        self.assertEqual((result.returncode, result.stdout), (0, "ok\n"), result.stderr)


class TlsReloadTests(unittest.TestCase):
    """SIGHUP re-reads the certificate: new connections get the renewed one."""

    def setUp(self):
        require_tools()
        self.pki = TestPki()
        self.cert, self.key = self.pki.path("live.pem"), self.pki.path("live.key")
        first = self.pki.leaf("a.test", "ec", tag="-1")
        shutil.copy(first[0], self.cert)
        shutil.copy(first[1], self.key)
        self.server = start_tls_server(["--tls-cert", self.cert, "--tls-key", self.key])
        self.server.write("who.txt", "hello\n")
        self.context = ssl.create_default_context(cafile=self.pki.ca)

    def tearDown(self):
        self.server.stop(harness.LepusTestCase._Checker())
        self.pki.cleanup()

    def serial(self):
        raw = socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10)
        with self.context.wrap_socket(raw, server_hostname="a.test") as s:
            return s.getpeercert()["serialNumber"]

    def wait_for_log(self, text, timeout=10):
        return log_has(self.server, text, timeout)

    def test_renewed_certificate_is_used_after_sighup(self):
        old_serial = self.serial()
        raw = socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=10)
        held = self.context.wrap_socket(raw, server_hostname="a.test")
        renewed = self.pki.leaf("a.test", "ec", tag="-2")
        shutil.copy(renewed[0], self.cert)
        shutil.copy(renewed[1], self.key)
        self.server.proc.send_signal(signal.SIGHUP)
        self.assertTrue(self.wait_for_log("SIGHUP: configuration reloaded"))
        self.assertNotEqual(self.serial(), old_serial)
        # The connection made before the reload goes on with its session.
        held.sendall(b"GET /who.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
        self.assertEqual(harness.read_response(held).body, b"hello\n")
        held.close()

    def test_a_bad_certificate_refuses_the_reload(self):
        old_serial = self.serial()
        with open(self.cert, "w") as f:
            f.write("truncated\n")
        self.server.proc.send_signal(signal.SIGHUP)
        self.assertTrue(self.wait_for_log("keeping the running"))
        # The line that says why names the file (stderr, where lepus -t prints it too).
        self.assertIn(self.cert, self.server.stderr())
        self.assertEqual(self.serial(), old_serial)


class TlsListenerTests(unittest.TestCase):
    """TLS on a reactor's own listeners (--accept reuseport), and an https://
    listener added by a reload."""

    @classmethod
    def setUpClass(cls):
        require_tools()
        cls.pki = TestPki()
        cls.cert, cls.key = cls.pki.leaf("a.test", "ec")
        cls.context = ssl.create_default_context(cafile=cls.pki.ca)

    @classmethod
    def tearDownClass(cls):
        cls.pki.cleanup()

    def fetch(self, port):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        with self.context.wrap_socket(raw, server_hostname="a.test") as s:
            s.sendall(b"GET /who.txt HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            return harness.read_response(s).body

    def test_reuseport_listeners_speak_tls(self):
        server = start_tls_server(["--accept", "reuseport", "--threads", "2", "--tls-cert",
                                   self.cert, "--tls-key", self.key])
        try:
            server.write("who.txt", "reuseport\n")
            for _ in range(4):
                self.assertEqual(self.fetch(server.tls_port), b"reuseport\n")
            self.assertEqual(server.get("/who.txt").body, b"reuseport\n")
        finally:
            server.stop(self)

    def test_reload_adds_an_https_listener(self):
        plain, port = phpfpm.free_port(), phpfpm.free_port()
        config = self.pki.path("reload.toml")
        keys = 'tls_cert = ["%s"]\ntls_key = ["%s"]\n' % (self.cert, self.key)
        with open(config, "w") as f:
            f.write(keys + 'listen = ["127.0.0.1:%d"]\n' % plain)
        server = harness.Lepus(["--config", config], listen=None)
        try:
            server.write("who.txt", "added\n")
            with open(config, "w") as f:
                f.write(keys + 'listen = ["127.0.0.1:%d", "https://127.0.0.1:%d"]\n'
                        % (plain, port))
            server.proc.send_signal(signal.SIGHUP)
            deadline = time.time() + 10
            while "listening on https://" not in server.error_log_text() and \
                    time.time() < deadline:
                time.sleep(0.05)
            self.assertEqual(self.fetch(port), b"added\n")
        finally:
            server.stop(self)


class TlsPhpTests(unittest.TestCase):
    """Scripts behind a TLS listener see HTTPS=on and the listener's port."""

    @classmethod
    def setUpClass(cls):
        require_tools()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm is not installed")
        cls.pki = TestPki()
        cert, key = cls.pki.leaf("a.test", "ec")
        cls.fpm = phpfpm.PhpFpm(children=2)
        try:
            cls.server = start_tls_server(["--fastcgi", cls.fpm.address, "--tls-cert", cert,
                                           "--tls-key", key])
        except Exception:
            cls.fpm.cleanup()
            raise
        shutil.copy(os.path.join(phpfpm.PHP_DIR, "env.php"), cls.server.root)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())
        cls.fpm.stop()
        cls.fpm.cleanup()
        cls.pki.cleanup()

    def test_https_variables(self):
        context = ssl.create_default_context(cafile=self.pki.ca)
        raw = socket.create_connection(("127.0.0.1", self.server.tls_port), timeout=20)
        with context.wrap_socket(raw, server_hostname="a.test") as s:
            s.sendall(b"GET /env.php HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            env = json.loads(harness.read_response(s).body)
        self.assertEqual(env["HTTPS"], "on")
        self.assertEqual(env["REQUEST_SCHEME"], "https")
        self.assertEqual(env["SERVER_PORT"], str(self.server.tls_port))
        self.assertIn(env["SSL_PROTOCOL"], ("TLSv1.2", "TLSv1.3"))
        self.assertTrue(env["SSL_CIPHER"], env)
        plain = json.loads(self.server.get("/env.php").body)
        self.assertNotIn("HTTPS", plain)
        self.assertNotIn("SSL_PROTOCOL", plain)
        self.assertEqual(plain["REQUEST_SCHEME"], "http")


if __name__ == "__main__":
    harness.main()
