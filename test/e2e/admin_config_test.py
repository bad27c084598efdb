"""Issue 33, safe by default for the admin: `lepus -t` without --config checks
the default config (moved by LEPUS_DEFAULT_CONFIG, so that no test reads the
host's /etc), and `-t` run as root checks what the service user can read; the
config that is accepted but silently wrong is refused (exit 2 at start, 1 with
-t) or warned about (one line on stderr, the start goes on)."""
import os
import pwd
import re
import signal
import subprocess
import textwrap
import time
import unittest

import harness
from harness import REAL_BINARY


def run(args, env=None, cwd=None):
    """lepus itself, not the tests' --allow-root wrapper: as root, -t checks as
    the user lepus switches to."""
    full = dict(os.environ)
    full.pop("LEPUS_DEFAULT_CONFIG", None)
    full.update(env or {})
    return subprocess.run([REAL_BINARY] + args, capture_output=True, text=True, timeout=30,
                          env=full, cwd=cwd)


class Base(unittest.TestCase):
    def setUp(self):
        harness.require_binary()
        self.dir = harness.temp_dir(self, "admin")
        self.www = os.path.join(self.dir, "www")
        os.makedirs(self.www)

    def write(self, text, name="lepus.toml"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path


class DefaultConfig(Base):
    def test_t_alone_checks_the_default_config(self):
        path = self.write('root = "%s"\nerror_log = "-"\naccess_log = "-"\nallow_root = true\n'
                          % self.www)
        result = run(["-t"], env={"LEPUS_DEFAULT_CONFIG": path})
        self.assertEqual((result.returncode, result.stdout), (0, "ok\n"), result.stderr)

    def test_t_alone_names_the_default_it_looked_for(self):
        missing = os.path.join(self.dir, "absent.toml")
        result = run(["-t"], env={"LEPUS_DEFAULT_CONFIG": missing})
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr,
                         "lepus: -t needs --config FILE (the default %s does not exist)\n" % missing)

    def test_t_alone_finds_errors_in_the_default_config(self):
        path = self.write('root = "%s"\nthreds = 2\n' % self.www)
        result = run(["-t"], env={"LEPUS_DEFAULT_CONFIG": path})
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"%s:2:\d+: unknown key 'threds'" % re.escape(path))


@unittest.skipUnless(os.geteuid() == 0, "needs root, to check as another user")
class CheckedAsTheServiceUser(Base):
    def setUp(self):
        super().setUp()
        os.chmod(self.dir, 0o755)

    def check(self, text):
        return run(["-t", "--config", self.write(text)], cwd=self.dir)

    def test_root_the_user_cannot_read(self):
        os.chmod(self.www, 0o700)
        result = self.check('root = "%s"\nuser = "nobody"\n' % self.www)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("root '%s' cannot be read by user nobody: it is not readable" % self.www,
                      result.stderr)
        self.assertIn("checked what user nobody can read and write", result.stderr)
        os.chmod(self.www, 0o755)
        result = self.check('root = "%s"\nuser = "nobody"\n' % self.www)
        self.assertEqual((result.returncode, result.stdout), (0, "ok\n"), result.stderr)

    def test_default_user_is_checked_too(self):
        # Root without --user runs as www-data (else nobody): -t checks that one.
        hidden = os.path.join(self.dir, "hidden")
        os.makedirs(os.path.join(hidden, "www"))
        os.chmod(hidden, 0o700)
        result = self.check('root = "%s/www"\n' % hidden)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, r"root '%s/www' cannot be read by user (www-data|nobody): "
                         r"directory '%s' is not searchable" % (re.escape(hidden), re.escape(hidden)))

    def test_key_and_htpasswd_the_user_cannot_read(self):
        key = os.path.join(self.dir, "site.key")
        cert = os.path.join(self.dir, "site.crt")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                        "-subj", "/CN=a.test", "-addext", "subjectAltName=DNS:a.test",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        os.chmod(key, 0o600)
        os.chmod(cert, 0o644)
        htpasswd = os.path.join(self.dir, "htpasswd")
        with open(htpasswd, "w") as f:
            f.write("alice:$2y$05$vIndJpCyxAjm8ScJNQaZNO9j2rz.DrfqpjidTvL1VTHzBfaCgG9Cu\n")
        os.chmod(htpasswd, 0o600)
        result = self.check('''\
            user = "nobody"
            [[site]]
            server_names = ["a.test"]
            root = "%s"
            tls = { cert = "%s", key = "%s" }
            auth = [{ paths = ["/"], htpasswd = "%s" }]
            ''' % (self.www, cert, key, htpasswd))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, r"tls key '%s' cannot be read by user nobody" % re.escape(key))
        self.assertRegex(result.stderr, r"htpasswd '%s' cannot be read by user nobody"
                         % re.escape(htpasswd))
        self.assertNotIn("tls cert", result.stderr)


