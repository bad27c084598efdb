"""Basic auth in the protocol matrix (issue 31): auth_test.py's feature checks
over HTTP/1.1, HTTP/2 over TLS and h2c, every request through
harness.Lepus.fetch(). The 401 challenge with its realm, right (first through a
verifier thread, then cached), wrong, malformed and doubled credentials, the
decoded path protected, an `off` subtree, a big file and a range for a user's
first request, a POST body held while the verdict is pending and then read by
PHP, REMOTE_USER and AUTH_TYPE for PHP, try_files falling back into a protected
path, and the user in the access log.

auth_test.py keeps what is about HTTP/1.1 connections (a body sent before the
verdict on a kept-alive connection), the refused password files, reloads and
the slow bcrypt logins. Needs php-fpm and htpasswd (apache2-utils)."""
import base64
import hashlib
import json
import os
import unittest

import harness
import phpfpm
from auth_test import REALM_CHALLENGE, basic, htpasswd, wait_until

WHO = ("<?php header('Content-Type: application/json'); echo json_encode(["
       "'user' => $_SERVER['REMOTE_USER'] ?? null, 'type' => $_SERVER['AUTH_TYPE'] ?? null,"
       " 'body' => md5(file_get_contents('php://input'))]);\n")


class MatrixAuth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="matrix-auth")
        cls.root = os.path.join(cls.dir, "www")
        passwords = os.path.join(cls.dir, "htpasswd")
        htpasswd(passwords, "bob", "secret", create=True)
        htpasswd(passwords, "carol", "pässwörd")
        htpasswd(passwords, "dave", "big")
        htpasswd(passwords, "amy", "amy-pass")
        htpasswd(passwords, "fay", "fallback")
        config = os.path.join(cls.dir, "lepus.toml")
        rules = ('auth = [{ paths = ["/admin/", "/private"], realm = "Admin area", '
                 'htpasswd = "%s" }, { paths = ["/admin/public/"], off = true }]' % passwords)

        def write_config(address):
            with open(config, "w") as f:
                f.write('[[site]]\nroot = "%s"\nfastcgi = "%s"\n%s\n\n'
                        % (cls.root, address, rules))
                f.write('[[site]]\nserver_names = ["fallback.test"]\nroot = "%s"\n'
                        'try_files = ["$uri", "/admin/index.html"]\n%s\n' % (cls.root, rules))
            return ["--config", config]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=2, fastcgi=False,
                                                root=cls.root)
        cls.big = os.urandom(700 * 1024)
        for name, content in (("index.html", "open\n"), ("admin/index.html", "secret page\n"),
                              ("admin/public/logo.txt", "public part\n"),
                              ("admin/big.bin", cls.big), ("admin/who.php", WHO),
                              ("who.php", WHO), ("open.txt", "open file\n")):
            cls.server.write(name, content)

    def fetch(self, path, *headers, **kwargs):
        return self.server.fetch(path, headers=list(headers), **kwargs)

    def assert_challenged(self, response):
        self.assertEqual(response.status, 401, response.raw_head)
        self.assertEqual(response.header("www-authenticate"), REALM_CHALLENGE)

    def test_missing_credentials_get_401_with_the_realm(self):
        self.assert_challenged(self.fetch("/admin/"))
        self.assert_challenged(self.fetch("/private/notes.txt"))
        self.assert_challenged(self.fetch("/admin/", method="HEAD"))

    def test_right_credentials_get_the_page_first_and_cached(self):
        for _ in range(3):  # the first waits for a verifier thread, the next are cached
            response = self.fetch("/admin/", basic("bob", "secret"))
            self.assertEqual((response.status, response.body), (200, b"secret page\n"))
            self.assertIsNone(response.header("www-authenticate"))

    def test_a_utf8_password(self):
        token = base64.b64encode("carol:pässwörd".encode()).decode()
        self.assertEqual(self.fetch("/admin/", "Authorization: Basic " + token).status, 200)

    def test_wrong_password_and_unknown_user_get_401(self):
        self.assert_challenged(self.fetch("/admin/", basic("bob", "Secret")))
        self.assert_challenged(self.fetch("/admin/", basic("mallory", "secret")))
        self.assertEqual(self.fetch("/admin/", basic("bob", "secret")).status, 200)
        self.assert_challenged(self.fetch("/admin/", basic("carol", "secret")))

    def test_malformed_credentials_get_401_and_two_fields_400(self):
        token = base64.b64encode(b"bob-secret").decode()  # no ':'
        for header in ("Authorization: Basic !!!notbase64", "Authorization: Basic " + token,
                       "Authorization: Bearer abc.def", "Authorization: Basicabc"):
            self.assert_challenged(self.fetch("/admin/", header))
        # The scheme is case-insensitive (RFC 9110 §11.1).
        lower = basic("bob", "secret").replace("Basic", "basic")
        self.assertEqual(self.fetch("/admin/", lower).status, 200)
        # Two fields (two header fields over HTTP/2 too): refused, as nginx does.
        response = self.fetch("/admin/", basic("bob", "secret"), basic("bob", "secret"))
        self.assertEqual(response.status, 400)

    def test_the_decoded_path_is_protected(self):
        for path in ("/%61dmin/", "//admin/", "/./admin/index.html", "/x/../admin/big.bin"):
            self.assert_challenged(self.fetch(path))
        self.assertEqual(self.fetch("/%61dmin/", basic("bob", "secret")).status, 200)

    def test_open_paths_and_an_off_subtree_need_nothing(self):
        self.assertEqual(self.fetch("/").body, b"open\n")
        response = self.fetch("/admin/public/logo.txt")
        self.assertEqual((response.status, response.body), (200, b"public part\n"))
        # A missing file under the protected prefix is not revealed either.
        self.assert_challenged(self.fetch("/admin/missing.html"))
        self.assertEqual(self.fetch("/admin/missing.html", basic("bob", "secret")).status, 404)

    def test_a_big_file_and_a_range_on_first_and_later_requests(self):
        # dave's first request waits for the verifier: the file goes out after it.
        for _ in range(2):
            response = self.fetch("/admin/big.bin", basic("dave", "big"))
            self.assertEqual(response.status, 200)
            self.assertEqual(response.body, self.big)
        response = self.fetch("/admin/big.bin", basic("dave", "big"), "Range: bytes=1000-1999")
        self.assertEqual((response.status, response.body), (206, self.big[1000:2000]))
        head = self.fetch("/admin/big.bin", basic("dave", "big"), method="HEAD")
        self.assertEqual(head.header("content-length"), str(len(self.big)))

    def test_php_sees_remote_user_and_auth_type(self):
        for _ in range(2):  # first through the verifier, then cached
            response = self.fetch("/admin/who.php", basic("bob", "secret"))
            self.assertEqual(response.status, 200, response.body)
            data = json.loads(response.body)
            self.assertEqual((data["user"], data["type"]), ("bob", "Basic"))
        self.assertEqual(self.fetch("/admin/who.php").status, 401)
        data = json.loads(self.fetch("/who.php", basic("bob", "secret")).body)
        self.assertEqual((data["user"], data["type"]), (None, None))

    def test_a_post_body_waits_for_the_verdict_and_reaches_php(self):
        # amy's first request: the body arrives (DATA frames over HTTP/2) while
        # the verifier thread works, and must reach the script whole.
        body = b"a=1&b=" + b"z" * 200000
        response = self.fetch("/admin/who.php", basic("amy", "amy-pass"),
                              "Content-Type: application/x-www-form-urlencoded",
                              method="POST", body=body)
        self.assertEqual(response.status, 200, response.body)
        data = json.loads(response.body)
        self.assertEqual((data["user"], data["body"]), ("amy", hashlib.md5(body).hexdigest()))

    def test_a_try_files_fallback_under_a_protected_prefix_asks_for_credentials(self):
        # nginx runs the access phase again after try_files' internal redirect:
        # an open path must not become a way into /admin/.
        host = "Host: fallback.test"
        self.assertEqual(self.fetch("/open.txt", host).body, b"open file\n")
        self.assert_challenged(self.fetch("/no/such/page", host))
        for _ in range(2):  # fay's first request goes to the verifier, then the cache
            response = self.fetch("/no/such/page", host, basic("fay", "fallback"))
            self.assertEqual((response.status, response.body), (200, b"secret page\n"))
        self.assert_challenged(self.fetch("/no/such/page", host, basic("fay", "nope")))

    def test_the_access_log_names_the_user(self):
        self.fetch("/admin/?log=right", basic("bob", "secret"))
        self.fetch("/admin/?log=wrong", basic("mallory", "x"))
        self.fetch("/?log=none")

        def lines():
            found = {}
            for line in self.server.access_lines():
                for tag in ("right", "wrong", "none"):
                    if "log=%s " % tag in line:
                        found[tag] = line
            return found if len(found) == 3 else None
        found = wait_until(self, lines, "three access log lines")
        self.assertRegex(found["right"], r'^127\.0\.0\.1 - bob \[.*" 200 ')
        self.assertRegex(found["wrong"], r'^127\.0\.0\.1 - mallory \[.*" 401 ')
        self.assertRegex(found["none"], r'^127\.0\.0\.1 - - \[.*" 200 ')


if __name__ == "__main__":
    harness.main()
