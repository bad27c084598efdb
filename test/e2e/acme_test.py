"""Automatic HTTPS (issue 34): lepus's ACME client against Let's Encrypt's test
CA, pebble, and its DNS server pebble-challtestsrv (which answers every name
with 127.0.0.1), both started here on free ports. Pebble validates for real:
it connects to lepus's plain port for HTTP-01 and to its TLS port for
TLS-ALPN-01 (its httpPort/tlsPort), so a wrong answer fails.

Installed by scripts/install-pebble (go install); the tests are skipped, saying
so, when pebble is not installed."""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import threading
import time
import unittest
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import harness

NAME = "www.example.com"
# Orders are counted by pebble's "Added order" lines: a newOrder request that
# pebble refuses with badNonce (5% of them by default) is logged as a POST too.


def go_tool(name):
    found = shutil.which(name)
    if found:
        return found
    path = os.path.join(os.path.expanduser("~"), "go", "bin", name)
    return path if os.access(path, os.X_OK) else None


PEBBLE = go_tool("pebble")
CHALLTESTSRV = go_tool("pebble-challtestsrv")
SKIP_REASON = ("pebble and pebble-challtestsrv are not installed (scripts/install-pebble "
               "installs them with Go)")


def wait_for(predicate, what, timeout=90):
    """Polls `predicate` until it is true; a bounded wait, failing with `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class Pebble:
    """pebble + pebble-challtestsrv on free ports; `http_port` and `tls_port` are
    where pebble's validator connects for HTTP-01 and TLS-ALPN-01."""

    def __init__(self, http_port, tls_port, env=None, validity_seconds=7776000):
        self.tmp = harness.temp_dir(name="pebble")
        # The WFE's own certificate (its HTTPS directory and management port),
        # which lepus trusts with --acme-ca-root.
        self.ca = os.path.join(self.tmp, "wfe.pem")
        key = os.path.join(self.tmp, "wfe.key")
        subprocess.run([harness.OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", self.ca,
                        "-days", "2", "-subj", "/CN=pebble wfe",
                        "-addext", "basicConstraints=critical,CA:TRUE",
                        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True, timeout=60)
        self.port = harness.free_port()
        self.management_port = harness.free_port()
        dns_port = harness.free_port()
        config = {"pebble": {
            "listenAddress": "127.0.0.1:%d" % self.port,
            "managementListenAddress": "127.0.0.1:%d" % self.management_port,
            "certificate": self.ca, "privateKey": key,
            "httpPort": http_port, "tlsPort": tls_port,
            "ocspResponderURL": "", "externalAccountBindingRequired": False,
            "domainBlocklist": [], "retryAfter": {"authz": 1, "order": 1},
            "keyAlgorithm": "ecdsa",
            "profiles": {"default": {"description": "test", "validityPeriod": validity_seconds}},
        }}
        config_path = os.path.join(self.tmp, "pebble.json")
        with open(config_path, "w") as f:
            json.dump(config, f)
        self.logs = []
        self.dns = self._start([CHALLTESTSRV, "-dnsserver", "127.0.0.1:%d" % dns_port,
                                "-management", "127.0.0.1:%d" % harness.free_port(),
                                "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "",
                                "-defaultIPv6", ""], "challtestsrv", {})
        pebble_env = {"PEBBLE_VA_NOSLEEP": "1", "PEBBLE_AUTHZREUSE": "0"}
        pebble_env.update(env or {})
        self.command = ([PEBBLE, "-config", config_path, "-dnsserver", "127.0.0.1:%d" % dns_port],
                        pebble_env)
        self.process = self._start(self.command[0], "pebble", self.command[1])
        wait_for(lambda: port_open(self.port), "pebble to listen", timeout=60)
        self.directory = "https://127.0.0.1:%d/dir" % self.port

    def _start(self, command, name, env):
        log = open(os.path.join(self.tmp, name + ".log"), "a")
        self.logs.append(log)
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **env))

    def root(self):
        """Pebble's root certificate (PEM), which signs what it issues."""
        path = os.path.join(self.tmp, "root.pem")
        context = ssl.create_default_context(cafile=self.ca)
        url = "https://127.0.0.1:%d/roots/0" % self.management_port
        with urllib.request.urlopen(url, context=context, timeout=10) as response:
            with open(path, "wb") as f:
                f.write(response.read())
        return path

    def log_text(self):
        with open(os.path.join(self.tmp, "pebble.log"), errors="replace") as f:
            return f.read()

    def stop_ca(self):
        """Stops pebble alone (the CA goes down); its DNS server stays."""
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def stop(self):
        for process in (self.process, self.dns):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in self.logs:
            log.close()
        harness.remove_temp_dir(self.tmp)