class SilentlyWrong(Base):
    """Refused: exit 2 at start, 1 with -t, one line with the file and line.
    Warned: one "warning:" line on stderr with -t and at start, which goes on."""

    def site(self, extra, names='["a.test"]'):
        return 'allow_root = true\n[[site]]\nserver_names = %s\nroot = "%s"\n%s' % (
            names, self.www, extra)

    def assert_refused(self, text, needle, line):
        path = self.write(text)
        for args, code in ((["-t"], 1), ([], 2)):
            result = run(args + ["--config", path, "--listen", "127.0.0.1:0"], cwd=self.dir)
            self.assertEqual(result.returncode, code, result.stderr)
            self.assertRegex(result.stderr, r"^lepus: %s:%d:\d+: .*%s" % (
                re.escape(path), line, re.escape(needle)))
            self.assertEqual(result.stderr.count("\n"), 1, result.stderr)

    def test_nginx_server_names_that_never_match_are_refused(self):
        for names, needle in (('[".example.org"]', '"example.org", "*.example.org"'),
                              ('["~^www\\\\.(.+)$"]', "regular expressions are not supported"),
                              ('["a.test:443"]', 'a name has no port'),
                              ('["www.*.test"]', "only allowed as the first label")):
            with self.subTest(names=names):
                self.assert_refused(self.site("", names), needle, 3)

    def test_index_as_one_string_is_refused(self):
        self.assert_refused(self.site('index = "index.php index.html"\n'),
                            "'index' is a list of file names", 5)

    def warnings(self, text):
        path = self.write(text)
        checked = run(["-t", "--config", path], cwd=self.dir)
        self.assertEqual((checked.returncode, checked.stdout), (0, "ok\n"), checked.stderr)
        return path, [l for l in checked.stderr.splitlines() if "warning:" in l]

    def test_duplicate_server_name_is_warned_about(self):
        path, warnings = self.warnings(self.site("") + '[[site]]\nserver_names = ["b.test", '
                                       '"A.test"]\nroot = "%s"\n' % self.www)
        self.assertEqual(warnings, ["lepus: warning: %s:5:1: server name 'a.test' is also the "
                                    "site's at %s:2:1, which answers it; this one never will"
                                    % (path, path)])

    def test_https_redirect_without_tls_listener_is_warned_about(self):
        path, warnings = self.warnings(self.site("https_redirect = true\n"))
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("%s:2:1: https_redirect sends clients to port 443, but no listen address is "
                      "https://" % path, warnings[0])

    def test_warnings_do_not_stop_the_start(self):
        server = harness.Lepus(["--config", self.write(self.site("https_redirect = true\n"))],
                               root=self.www)
        try:
            response = server.request("GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            self.assertEqual(response.status, 301)
            self.assertEqual(response.header("location"), "https://a.test/")
        finally:
            server.stop(self)

    def test_top_level_index_as_one_string_is_refused(self):
        text = 'allow_root = true\nroot = "%s"\nindex = "index.php index.html"\n' % self.www
        self.assert_refused(text, "'index' is a list of file names", 3)

    def test_errors_name_the_config_key_and_line(self):
        text = 'allow_root = true\nroot = "%s"\ntemp_dir = "%s/absent"\n' % (self.www, self.dir)
        self.assert_refused(text, "'temp_dir' '%s/absent' is not a directory" % self.dir, 3)
        text = 'allow_root = true\nroot = "%s"\nstatus_path = "status"\n' % self.www
        self.assert_refused(text, "'status_path' must start with /", 3)


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True,
                   timeout=60)


