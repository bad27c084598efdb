"""What a script's answer or a configuration cannot make lepus serve (issues 31
and 32), over the protocol matrix.

- X-Accel-Redirect and X-Sendfile targets: "..", %-escaped separators, NUL
  and backslashes are refused (502, one error-log line), so that a script's
  answer cannot climb out of the internal folder; a target the site's scripts
  would run is refused rather than served as its source; a target under
  basic auth asks the client for its credentials as the path itself does.
- try_files: a candidate refused by --symlinks stays refused (403 and the
  warn line) instead of counting as missing and falling through.
- --symlinks owner: a link flipped between its owner's folder and root's while
  requests come never serves root's file (the owners checked are those of what
  is opened).
"""
import os
import subprocess
import threading
import time
import unittest
import urllib.parse

import harness
import phpfpm

GO = r"""<?php
if (isset($_GET['sendfile']))
    header('X-Sendfile: ' . $_GET['sendfile']);
else
    header('X-Accel-Redirect: ' . $_GET['to']);
header('Content-Type: text/plain');
echo "the script's own body\n";
"""

SOURCE_MARKER = b"source-of-info"


def wait_for(predicate, seconds=5):
    deadline = time.monotonic() + seconds  # the error log is written asynchronously
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def basic(user, password):
    import base64
    return "Authorization: Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


class XAccelTargets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.tmp = harness.temp_dir(cls, name="file-safety")
        cls.www = os.path.join(cls.tmp, "www")
        cls.files = os.path.join(cls.tmp, "files")
        os.makedirs(cls.files)
        with open(os.path.join(cls.files, "report.txt"), "w") as f:
            f.write("the report\n")
        passwords = os.path.join(cls.tmp, "htpasswd")
        subprocess.run(["htpasswd", "-cbB", "-C", "5", passwords, "bob", "secret"], check=True,
                       capture_output=True)
        config = os.path.join(cls.tmp, "lepus.toml")

        def write_config(address):
            with open(config, "w") as f:
                f.write('fastcgi = "%s"\n[[site]]\nroot = "%s"\nx_accel = "/protected/=%s"\n'
                        'auth = [{ paths = ["/secret/"], realm = "S", htpasswd = "%s" }]\n'
                        % (address, cls.www, cls.files, passwords))
            return ["--config", config]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=2, fastcgi=False,
                                                root=cls.www)
        cls.server.write("go.php", GO)
        cls.server.write("info.php", "<?php /* %s */ echo 'info ran';\n" % SOURCE_MARKER.decode())
        cls.server.write("public.txt", "public\n")
        cls.server.write("secret/s.txt", "password-protected\n")

    def redirect(self, to, headers=()):
        return self.server.fetch("/go.php?to=" + urllib.parse.quote(to, safe="/"),
                                 headers=list(headers))

    def sendfile(self, path):
        return self.server.fetch("/go.php?sendfile=" + urllib.parse.quote(path, safe="/"))

    def test_safe_targets_are_served(self):
        response = self.redirect("/protected/report.txt")
        self.assertEqual((response.status, response.body), (200, b"the report\n"))
        response = self.redirect("/public.txt")
        self.assertEqual((response.status, response.body), (200, b"public\n"))
        response = self.sendfile(os.path.join(self.files, "report.txt"))
        self.assertEqual((response.status, response.body), (200, b"the report\n"))
        self.assertEqual(self.server.fetch("/info.php").body, b"info ran")

    def test_unsafe_redirects_are_502_and_serve_nothing(self):
        for to in ("/protected/../info.php", "/protected/%2e%2e/info.php",
                   "/protected/..%2finfo.php", "/protected/%2F..%2Finfo.php",
                   "/protected/a/%2e./../../info.php", "/protected\\..\\info.php",
                   "/protected/%5c..%5cinfo.php", "/protected/report.txt%00.jpg",
                   "/protected/../secret/s.txt", "/protected/../public.txt"):
            with self.subTest(to=to):
                response = self.redirect(to)
                self.assertEqual(response.status, 502, response.body[:200])
                self.assertNotIn(SOURCE_MARKER, response.body)
                self.assertNotIn(b"password-protected", response.body)
        self.assertTrue(wait_for(lambda: "..%2finfo.php" in self.server.error_log_text()))
        lines = [l for l in self.server.error_log_text().splitlines() if "..%2finfo.php" in l]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("refused", lines[0])

    def test_x_sendfile_cannot_climb_out_of_the_folder(self):
        for path in (self.files + "/../info.php", self.files + "/../www/info.php",self.files + "/a/../../www/info.php",
                     self.files + "/..", self.files + "/x\\..\\y"):
            with self.subTest(path=path):
                response = self.sendfile(path)
                self.assertEqual(response.status, 502, response.body[:200])
                self.assertNotIn(SOURCE_MARKER, response.body)

    def test_a_script_is_never_served_as_its_source(self):
        for to in ("/info.php", "/info.php/extra", "/%69nfo.php", "/missing.php"):
            with self.subTest(to=to):
                response = self.redirect(to)
                self.assertEqual(response.status, 502, response.body[:200])
                self.assertNotIn(SOURCE_MARKER, response.body)

    def test_a_target_under_basic_auth_asks_for_credentials(self):
        self.assertEqual(self.server.fetch("/secret/s.txt").status, 401)
        response = self.redirect("/secret/s.txt")
        self.assertEqual(response.status, 401)
        self.assertNotIn(b"password-protected", response.body)
        self.assertEqual(self.redirect("/secret/s.txt", [basic("bob", "wrong")]).status, 401)
        # Right credentials: verified off the reactor (the first time), then served.
        response = self.redirect("/secret/s.txt", [basic("bob", "secret")])
        self.assertEqual((response.status, response.body), (200, b"password-protected\n"))
        self.assertTrue(response.header("content-type").startswith("text/plain"))  # the script's


