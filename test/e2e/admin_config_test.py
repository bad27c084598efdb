"""Issue 33, safe by default for the admin: `lepus -t` without --config checks
the default config (moved by LEPUS_DEFAULT_CONFIG, so that no test reads the
host's /etc), and `-t` run as root checks what the service user can read; the
config that is accepted but silently wrong is refused (exit 2 at start, 1 with
-t) or warned about (one line on stderr, the start goes on)."""
import os
import pwd
import re
import subprocess
import textwrap
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


if __name__ == "__main__":
    harness.main()
