"""HTTP basic auth end to end (issue 18): `auth` rules in a [[site]] checked
against an htpasswd file made here with Apache's `htpasswd -B` (apache2-utils):
right, wrong, missing and malformed credentials; the decoded path is what is
protected, also where try_files re-routes to; an `off` subtree; the first request of a credential (waiting for
the verifier threads) and the later ones (cached) give the same bytes, for a
big file and a range too; $remote_user in the access log; REMOTE_USER and
AUTH_TYPE seen by a PHP script under a real php-fpm; a {SHA} file refused at
start (one line, exit 2), by -t and by SIGHUP (the running file stays), and a
changed password taking effect on reload; and a slow bcrypt (cost 12) never
delaying another client: 50 logins with distinct wrong passwords are still
being checked when a static probe on another connection has its answer."""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import unittest

import harness
import phpfpm

REALM_CHALLENGE = 'Basic realm="Admin area", charset="UTF-8"'


def basic(user, password):
    token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    return "Authorization: Basic " + token


def htpasswd(path, user, password, cost=5, create=False):
    """Adds (or replaces) `user` in the file with Apache's own tool, bcrypt."""
    if not shutil.which("htpasswd"):
        raise unittest.SkipTest("htpasswd not installed (apt-get install apache2-utils)")
    flags = "-cbB" if create else "-bB"
    subprocess.run(["htpasswd", flags, "-C", str(cost), path, user, password], check=True,
                   capture_output=True)


def wait_until(test, condition, what, timeout=15.0):
    """harness.wait_until, with longer for the bcrypt verifier threads."""
    return harness.wait_until(test, condition, what, timeout)


class Setup:
    """A directory with a site root, an htpasswd file and a lepus.toml."""

    def __init__(self, owner, extra_site="", extra_rules=""):
        self.dir = harness.temp_dir(owner, name="auth")
        self.root = os.path.join(self.dir, "www")
        os.makedirs(self.root)
        self.passwords = os.path.join(self.dir, "htpasswd")
        self.config = os.path.join(self.dir, "lepus.toml")
        self.extra_site, self.extra_rules = extra_site, extra_rules

    def write_config(self, passwords=None):
        text = """\
[[site]]
root = "%s"
%s
auth = [{ paths = ["/admin/", "/private"], realm = "Admin area", htpasswd = "%s" },
        { paths = ["/admin/public/"], off = true }%s]
""" % (self.root, self.extra_site, passwords or self.passwords, self.extra_rules)
        with open(self.config, "w") as f:
            f.write(text)

    def write(self, relative, content):
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())