class AcmeLepus:
    """lepus with ACME, on the listeners given (harness.Lepus wants a plain
    one; the TLS-ALPN-01 test has none)."""

    def __init__(self, pebble, listen, state_dir, root, args=()):
        self.tmp = harness.temp_dir(name="acme-lepus")
        self.error_log = os.path.join(self.tmp, "error.log")
        command = [harness.BINARY, root, "--access-log", "off", "--error-log", self.error_log,
                   "--log-level", "info", "--acme-ca", pebble.directory,
                   "--acme-ca-root", pebble.ca, "--state-dir", state_dir]
        for text in listen:
            command += ["--listen", text]
        command += list(args)
        self.stderr_path = os.path.join(self.tmp, "stderr.txt")
        self.stderr_file = open(self.stderr_path, "w")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self.stderr_file,
                                        text=True)
        line = self.process.stdout.readline()
        if "serving" not in line:
            self.process.wait(timeout=10)
            raise RuntimeError("lepus did not start: %r %s" % (line, self.text()))

    def text(self):
        parts = []
        for path in (self.stderr_path, self.error_log):
            try:
                with open(path, errors="replace") as f:
                    parts.append(f.read())
            except FileNotFoundError:
                pass
        return "\n".join(parts)

    def stop(self, test):
        self.process.terminate()
        try:
            code = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            test.fail("lepus did not stop within 30 s")
        self.process.stdout.close()
        self.stderr_file.close()
        text = self.text()
        for marker in harness.SANITIZER_MARKERS:
            test.assertNotIn(marker, text, "sanitizer report:\n" + text[-4000:])
        test.assertEqual(code, 0, text[-2000:])
        harness.remove_temp_dir(self.tmp)


def https_get(port, root_pem, path="/index.html", name=NAME):
    """curl over HTTPS to `name` (resolved to 127.0.0.1), trusting only pebble's
    root: (exit code, body, stderr)."""
    done = subprocess.run([harness.CURL, "-s", "-S", "--max-time", "10", "--cacert", root_pem,
                           "--resolve", "%s:%d:127.0.0.1" % (name, port),
                           "https://%s:%d%s" % (name, port, path)],
                          capture_output=True, timeout=30)
    return done.returncode, done.stdout, done.stderr.decode(errors="replace")


def plain_get(port, path, name=NAME):
    """A plain HTTP/1.1 GET to `name` on 127.0.0.1: (status, lowercased headers)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers={"Host": name})
        response = connection.getresponse()
        response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def served_serial(port, name=NAME):
    """The serial number of the certificate lepus shows for `name`."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=name) as tls:
            der = tls.getpeercert(binary_form=True)
    done = subprocess.run([harness.OPENSSL, "x509", "-inform", "DER", "-noout", "-serial"],
                          input=der, capture_output=True, timeout=30, check=True)
    return done.stdout.decode().strip()


