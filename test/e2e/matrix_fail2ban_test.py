"""Failed basic-auth attempts in the error log, in nginx's form, read by
fail2ban (issue 35), in the protocol matrix: `user "x": password mismatch`
and `user "x" was not found in "FILE"` with the client address (the one a
trusted proxy names in X-Forwarded-For), the server, the request and the
Host, so that Debian fail2ban's stock nginx-http-auth filter bans on lepus's
error log as it does on nginx's. fail2ban-regex runs that filter over the
log; without fail2ban (apt-get install fail2ban; scripts/setup --test
installs it) the test is skipped, saying so. Needs htpasswd (apache2-utils)."""
import os
import shutil
import subprocess
import unittest

import harness
import limits_fixture
from auth_test import basic, htpasswd
from limits_fixture import forwarded_for

FILTER = "/etc/fail2ban/filter.d/nginx-http-auth.conf"


class MatrixFail2ban(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        limits_fixture.site_dir(cls, "matrix-fail2ban")
        cls.passwords = os.path.join(cls.dir, "htpasswd")
        htpasswd(cls.passwords, "bob", "secret", create=True)
        limits_fixture.start_behind_proxy(
            cls, lambda _: '\n[[site]]\nserver_names = ["example.test"]\nroot = "%s"\n'
            'auth = [{ paths = ["/admin/"], htpasswd = "%s" }]\n' % (cls.root, cls.passwords),
            php=False)
        cls.server.write("admin/index.html", "admin\n")

    def attempt(self, client, user, password):
        return self.server.fetch("/admin/", headers=forwarded_for(
            client, "Host: example.test", basic(user, password))).status

    def test_fail2ban_regex_matches_the_failed_logins(self):
        self.assertEqual(self.attempt("203.0.113.5", "bob", "wrong"), 401)
        self.assertEqual(self.attempt("203.0.113.5", "bob", "guess"), 401)
        self.assertEqual(self.attempt("2001:db8::7", "mallory", "x"), 401)
        # A quote in the name is escaped: it cannot close the field early.
        self.assertEqual(self.attempt("198.51.100.3", 'eve" was not found in "x', "x"), 401)
        # Neither a success nor a request without credentials is a failed login.
        self.assertEqual(self.attempt("198.51.100.4", "bob", "secret"), 200)
        self.assertEqual(self.server.fetch("/admin/", headers=forwarded_for(
            "198.51.100.4")).status, 401)
        lines = self.server.error_lines(' user "', count=4)
        self.assertEqual(len(lines), 4, lines)
        self.assertIn('user "bob": password mismatch, client: 203.0.113.5, server: example.test, '
                      'request: "GET /admin/ HTTP/', lines[0])
        self.assertIn('user "mallory" was not found in "%s", client: 2001:db8::7'
                      % self.passwords, lines[2])
        self.assertIn('user "eve\\x22 was not found in \\x22x" was not found in "%s", '
                      'client: 198.51.100.3,' % self.passwords, lines[3])
        if not shutil.which("fail2ban-regex") or not os.path.exists(FILTER):
            self.skipTest("fail2ban is not installed (apt-get install fail2ban): the lines "
                          "are checked above, not through its nginx-http-auth filter")
        done = subprocess.run(["fail2ban-regex", "-o", "ip", self.server.error_log, FILTER],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.split(),
                         ["203.0.113.5", "203.0.113.5", "2001:db8::7", "198.51.100.3"],
                         done.stdout + done.stderr)


if __name__ == "__main__":
    harness.main()