class BasicAuth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.setup = Setup(cls)
        htpasswd(cls.setup.passwords, "bob", "secret", create=True)
        htpasswd(cls.setup.passwords, "carol", "pässwörd")  # UTF-8, as the challenge says
        htpasswd(cls.setup.passwords, "dave", "big")
        cls.setup.write_config()
        cls.setup.write("index.html", "open\n")
        cls.setup.write("admin/index.html", "secret page\n")
        cls.setup.write("admin/public/logo.txt", "public part\n")
        cls.big = os.urandom(700 * 1024)
        cls.setup.write("admin/big.bin", cls.big)
        cls.server = harness.Lepus(["--config", cls.setup.config], root=cls.setup.root)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def get(self, path, *headers, method="GET"):
        if method != "HEAD":
            return self.server.get(path, headers, method=method)
        lines = ["HEAD %s HTTP/1.1" % path, "Host: localhost", "Connection: close"]
        with self.server.connect() as s:
            s.sendall(("\r\n".join(lines + list(headers)) + "\r\n\r\n").encode())
            return harness.read_response(s, head_only=True)

    def assert_challenged(self, response):
        self.assertEqual(response.status, 401, response.raw_head)
        self.assertEqual(response.header("www-authenticate"), REALM_CHALLENGE)

    def test_missing_credentials_get_401_with_the_realm(self):
        self.assert_challenged(self.get("/admin/"))
        self.assert_challenged(self.get("/private/notes.txt"))
        self.assert_challenged(self.get("/admin/", method="HEAD"))

    def test_right_credentials_get_the_page_first_and_cached(self):
        for _ in range(3):  # the first waits for a verifier thread, the next are cached
            response = self.get("/admin/", basic("bob", "secret"))
            self.assertEqual((response.status, response.body), (200, b"secret page\n"))
            self.assertIsNone(response.header("www-authenticate"))

    @unittest.skipUnless(shutil.which("curl"), "needs curl")
    def test_over_http2_too(self):
        """The verdict arrives on a stream of an HTTP/2 connection: a new user
        (a verifier thread), then the cache; a 700 KiB file; no credentials."""
        base = "http://127.0.0.1:%d" % self.server.port

        def curl(*args):
            return subprocess.run(["curl", "-s", "--http2-prior-knowledge", "-w",
                                   "\n%{http_version} %{http_code}"] + list(args),
                                  capture_output=True, timeout=30).stdout
        self.assertTrue(curl(base + "/admin/").endswith(b"\n2 401"))
        # (One URL per curl: Debian's curl 7.88 does not reuse an h2c connection.)
        for _ in range(2):
            self.assertEqual(curl("-u", "dave:big", base + "/admin/"), b"secret page\n\n2 200")
        self.assertEqual(curl("-u", "dave:big", base + "/admin/big.bin"), self.big + b"\n2 200")

    def test_a_utf8_password(self):
        token = base64.b64encode("carol:pässwörd".encode()).decode()
        response = self.get("/admin/", "Authorization: Basic " + token)
        self.assertEqual(response.status, 200, response.raw_head)

    def test_wrong_password_and_unknown_user_get_401(self):
        self.assert_challenged(self.get("/admin/", basic("bob", "Secret")))
        self.assert_challenged(self.get("/admin/", basic("bob", "")))
        self.assert_challenged(self.get("/admin/", basic("mallory", "secret")))
        # A right password is not remembered for the wrong user.
        self.assertEqual(self.get("/admin/", basic("bob", "secret")).status, 200)
        self.assert_challenged(self.get("/admin/", basic("carol", "secret")))

    def test_malformed_credentials_get_401_and_two_fields_400(self):
        token = base64.b64encode(b"bob-secret").decode()  # no ':'
        for header in ("Authorization: Basic !!!notbase64", "Authorization: Basic " + token,
                       "Authorization: Bearer abc.def", "Authorization: Basic",
                       "Authorization: Basicabc", "Authorization: "):
            self.assert_challenged(self.get("/admin/", header))
        # The scheme is case-insensitive (RFC 9110 §11.1).
        lower = basic("bob", "secret").replace("Basic", "basic")
        self.assertEqual(self.get("/admin/", lower).status, 200)
        # Two fields: which would a script believe? Refused, as nginx does.
        response = self.get("/admin/", basic("bob", "secret"), basic("bob", "secret"))
        self.assertEqual(response.status, 400)

    def test_the_decoded_path_is_protected(self):
        for path in ("/%61dmin/", "//admin/", "/./admin/index.html", "/x/../admin/big.bin"):
            self.assert_challenged(self.get(path))
        self.assertEqual(self.get("/%61dmin/", basic("bob", "secret")).status, 200)

    def test_open_paths_and_an_off_subtree_need_nothing(self):
        self.assertEqual(self.get("/").body, b"open\n")
        response = self.get("/admin/public/logo.txt")
        self.assertEqual((response.status, response.body), (200, b"public part\n"))
        # A missing file under the protected prefix is not revealed either.
        self.assert_challenged(self.get("/admin/missing.html"))
        self.assertEqual(self.get("/admin/missing.html", basic("bob", "secret")).status, 404)

    def test_a_big_file_head_and_range_on_first_and_later_requests(self):
        # dave's first request waits for the verifier: the file is relayed in chunks.
        response = self.get("/admin/big.bin", basic("dave", "big"))
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, self.big)
        self.assertEqual(response.body, self.get("/admin/big.bin", basic("dave", "big")).body)
        # A first request of another credential, with a range, then HEAD.
        htpasswd(self.setup.passwords, "erin", "range")  # not loaded until a reload
        response = self.get("/admin/big.bin", basic("dave", "big"), "Range: bytes=1000-1999")
        self.assertEqual((response.status, response.body), (206, self.big[1000:2000]))
        head = self.get("/admin/big.bin", basic("dave", "big"), method="HEAD")
        self.assertEqual(head.header("content-length"), str(len(self.big)))

    def test_a_body_sent_before_the_verdict_is_kept_for_the_answer(self):
        # A POST to a static file while the verdict is pending: the body waits
        # (back-pressure), then is read and dropped; the connection stays usable.
        with self.server.connect() as s:
            body = b"x" * 100000
            request = ("POST /admin/index.html HTTP/1.1\r\nHost: a\r\n%s\r\n"
                       "Content-Length: %d\r\n\r\n" % (basic("carol", "pässwörd"), len(body)))
            s.sendall(request.encode("utf-8") + body)
            first = harness.read_response(s, buffer=b"")
            self.assertIn(first.status, (200, 405), first.raw_head)
            s.sendall(("GET /admin/ HTTP/1.1\r\nHost: a\r\n%s\r\n\r\n" %
                       basic("bob", "secret")).encode())
            second = harness.read_response(s, buffer=first.leftover)
            self.assertEqual((second.status, second.body), (200, b"secret page\n"))

    def test_the_access_log_names_the_user(self):
        self.get("/admin/?log=right", basic("bob", "secret"))
        self.get("/admin/?log=wrong", basic("mallory", "x"))
        self.get("/?log=none")

        def lines():
            found = {}
            for line in self.server.access_lines():
                for tag in ("right", "wrong", "none"):
                    if "log=%s " % tag in line:
                        found[tag] = line
            return found if len(found) == 3 else None
        found = wait_until(self, lines, "three access log lines")
        self.assertRegex(found["right"], r'^127\.0\.0\.1 - bob \[.*" 200 ')
        # nginx's $remote_user: the name given, even when refused.
        self.assertRegex(found["wrong"], r'^127\.0\.0\.1 - mallory \[.*" 401 ')
        self.assertRegex(found["none"], r'^127\.0\.0\.1 - - \[.*" 200 ')