@unittest.skipUnless(PEBBLE and CHALLTESTSRV, SKIP_REASON)
class AcmeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.temp_dir(self, name="acme")
        self.state = os.path.join(self.tmp, "state")
        self.root = os.path.join(self.tmp, "www")
        os.makedirs(self.root)
        with open(os.path.join(self.root, "index.html"), "w") as f:
            f.write("hello over acme\n")
        self.plain_port = harness.free_port()
        self.tls_port = harness.free_port()
        self.closed_port = harness.free_port()  # nobody listens there
        self.pebble = None
        self.servers = []

    def tearDown(self):
        for server in self.servers:
            if server.process.poll() is None:
                server.stop(self)
        if self.pebble:
            self.pebble.stop()

    def start_pebble(self, http_port, tls_port, **kwargs):
        self.pebble = Pebble(http_port, tls_port, **kwargs)
        return self.pebble

    def start_lepus(self, listen, args=()):
        server = AcmeLepus(self.pebble, listen, self.state, self.root,
                           ["--domain", NAME] + list(args))
        self.servers.append(server)
        return server

    def chain_path(self):
        return os.path.join(self.state, "certificates", NAME, "fullchain.pem")

    def wait_until_served(self, server):
        wait_for(lambda: "certificates read again" in server.text() or
                 "ACME: %s:" % NAME in server.text() and "attempt" in server.text(),
                 "the certificate to be issued (or an error)")
        self.assertIn("certificates read again", server.text(), server.text()[-3000:])

    def assert_https_works(self, port):
        code, body, error = https_get(port, self.pebble.root())
        self.assertEqual(code, 0, error)
        self.assertEqual(body, b"hello over acme\n")

    def test_http01_issues_a_certificate_served_over_https(self):
        # Pebble's TLS-ALPN-01 port is closed: only HTTP-01 can succeed.
        self.start_pebble(self.plain_port, self.closed_port)
        server = self.start_lepus(["127.0.0.1:%d" % self.plain_port,
                                   "https://127.0.0.1:%d" % self.tls_port])
        self.wait_until_served(server)
        self.assertIn("validate w/ HTTP:", self.pebble.log_text())
        self.assertIn("ACME: %s validated by http-01" % NAME, server.text())
        self.assert_https_works(self.tls_port)
        # --domain's names are sent to HTTPS (the challenge above was not);
        # another name (an IP address) has no certificate and stays plain.
        status, headers = plain_get(self.plain_port, "/index.html")
        self.assertEqual(status, 301)
        self.assertEqual(headers.get("location"),
                         "https://%s:%d/index.html" % (NAME, self.tls_port))
        status, _ = plain_get(self.plain_port, "/index.html", name="127.0.0.1")
        self.assertEqual(status, 200)
        # The files are the service user's alone.
        self.assertEqual(stat.S_IMODE(os.stat(self.state).st_mode), 0o700)
        folder = os.path.dirname(self.chain_path())
        self.assertEqual(stat.S_IMODE(os.stat(folder).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(folder, "privkey.pem")).st_mode),
                         0o600)
        self.assertEqual(stat.S_IMODE(os.stat(self.chain_path()).st_mode), 0o600)

    def test_tls_alpn01_issues_with_no_plain_listener(self):
        # Pebble's HTTP-01 port is closed and lepus has no plain listener.
        self.start_pebble(self.closed_port, self.tls_port)
        server = self.start_lepus(["https://127.0.0.1:%d" % self.tls_port])
        self.wait_until_served(server)
        self.assertIn("ACME: %s validated by tls-alpn-01" % NAME, server.text())
        self.assert_https_works(self.tls_port)

    def test_restart_reuses_the_stored_certificate(self):
        self.start_pebble(self.plain_port, self.closed_port)
        listen = ["127.0.0.1:%d" % self.plain_port, "https://127.0.0.1:%d" % self.tls_port]
        server = self.start_lepus(listen)
        self.wait_until_served(server)
        serial = served_serial(self.tls_port)
        server.stop(self)
        orders = self.pebble.log_text().count("Added order")
        self.assertGreater(orders, 0)
        again = self.start_lepus(listen)
        # Served at once from the state folder, before any ACME exchange.
        self.assertEqual(served_serial(self.tls_port), serial)
        self.assert_https_works(self.tls_port)
        self.assertNotIn("ordering a certificate", again.text())
        self.assertEqual(self.pebble.log_text().count("Added order"), orders)

    def test_a_wrong_answer_fails_and_the_name_gets_an_alert(self):
        # Pebble's validator meets a server that answers every token wrongly.
        class Wrong(BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"not-the-key-authorization"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        impostor = HTTPServer(("127.0.0.1", self.closed_port), Wrong)
        thread = threading.Thread(target=impostor.serve_forever, daemon=True)
        thread.start()
        try:
            self.start_pebble(self.closed_port, harness.free_port())
            server = self.start_lepus(["127.0.0.1:%d" % self.plain_port,
                                       "https://127.0.0.1:%d" % self.tls_port],
                                      ["--acme-retry", "1s"])
            # One error line per attempt, with the CA's problem document; retried.
            wait_for(lambda: "attempt 2," in server.text(), "a second attempt")
            errors = [line for line in server.text().splitlines()
                      if "ACME: %s: validation of %s (http-01)" % (NAME, NAME) in line]
            self.assertGreaterEqual(len(errors), 2, server.text()[-3000:])
            self.assertIn("urn:ietf:params:acme:error:unauthorized", errors[0])
            self.assertIn("no certificate yet", errors[0])
            self.assertFalse(os.path.exists(self.chain_path()))
            # No certificate for the name: its handshake is refused with an
            # alert, not answered with some other certificate.
            code, _, error = https_get(self.tls_port, self.pebble.root())
            self.assertNotEqual(code, 0)
            self.assertIn("unrecognized name", error.lower())  # RFC 6066 §3's alert
        finally:
            impostor.shutdown()
            impostor.server_close()

    def test_issues_when_pebble_rejects_half_the_nonces(self):
        self.start_pebble(self.plain_port, self.closed_port,
                          env={"PEBBLE_WFE_NONCEREJECT": "50"})
        server = self.start_lepus(["127.0.0.1:%d" % self.plain_port,
                                   "https://127.0.0.1:%d" % self.tls_port])
        self.wait_until_served(server)
        self.assert_https_works(self.tls_port)

    def test_ca_down_at_renewal_keeps_the_site_serving(self):
        # A 30 s certificate is renewed 20 s in (a third left); pebble is gone by then.
        self.start_pebble(self.plain_port, self.closed_port, validity_seconds=30)
        server = self.start_lepus(["127.0.0.1:%d" % self.plain_port,
                                   "https://127.0.0.1:%d" % self.tls_port],
                                  ["--acme-retry", "1s"])
        self.wait_until_served(server)
        root = self.pebble.root()
        self.pebble.stop_ca()
        wait_for(lambda: "attempt 2," in server.text(), "two failed renewal attempts", 60)
        failures = [line for line in server.text().splitlines() if "attempt " in line]
        self.assertIn("the current certificate keeps serving", failures[0])
        self.assertIn("directory https://127.0.0.1:%d/dir" % self.pebble.port, failures[0])
        code, body, error = https_get(self.tls_port, root)
        self.assertEqual(code, 0, error)
        self.assertEqual(body, b"hello over acme\n")

    def test_renewal_is_swapped_in_while_a_download_runs(self):
        # A 30 s certificate is renewed 20 s in: new connections get the new
        # one, a download started on the old one completes.
        size = 32 * 1024 * 1024
        with open(os.path.join(self.root, "big.bin"), "wb") as f:
            f.write(os.urandom(1024) * (size // 1024))
        self.start_pebble(self.plain_port, self.closed_port, validity_seconds=30)
        server = self.start_lepus(["127.0.0.1:%d" % self.plain_port,
                                   "https://127.0.0.1:%d" % self.tls_port])
        self.wait_until_served(server)
        first_serial = served_serial(self.tls_port)
        context = ssl.create_default_context(cafile=self.pebble.root())
        raw = socket.create_connection(("127.0.0.1", self.tls_port), timeout=30)
        with context.wrap_socket(raw, server_hostname=NAME) as download:
            download.sendall(b"GET /big.bin HTTP/1.1\r\nHost: " + NAME.encode() +
                             b"\r\nConnection: close\r\n\r\n")
            received = download.recv(65536)
            # Read a trickle until new connections see the renewed certificate.
            deadline = time.monotonic() + 90
            while served_serial(self.tls_port) == first_serial:
                self.assertLess(time.monotonic(), deadline, "no renewal within 90 s")
                received += download.recv(1024)
                time.sleep(0.2)
            while True:
                chunk = download.recv(1 << 20)
                if not chunk:
                    break
                received += chunk
            old_serial = subprocess.run(
                [harness.OPENSSL, "x509", "-inform", "DER", "-noout", "-serial"],
                input=download.getpeercert(binary_form=True), capture_output=True,
                check=True).stdout.decode().strip()
        head, _, body = received.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:200])
        self.assertEqual(len(body), size)
        self.assertEqual(old_serial, first_serial)  # the download kept its certificate
        self.assert_https_works(self.tls_port)

    def test_site_table_with_tls_acme(self):
        config = os.path.join(self.tmp, "lepus.toml")
        with open(config, "w") as f:
            f.write('[[site]]\nserver_names = ["%s"]\nroot = "%s"\ntls = "acme"\n'
                    % (NAME, self.root))
        self.start_pebble(self.plain_port, self.closed_port)
        server = AcmeLepus(self.pebble, ["127.0.0.1:%d" % self.plain_port,
                                         "https://127.0.0.1:%d" % self.tls_port],
                           self.state, self.root, ["--config", config])
        self.servers.append(server)
        # Issued by HTTP-01 alone (pebble's TLS-ALPN-01 port is closed): the
        # challenge path is answered over plain HTTP despite the redirect.
        self.wait_until_served(server)
        self.assertIn("ACME: %s validated by http-01" % NAME, server.text())
        self.assert_https_works(self.tls_port)
        # An ACME site redirects plain HTTP to its TLS listener by default.
        status, headers = plain_get(self.plain_port, "/index.html?a=1")
        self.assertEqual(status, 301)
        self.assertEqual(headers.get("location"),
                         "https://%s:%d/index.html?a=1" % (NAME, self.tls_port))

    def test_an_acme_site_with_https_redirect_false_serves_plain_http(self):
        config = os.path.join(self.tmp, "lepus.toml")
        with open(config, "w") as f:
            f.write('[[site]]\nserver_names = ["%s"]\nroot = "%s"\ntls = "acme"\n'
                    'https_redirect = false\n' % (NAME, self.root))
        self.start_pebble(self.plain_port, self.closed_port)
        server = AcmeLepus(self.pebble, ["127.0.0.1:%d" % self.plain_port,
                                         "https://127.0.0.1:%d" % self.tls_port],
                           self.state, self.root, ["--config", config])
        self.servers.append(server)
        self.wait_until_served(server)
        status, _ = plain_get(self.plain_port, "/index.html")
        self.assertEqual(status, 200)

    def test_domain_alone_listens_on_80_and_443(self):
        # `lepus --domain NAME ROOT`, no --listen: port 80 and https://443.
        if os.geteuid() != 0:
            self.skipTest("binding ports 80 and 443 needs root")
        if port_open(80) or port_open(443):
            self.skipTest("ports 80 or 443 are taken on this host")
        self.start_pebble(80, 443)
        server = AcmeLepus(self.pebble, [], self.state, self.root, ["--domain", NAME])
        self.servers.append(server)
        self.wait_until_served(server)
        self.assert_https_works(443)
        status, headers = plain_get(80, "/index.html")
        self.assertEqual(status, 301)
        self.assertEqual(headers.get("location"), "https://%s/index.html" % NAME)

    def test_two_instances_on_one_state_folder_order_once(self):
        # The validator reaches the first instance only, whichever of the two
        # orders: the HTTP-01 answer is shared through the state folder.
        self.start_pebble(self.plain_port, self.closed_port)
        other_tls_port = harness.free_port()
        first = self.start_lepus(["127.0.0.1:%d" % self.plain_port,
                                  "https://127.0.0.1:%d" % self.tls_port])
        second = self.start_lepus(["127.0.0.1:%d" % harness.free_port(),
                                   "https://127.0.0.1:%d" % other_tls_port])
        # Whichever orders, the other waits on the lock and then finds the
        # certificate (or, started late, serves it from the start).
        wait_for(lambda: "certificate issued" in first.text() + second.text(), "the issuance")

        def same_serial():
            try:
                return served_serial(self.tls_port) == served_serial(other_tls_port)
            except (OSError, ssl.SSLError):  # the other one's handshake: not yet
                return False

        wait_for(same_serial, "both instances to serve the certificate")
        texts = first.text() + second.text()
        self.assertEqual(self.pebble.log_text().count("Added order"), 1, texts[-4000:])
        self.assertEqual(texts.count("certificate issued"), 1, texts[-3000:])
        self.assert_https_works(self.tls_port)
        self.assert_https_works(other_tls_port)

    def test_an_instance_answers_the_challenge_of_another(self):
        # The validator reaches only `front`, which manages another name;
        # `orderer` orders NAME and its HTTP-01 answer is given by `front`
        # from the shared state folder.
        self.start_pebble(self.plain_port, self.closed_port)
        front = AcmeLepus(self.pebble, ["127.0.0.1:%d" % self.plain_port], self.state, self.root,
                          ["--domain", "front.example.com"])
        self.servers.append(front)
        orderer = self.start_lepus(["127.0.0.1:%d" % harness.free_port(),
                                    "https://127.0.0.1:%d" % self.tls_port])
        self.wait_until_served(orderer)
        self.assertIn("ACME: %s validated by http-01" % NAME, orderer.text())
        self.assertIn("http://%s:%d/.well-known/acme-challenge/" % (NAME, self.plain_port),
                      self.pebble.log_text())
        self.assert_https_works(self.tls_port)
        # Answers are withdrawn once validated (front's own order done too).
        self.wait_until_served(front)
        self.assertEqual(os.listdir(os.path.join(self.state, "acme", "challenges")), [])

    def test_a_reload_adding_an_acme_site_orders_its_certificate(self):
        config = os.path.join(self.tmp, "lepus.toml")
        site = '[[site]]\nserver_names = ["%s"]\nroot = "%s"\ntls = "acme"\n'

        def write_config(names):
            with open(config, "w") as f:
                f.write('listen = ["127.0.0.1:%d", "https://127.0.0.1:%d"]\n'
                        % (self.plain_port, self.tls_port))
                for name in names:
                    f.write(site % (name, self.root))

        write_config([NAME])
        self.start_pebble(self.plain_port, self.closed_port)
        server = AcmeLepus(self.pebble, [], self.state, self.root, ["--config", config])
        self.servers.append(server)
        self.wait_until_served(server)
        self.assert_https_works(self.tls_port)
        write_config([NAME, "second.example.com"])
        server.process.send_signal(signal.SIGHUP)
        wait_for(lambda: "ACME: second.example.com: certificate issued" in server.text(),
                 "the new site's certificate")
        root = self.pebble.root()
        wait_for(lambda: https_get(self.tls_port, root, name="second.example.com")[0] == 0,
                 "the new site served over HTTPS")
        code, body, error = https_get(self.tls_port, root)  # the first site still served
        self.assertEqual(code, 0, error)
        self.assertEqual(self.pebble.log_text().count("Added order"), 2)

    def test_on_demand_orders_only_what_the_ask_url_allows(self):
        asked = []

        class Ask(BaseHTTPRequestHandler):
            def do_GET(self):
                asked.append(self.path)
                self.send_response(200 if self.path.endswith("=yes.example.com") else 403)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        ask = HTTPServer(("127.0.0.1", 0), Ask)
        threading.Thread(target=ask.serve_forever, daemon=True).start()
        try:
            self.start_pebble(self.plain_port, self.closed_port)
            listen = ["127.0.0.1:%d" % self.plain_port, "https://127.0.0.1:%d" % self.tls_port]
            args = ["--acme-on-demand-ask", "http://127.0.0.1:%d/check" % ask.server_port]
            server = AcmeLepus(self.pebble, listen, self.state, self.root, args)
            self.servers.append(server)
            root = self.pebble.root()
            # A name the ask URL refuses: an alert, and no order.
            code, _, error = https_get(self.tls_port, root, name="no.example.com")
            self.assertNotEqual(code, 0)
            self.assertIn("unrecognized name", error.lower())
            wait_for(lambda: "no.example.com refused by the ask URL" in server.text(),
                     "the ask URL's refusal")
            self.assertIn("/check?domain=no.example.com", asked)
            self.assertNotIn("Added order", self.pebble.log_text())
            # A name it allows: the first handshake is refused, the certificate
            # ordered, and later handshakes get it.
            code, _, _ = https_get(self.tls_port, root, name="yes.example.com")
            self.assertNotEqual(code, 0)
            wait_for(lambda: https_get(self.tls_port, root, name="yes.example.com")[0] == 0,
                     "the on-demand certificate")
            self.assertEqual(self.pebble.log_text().count("Added order"), 1)
            server.stop(self)
            # A restart serves it from the state folder at once.
            again = AcmeLepus(self.pebble, listen, self.state, self.root, args)
            self.servers.append(again)
            code, body, error = https_get(self.tls_port, root, name="yes.example.com")
            self.assertEqual(code, 0, error)
            self.assertEqual(body, b"hello over acme\n")
        finally:
            ask.shutdown()
            ask.server_close()


if __name__ == "__main__":
    harness.main()