def make_certificates(directory):
    """Made at test time with the openssl tool: an issuer ("Test Intermediate"),
    a certificate it issued for a.test and www.a.test with its key, the full
    chain in order and reversed, and one for a.test that expired in 2020."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "issuer.key", "-out", "issuer.pem", "-days", "2",
            "-subj", "/CN=Test Intermediate", cwd=directory)
    openssl("req", *ec, "-keyout", "site.key", "-out", "site.csr", "-subj", "/CN=a.test",
            "-addext", "subjectAltName=DNS:a.test,DNS:www.a.test", cwd=directory)
    openssl("x509", "-req", "-in", "site.csr", "-CA", "issuer.pem", "-CAkey", "issuer.key",
            "-out", "site.pem", "-days", "2", "-copy_extensions", "copy", cwd=directory)
    # `openssl ca` is the one tool of OpenSSL 3.0 that sets dates in the past.
    with open(os.path.join(directory, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca = x\n[x]\ndatabase = index.txt\nnew_certs_dir = .\n"
                "serial = serial\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n")
    open(os.path.join(directory, "index.txt"), "w").close()
    with open(os.path.join(directory, "serial"), "w") as f:
        f.write("01\n")
    openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "issuer.pem", "-keyfile", "issuer.key",
            "-in", "site.csr", "-out", "expired.pem", "-notext", "-startdate", "20200101000000Z",
            "-enddate", "20200102000000Z", cwd=directory)
    def read(name):
        with open(os.path.join(directory, name)) as f:
            return f.read()
    for name, parts in (("full.pem", ("site.pem", "issuer.pem")),
                        ("reversed.pem", ("issuer.pem", "site.pem"))):
        with open(os.path.join(directory, name), "w") as f:
            f.write("".join(read(part) for part in parts))
    return {name: os.path.join(directory, name + ".pem") for name in ("full", "reversed",
                                                                      "expired", "site")}, \
        os.path.join(directory, "site.key")


class Certificates(Base):
    """Issue 33 item 7's TLS half: a certificate clients will refuse is warned
    about; a chain in the wrong order says so; TLS errors name the file and line."""
    site = SilentlyWrong.site
    assert_refused = SilentlyWrong.assert_refused
    warnings = SilentlyWrong.warnings

    def setUp(self):
        super().setUp()
        self.certs, self.key = make_certificates(self.dir)

    def tls_site(self, cert, names='["a.test", "www.a.test"]'):
        return 'listen = ["https://127.0.0.1:0"]\n' + self.site(
            'tls = { cert = "%s", key = "%s" }\n' % (cert, self.key), names)

    def test_a_good_chain_gives_no_warning(self):
        self.assertEqual(self.warnings(self.tls_site(self.certs["full"]))[1], [])

    def test_expired_certificate_is_warned_about(self):
        path, warnings = self.warnings(self.tls_site(self.certs["expired"], '["a.test"]'))
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("%s:6:7: TLS certificate '%s' (/CN=a.test) expired on 2020-01-02"
                      % (path, self.certs["expired"]), warnings[0])

    def test_names_the_certificate_does_not_cover_are_warned_about(self):
        path, warnings = self.warnings(
            self.tls_site(self.certs["full"], '["a.test", "b.test", "*.a.test"]'))
        self.assertEqual(len(warnings), 2, warnings)
        self.assertIn("does not cover the server name 'b.test'", warnings[0])
        self.assertIn("does not cover the server name '*.a.test'", warnings[1])

    def test_reversed_chain_says_so(self):
        path = self.write(self.tls_site(self.certs["reversed"]))
        for args, code in ((["-t"], 1), ([], 2)):
            result = run(args + ["--config", path], cwd=self.dir)
            self.assertEqual(result.returncode, code, result.stderr)
            self.assertIn("the chain is in the wrong order", result.stderr)
            self.assertNotIn("does not match", result.stderr)
            self.assertRegex(result.stderr, r"lepus: %s:6:7: TLS key '%s': the certificate of "
                             r"this key is number 2" % (re.escape(path), re.escape(self.key)))

    def test_reload_logs_the_warnings(self):
        tls = 'tls = { cert = "%s", key = "%s" }\n'
        path = self.write(self.site(tls % (self.certs["full"], self.key)))
        server = harness.Lepus(["--config", path], root=self.www)
        try:
            self.write(self.site(tls % (self.certs["expired"], self.key), '["a.test"]'))
            server.proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while "SIGHUP: configuration reloaded" not in server.error_log_text():
                self.assertLess(time.monotonic(), deadline, server.error_log_text())
                time.sleep(0.05)
            self.assertIn("SIGHUP: %s:5:7: TLS certificate '%s' (/CN=a.test) expired on 2020-01-02"
                          % (path, self.certs["expired"]), server.error_log_text())
        finally:
            server.stop(self)

    def test_tls_errors_name_the_file_and_line(self):
        missing = os.path.join(self.dir, "missing.pem")
        text = ('allow_root = true\nroot = "%s"\nlisten = ["https://127.0.0.1:0"]\n'
                'tls_cert = "%s"\ntls_key = "%s"\n' % (self.www, missing, self.key))
        self.assert_refused(text, "cannot read TLS certificate '%s'" % missing, 4)
        self.assert_refused(self.tls_site(missing), "cannot read TLS certificate", 6)


if __name__ == "__main__":
    harness.main()