class RefusedFiles(unittest.TestCase):
    def setUp(self):
        harness.require_binary()
        self.setup = Setup(self)
        htpasswd(self.setup.passwords, "bob", "secret", create=True)
        self.setup.write("admin/index.html", "secret page\n")

    def test_a_sha_file_stops_the_start_with_one_line_and_exit_2(self):
        weak = os.path.join(self.setup.dir, "weak")
        with open(weak, "w") as f:
            f.write("# made with htpasswd -s\nbob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n")
        self.setup.write_config(passwords=weak)
        run = subprocess.run([harness.BINARY, "--config", self.setup.config,
                              "--listen", "127.0.0.1:0"], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(run.returncode, 2, run.stderr)
        lines = run.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertIn(weak + ":2: user 'bob': {SHA}", lines[0])
        self.assertIn("insecure", lines[0])
        self.assertIn("htpasswd -B", lines[0])
        # -t says the same (exiting 1, as it does for every configuration error).
        check = subprocess.run([harness.BINARY, "-t", "--config", self.setup.config],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(check.returncode, 1, check.stderr)
        self.assertIn("{SHA}", check.stderr)

    def test_a_missing_file_and_a_bad_rule_stop_the_start(self):
        self.setup.write_config(passwords=os.path.join(self.setup.dir, "nope"))
        run = subprocess.run([harness.BINARY, "--config", self.setup.config],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 2)
        self.assertIn("nope: No such file or directory", run.stderr)
        with open(self.setup.config, "w") as f:
            f.write('[[site]]\nroot = "%s"\nauth = [{ paths = ["admin"], htpasswd = "%s" }]\n'
                    % (self.setup.root, self.setup.passwords))
        run = subprocess.run([harness.BINARY, "--config", self.setup.config],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 2)
        self.assertIn("each starting with /", run.stderr)

    def test_reload_refuses_a_bad_file_and_takes_a_changed_password(self):
        self.setup.write_config()
        server = harness.Lepus(["--config", self.setup.config], root=self.setup.root)
        try:
            self.assertEqual(server.get("/admin/", [basic("bob", "secret")]).status, 200)
            with open(self.setup.passwords, "a") as f:
                f.write("eve:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\n")
            server.proc.send_signal(signal.SIGHUP)
            wait_until(self, lambda: "$apr1$" in server.stderr() + server.error_log_text(),
                       "the refused reload")
            self.assertEqual(server.get("/admin/", [basic("bob", "secret")]).status, 200)
            # A new password: the cached old one must not let bob in any more.
            htpasswd(self.setup.passwords, "bob", "new-secret", create=True)
            server.proc.send_signal(signal.SIGHUP)
            wait_until(self, lambda: "configuration reloaded" in server.error_log_text(),
                       "the reload")
            self.assertEqual(server.get("/admin/", [basic("bob", "secret")]).status, 401)
            self.assertEqual(server.get("/admin/", [basic("bob", "new-secret")]).status, 200)
        finally:
            server.stop(self)


class TryFilesIntoAProtectedPath(unittest.TestCase):
    def test_a_fallback_under_a_protected_prefix_asks_for_credentials(self):
        # nginx runs the access phase again after try_files' internal redirect:
        # an open path must not become a way into /admin/.
        harness.require_binary()
        setup = Setup(self, extra_site='try_files = ["$uri", "/admin/index.html"]')
        htpasswd(setup.passwords, "bob", "secret", create=True)
        setup.write_config()
        setup.write("open.txt", "open\n")
        setup.write("admin/index.html", "secret page\n")
        server = harness.Lepus(["--config", setup.config], root=setup.root)
        try:
            self.assertEqual(server.get("/open.txt").body, b"open\n")
            response = server.get("/no/such/page")
            self.assertEqual(response.status, 401)
            self.assertEqual(response.header("www-authenticate"), REALM_CHALLENGE)
            for _ in range(2):  # the verifier, then the cache
                response = server.get("/no/such/page", [basic("bob", "secret")])
                self.assertEqual((response.status, response.body), (200, b"secret page\n"))
            self.assertEqual(server.get("/no/such/page", [basic("bob", "nope")]).status, 401)
        finally:
            server.stop(self)


class SlowBcrypt(unittest.TestCase):
    LOGINS = 50

    def test_fifty_slow_logins_never_delay_a_static_probe(self):
        harness.require_binary()
        setup = Setup(self)
        htpasswd(setup.passwords, "slow", "right", cost=12, create=True)
        setup.write_config()
        setup.write("admin/index.html", "secret page\n")
        setup.write("probe.txt", "probe\n")
        server = harness.Lepus(["--config", setup.config], root=setup.root)
        try:
            done = []
            sent = threading.Barrier(self.LOGINS + 1)
            lock = threading.Lock()

            def login(i):
                with server.connect(timeout=120) as s:
                    s.sendall(("GET /admin/ HTTP/1.1\r\nHost: a\r\nConnection: close\r\n"
                               "%s\r\n\r\n" % basic("slow", "wrong-%d" % i)).encode())
                    sent.wait()
                    response = harness.read_response(s)
                with lock:
                    done.append(response.status)

            threads = [threading.Thread(target=login, args=(i,)) for i in range(self.LOGINS)]
            for thread in threads:
                thread.start()
            sent.wait()  # every login is on the wire
            probe = server.get("/probe.txt")
            with lock:
                finished_at_probe = len(done)
            self.assertEqual((probe.status, probe.body), (200, b"probe\n"))
            self.assertLess(finished_at_probe, self.LOGINS,
                            "every login was answered before the probe: it waited for them")
            for thread in threads:
                thread.join(timeout=180)
            self.assertEqual(done, [401] * self.LOGINS)
            self.assertEqual(server.get("/admin/", [basic("slow", "right")]).status, 200)
        finally:
            server.stop(self)


class RemoteUserForPhp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
        cls.setup = Setup(cls)
        htpasswd(cls.setup.passwords, "bob", "secret", create=True)
        htpasswd(cls.setup.passwords, "amy", "amy-pass")

        def configure(address):
            cls.setup.extra_site = 'fastcgi = "%s"' % address
            cls.setup.write_config()
            return ["--config", cls.setup.config]
        cls.fpm, cls.server = phpfpm.start_site(cls, configure, children=2, fastcgi=False,
                                                root=cls.setup.root)
        script = ("<?php header('Content-Type: application/json'); echo json_encode(["
                  "'user' => $_SERVER['REMOTE_USER'] ?? null, "
                  "'type' => $_SERVER['AUTH_TYPE'] ?? null, "
                  "'body' => file_get_contents('php://input')]);\n")
        cls.setup.write("admin/who.php", script)
        cls.setup.write("who.php", script)

    def test_php_sees_remote_user_and_auth_type(self):
        for _ in range(2):  # first through the verifier, then cached
            response = self.server.get("/admin/who.php", [basic("bob", "secret")])
            self.assertEqual(response.status, 200, response.body)
            data = json.loads(response.body)
            self.assertEqual((data["user"], data["type"]), ("bob", "Basic"))
        self.assertEqual(self.server.get("/admin/who.php").status, 401)

    def test_an_open_script_sees_no_user(self):
        response = self.server.get("/who.php", [basic("bob", "secret")])
        data = json.loads(response.body)
        self.assertEqual((data["user"], data["type"]), (None, None))

    def test_a_post_body_waits_for_the_verdict_and_reaches_php(self):
        body = "a=1&b=" + "z" * 50000
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            token = basic("amy", "amy-pass").split(": ", 1)[1]
            connection.request("POST", "/admin/who.php", body=body, headers={
                "Authorization": token,
                "Content-Type": "application/x-www-form-urlencoded"})
            response = connection.getresponse()
            status, text = response.status, response.read()
        finally:
            connection.close()
        self.assertEqual(status, 200, text)
        data = json.loads(text)
        self.assertEqual((data["user"], data["body"]), ("amy", body))

if __name__ == "__main__":
    harness.main()