class TryFilesKeepsRefusals(unittest.TestCase):
    """Debian's WordPress links wp-includes/js files to /usr/share/javascript."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.tmp = harness.temp_dir(name="try-files-links")
        cls.outside = os.path.join(cls.tmp, "javascript")
        os.makedirs(os.path.join(cls.outside, "underscore"))
        with open(os.path.join(cls.outside, "underscore", "underscore.min.js"), "w") as f:
            f.write("var _ = {};\n")
        cls.server = harness.Lepus(["--try-files", "$uri $uri/ /fallback.html"])
        cls.server.write("fallback.html", "the front controller's 404 page\n")
        cls.server.write("wp-includes/js/jquery.js", "var jQuery;\n")
        os.symlink(os.path.join(cls.outside, "underscore", "underscore.min.js"),
                   os.path.join(cls.server.root, "wp-includes/js/underscore.min.js"))
        os.symlink(os.path.join(cls.outside, "underscore"),
                   os.path.join(cls.server.root, "wp-includes/js/underscore"))

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop(harness.LepusTestCase._Checker())
        finally:
            harness.remove_temp_dir(cls.tmp)

    def test_a_refused_link_is_403_and_logged_not_the_fallback(self):
        for path in ("/wp-includes/js/underscore.min.js",
                     "/wp-includes/js/underscore/underscore.min.js",
                     "/wp-includes/js/underscore", "/wp-includes/js/underscore/"):
            with self.subTest(path=path):
                response = self.server.fetch(path)
                self.assertEqual(response.status, 403, response.body[:200])
                self.assertNotIn(b"front controller", response.body)
        path = "/wp-includes/js/underscore.min.js"
        self.assertTrue(wait_for(lambda: any(path in l and "--symlinks" in l for l in
                                             self.server.error_log_text().splitlines())))

    def test_files_and_missing_paths_are_as_before(self):
        response = self.server.fetch("/wp-includes/js/jquery.js")
        self.assertEqual((response.status, response.body), (200, b"var jQuery;\n"))
        response = self.server.fetch("/wp-admin/missing")
        self.assertEqual((response.status, response.body),
                         (200, b"the front controller's 404 page\n"))


class OwnerLinkRace(unittest.TestCase):
    """A user flips a link of theirs between their folder and root's while
    requests come. HTTP/1.1 only: the race is in the file layer (the open and
    the owner check), which every protocol reaches the same way."""

    FILES = 3000  # one file per request: each is a cache miss, so each is opened

    def setUp(self):
        if harness.PROTOCOL != "h1":
            self.skipTest("the race is in the file layer, the same under every protocol")
        if os.geteuid() != 0:
            self.skipTest("needs root to give files another owner")
        self.tmp = harness.temp_dir(self, "owner-race")
        self.mine = os.path.join(self.tmp, "mine")
        self.roots = os.path.join(self.tmp, "roots")
        for folder, text, uid in ((self.mine, "public\n", 65534), (self.roots, "SECRET\n", 0)):
            os.makedirs(folder)
            for i in range(self.FILES):
                path = os.path.join(folder, "f%d.txt" % i)
                with open(path, "w") as f:
                    f.write(text)
                os.chown(path, uid, uid)
            os.chown(folder, uid, uid)

    def test_a_flipped_link_never_serves_roots_file(self):
        import http.client
        server = harness.Lepus(["--symlinks", "owner"])
        self.addCleanup(server.stop, self)
        link = os.path.join(server.root, "user")
        spare = os.path.join(server.root, ".user-next")
        os.symlink(self.mine, link)
        os.lchown(link, 65534, 65534)
        stop = threading.Event()
        flips = [0]

        def flip():  # rename(2) replaces the link atomically, as a user can
            while not stop.is_set():
                target = self.roots if flips[0] % 2 == 0 else self.mine
                os.symlink(target, spare)
                os.lchown(spare, 65534, 65534)
                os.rename(spare, link)
                flips[0] += 1

        flipper = threading.Thread(target=flip)
        flipper.start()
        statuses = {}
        try:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            deadline = time.monotonic() + 20
            for i in range(self.FILES):
                if time.monotonic() > deadline:
                    break
                connection.request("GET", "/user/f%d.txt" % i)
                response = connection.getresponse()
                body = response.read()
                self.assertNotEqual(body, b"SECRET\n", "root's file served at request %d" % i)
                self.assertIn((response.status, body) if response.status == 200
                              else response.status, ((200, b"public\n"), 403))
                statuses[response.status] = statuses.get(response.status, 0) + 1
            connection.close()
        finally:
            stop.set()
            flipper.join()
        self.assertGreater(flips[0], 0)
        self.assertGreater(sum(statuses.values()), 0)


if __name__ == "__main__":
    harness.main()
