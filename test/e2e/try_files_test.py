"""try_files and --spa end to end (issue 18): a front controller written for the
test (routes from REQUEST_URI, a POST form, cookies, a redirect, an upload) run
by a real php-fpm behind `--try-files '$uri $uri/ /index.php?$query_string'`;
a single-page application fixture behind --spa; `=404` and `$uri.html`
candidates; per-site try_files from the config file; the confinement of the
files still holding; and the one-line refusals of bad candidates."""
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import unittest

import harness
import phpfpm

HERE = os.path.dirname(os.path.abspath(__file__))
FRONT = "$uri $uri/ /index.php?$query_string"


def fetch(server, method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


class FrontController(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
        cls.fpm, cls.server = phpfpm.start_site(cls, ["--try-files", FRONT], children=4)
        shutil.copy(os.path.join(HERE, "frontcontroller", "index.php"), cls.server.root)
        cls.server.write("style.css", "body { color: red }\n")
        cls.server.write("info.php", "<?php echo 'info ' . $_SERVER['SCRIPT_NAME'];\n")
        cls.server.write("docs/index.html", "<p>docs</p>\n")

    def test_a_pretty_url_reaches_the_front_controller_with_nginx_variables(self):
        status, _, body = fetch(self.server, "GET", "/posts/42?sort=new&page=2")
        self.assertEqual(status, 200, body)
        data = json.loads(body)
        self.assertEqual((data["route"], data["id"]), ("post", 42))
        self.assertEqual(data["get"], {"sort": "new", "page": "2"})
        server = data["server"]
        self.assertEqual(server["SCRIPT_NAME"], "/index.php")
        self.assertEqual(server["SCRIPT_FILENAME"],
                         os.path.realpath(os.path.join(self.server.root, "index.php")))
        self.assertEqual(server["REQUEST_URI"], "/posts/42?sort=new&page=2")
        self.assertEqual(server["QUERY_STRING"], "sort=new&page=2")
        self.assertIsNone(server["PATH_INFO"])  # nginx gives none with try_files alone

    def test_files_and_scripts_that_exist_are_served_as_they_are(self):
        status, headers, body = fetch(self.server, "GET", "/style.css")
        self.assertEqual((status, body), (200, b"body { color: red }\n"))
        self.assertIn("text/css", headers["Content-Type"])
        self.assertEqual(fetch(self.server, "GET", "/info.php")[2], b"info /info.php")
        self.assertEqual(fetch(self.server, "GET", "/docs/")[2], b"<p>docs</p>\n")
        # A directory without its slash gets the usual redirect to it.
        status, headers, _ = fetch(self.server, "GET", "/docs")
        self.assertEqual((status, headers.get("Location")), (301, "/docs/"))

    def test_post_form_cookie_and_redirect(self):
        status, headers, body = fetch(
            self.server, "POST", "/login", body="user=ada&remember=1",
            headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["user"], "ada")
        cookie = headers["Set-Cookie"].split(";")[0]
        self.assertEqual(cookie, "session=user-ada")
        data = json.loads(fetch(self.server, "GET", "/whoami", headers={"Cookie": cookie})[2])
        self.assertEqual(data["session"], "user-ada")
        status, headers, _ = fetch(self.server, "GET", "/old-page")
        self.assertEqual((status, headers["Location"]), (302, "/new-page"))

    def test_upload_reaches_the_script_whole(self):
        content = os.urandom(200000)
        boundary = "lepusboundary7d93"
        body = (("--%s\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a.bin\""
                 "\r\nContent-Type: application/octet-stream\r\n\r\n" % boundary).encode() +
                content + ("\r\n--%s--\r\n" % boundary).encode())
        status, _, reply = fetch(self.server, "POST", "/upload", body=body,
                                 headers={"Content-Type": "multipart/form-data; boundary=" +
                                          boundary})
        self.assertEqual(status, 200, reply)
        data = json.loads(reply)
        self.assertEqual((data["name"], data["size"]), ("a.bin", len(content)))
        self.assertEqual(data["md5"], hashlib.md5(content).hexdigest())

    def test_the_app_answers_its_own_404(self):
        status, _, body = fetch(self.server, "GET", "/no/such/page")
        self.assertEqual(status, 404)
        self.assertEqual(json.loads(body)["route"], "not found")

    def test_paths_outside_the_root_never_leave_it(self):
        for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/.git/config"):
            status, _, body = fetch(self.server, "GET", path)
            self.assertNotIn(b"root:", body, path)
            self.assertIn(status, (400, 404), path)


class SinglePageApplication(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.server = harness.Lepus(["--spa"])
        shutil.copytree(os.path.join(HERE, "spa"), cls.server.root, dirs_exist_ok=True)
        with open(os.path.join(HERE, "spa", "index.html"), "rb") as f:
            cls.index = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def test_deep_links_get_the_app_and_assets_stay_assets(self):
        for path in ("/", "/settings/profile", "/a/b/c?tab=2"):
            status, headers, body = fetch(self.server, "GET", path)
            self.assertEqual((status, body), (200, self.index), path)
            self.assertIn("text/html", headers["Content-Type"])
        status, headers, body = fetch(self.server, "GET", "/assets/app.js")
        self.assertEqual(status, 200)
        self.assertIn(b"client-side router", body)
        self.assertIn("javascript", headers["Content-Type"])

    def test_head_and_conditional_requests_on_the_fallback(self):
        status, headers, body = fetch(self.server, "HEAD", "/deep/link")
        self.assertEqual((status, body), (200, b""))
        etag = headers["ETag"]
        status, _, _ = fetch(self.server, "GET", "/other/link", headers={"If-None-Match": etag})
        self.assertEqual(status, 304)

    @unittest.skipUnless(shutil.which("chromium"), "chromium missing")
    def test_chromium_renders_a_deep_link(self):
        url = "http://127.0.0.1:%d/settings/profile" % self.server.port
        done = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
                               "--dump-dom", url], capture_output=True, text=True, timeout=60)
        self.assertIn("route /settings/profile: profile page", done.stdout, done.stderr[-2000:])


class OtherCandidates(unittest.TestCase):
    def start(self, args):
        server = harness.Lepus(args)
        self.addCleanup(server.stop, self)
        return server

    def test_status_fallback_and_uri_suffix(self):
        server = self.start(["--try-files", "$uri", "--try-files", "$uri.html", "--try-files",
                             "=404"])
        server.write("about.html", "about us\n")
        server.write("plain.txt", "plain\n")
        self.assertEqual(server.get("/about").body, b"about us\n")
        self.assertEqual(server.get("/plain.txt").body, b"plain\n")
        self.assertEqual(server.get("/nothing").status, 404)

    def test_per_site_try_files_in_the_config_file(self):
        config = os.path.join(harness.temp_dir(self), "lepus.toml")
        app = harness.temp_dir(self, "app")
        other = harness.temp_dir(self, "other")
        with open(os.path.join(app, "index.html"), "w") as f:
            f.write("app shell\n")
        with open(config, "w") as f:
            f.write('[[site]]\nserver_names = ["app.test"]\nroot = "%s"\nspa = true\n\n'
                    '[[site]]\nserver_names = ["other.test"]\nroot = "%s"\n' % (app, other))
        server = self.start(["--config", config])
        status, _, body = fetch(server, "GET", "/deep", headers={"Host": "app.test"})
        self.assertEqual((status, body), (200, b"app shell\n"))
        self.assertEqual(fetch(server, "GET", "/deep", headers={"Host": "other.test"})[0], 404)

    def test_bad_candidates_are_one_line_and_exit_2(self):
        root = harness.temp_dir(self)
        cases = [(["--try-files", "$uri"], "at least two"),
                 (["--try-files", "$uri =404 /index.php"], "can only come last"),
                 (["--try-files", "$uri index.php"], "must start with / or $uri"),
                 (["--try-files", "$uri =99"], "=CODE"),
                 (["--spa", "--try-files", "$uri =404"], "give one")]
        for args, message in cases:
            done = subprocess.run([harness.BINARY, root] + args, capture_output=True, text=True,
                                  timeout=10)
            self.assertEqual(done.returncode, 2, args)
            self.assertIn(message, done.stderr, args)
            self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)


if __name__ == "__main__":
    harness.main()
