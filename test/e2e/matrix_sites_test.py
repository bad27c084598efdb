"""Sites and the router's rules in the protocol matrix (issue 31): the features
of sites_test.py, router_test.py and try_files_test.py over HTTP/1.1, HTTP/2
over TLS and h2c, every request through harness.Lepus.fetch() (the Host given
becomes :authority over HTTP/2).

Sites chosen by Host, each with its own root and backend; per-site header
rules on files, scripts, errors and every spelling of a path; error pages (a
static one with its status and content type, one for a backend that is down,
a PHP one run with the original status and as GET); SERVER_NAME the site's
name; a try_files front controller (pretty URLs, a form POST with its cookie,
a redirect, an upload, the app's own 404); the directory redirect; and
https_redirect, which sends plain requests to https and leaves requests on the
TLS listener alone (no redirect loop: that is the h2 row).

sites_test.py, router_test.py and try_files_test.py keep the HTTP/1.1-only
checks (pipelining, keep-alive after an error page, parser errors, logs and
reloads, --spa with a browser). Needs php-fpm."""
import hashlib
import json
import os
import shutil
import textwrap
import unittest

import harness
import phpfpm

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE_404 = b"<html><body>custom 404 of a.test</body></html>\n"
PAGE_405 = b"no such method here\n"
PAGE_502 = b"<p>the backend is having a rest</p>\n"
NOT_FOUND_SCRIPT = ("<?php echo 'script 404 for ', $_SERVER['REQUEST_URI'], ' via ',"
                    " $_SERVER['REQUEST_METHOD'];")


class MatrixSites(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="matrix-sites")
        files = {
            "a/index.html": "site a", "a/404.html": PAGE_404, "a/errors/405.txt": PAGE_405,
            "a/private/x": "secret file", "a/private/page.php": "<?php echo 'private page';",
            "a/docs/index.html": "<p>docs</p>\n",
            "b/index.html": "site b", "b/notfound.php": NOT_FOUND_SCRIPT,
            "down/x.php": "<?php echo 'never';", "down/502.html": PAGE_502,
            "app/style.css": "body { color: red }\n",
            "app/docs/index.html": "<p>docs</p>\n",
            "app/info.php": "<?php echo 'info ' . $_SERVER['SCRIPT_NAME'];\n",
        }
        for name, content in files.items():
            path = os.path.join(cls.dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content if isinstance(content, bytes) else content.encode())
        shutil.copy(os.path.join(HERE, "php", "env.php"), os.path.join(cls.dir, "a"))
        shutil.copy(os.path.join(HERE, "php", "env.php"), os.path.join(cls.dir, "b"))
        shutil.copy(os.path.join(HERE, "frontcontroller", "index.php"),
                    os.path.join(cls.dir, "app"))
        config = os.path.join(cls.dir, "lepus.toml")

        def write_config(address):
            with open(config, "w") as f:
                f.write(textwrap.dedent("""\
                    [[site]]
                    server_names = ["a.test", "www.a.test"]
                    root = "{d}/a"
                    fastcgi = "{fpm}"
                    error_page.404 = "/404.html"
                    error_page.405 = "/errors/405.txt"
                    headers = [ {{ match = "/private/", name = "X-Private", value = "yes" }},
                                {{ match = "*.php", name = "X-Script", value = "php" }} ]

                    [[site]]
                    server_names = ["b.test"]
                    root = "{d}/b"
                    fastcgi = "{fpm}"
                    error_page.404 = "/notfound.php"

                    [[site]]
                    server_names = ["down.test"]
                    root = "{d}/down"
                    fastcgi = "unix:{d}/nobody-listens-here.sock"
                    error_page.502 = "/502.html"

                    [[site]]
                    server_names = ["app.test"]
                    root = "{d}/app"
                    fastcgi = "{fpm}"
                    try_files = ["$uri", "$uri/", "/index.php?$query_string"]

                    [[site]]
                    server_names = ["secure.test"]
                    root = "{d}/a"
                    https_redirect = true
                    headers = [ {{ match = "*", name = "Strict-Transport-Security", value = "max-age=60" }} ]
                    """).format(d=cls.dir, fpm=address))
            return ["--config", config]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=4, fastcgi=False)

    def fetch(self, host, path, *headers, **kwargs):
        return self.server.fetch(path, headers=["Host: " + host] + list(headers), **kwargs)

    # --- sites by Host ------------------------------------------------------

    def test_each_host_gets_its_own_site(self):
        for host, body in (("a.test", b"site a"), ("www.a.test", b"site a"),
                           ("b.test", b"site b"), ("a.test:8080", b"site a")):
            response = self.fetch(host, "/")
            self.assertEqual((response.status, response.body), (200, body), host)

    def test_scripts_run_under_their_sites_root_with_its_name(self):
        for host, site in (("a.test", "a"), ("www.a.test", "a"), ("b.test", "b")):
            response = self.fetch(host, "/env.php")
            self.assertEqual(response.status, 200, response.body)
            env = json.loads(response.body)
            root = os.path.realpath(os.path.join(self.dir, site))
            self.assertEqual(env["DOCUMENT_ROOT"], root)
            self.assertEqual(env["SCRIPT_FILENAME"], os.path.join(root, "env.php"))
            # SERVER_NAME is the site's first name, never the client's Host.
            self.assertEqual(env["SERVER_NAME"], "a.test" if site == "a" else "b.test")

    # --- header rules -----------------------------------------------------------

    def test_header_rule_holds_on_every_spelling_of_the_path(self):
        for target in ("/private/x", "/%70rivate/x", "//private/x", "/./private/x",
                       "/other/../private/x"):
            response = self.fetch("a.test", target)
            self.assertEqual((response.status, response.body), (200, b"secret file"), target)
            self.assertEqual(response.header("x-private"), "yes", target)
        self.assertIsNone(self.fetch("a.test", "/index.html").header("x-private"))
        self.assertIsNone(self.fetch("b.test", "/index.html").header("x-private"))

    def test_header_rules_hold_on_php_responses_and_errors(self):
        response = self.fetch("a.test", "/private/page.php")
        self.assertEqual((response.status, response.body), (200, b"private page"))
        self.assertEqual(response.header("x-private"), "yes")
        self.assertEqual(response.header("x-script"), "php")
        response = self.fetch("a.test", "/private/missing")
        self.assertEqual(response.status, 404)
        self.assertEqual(response.header("x-private"), "yes")

    # --- error pages -------------------------------------------------------------

    def test_a_static_error_page_keeps_the_status(self):
        for headers in ((), ("Range: bytes=0-3", 'If-None-Match: "x"')):
            response = self.fetch("a.test", "/missing.html", *headers)
            self.assertEqual((response.status, response.body), (404, PAGE_404))
            self.assertTrue(response.header("content-type").startswith("text/html"))
            self.assertIsNone(response.header("etag"))
            self.assertIsNone(response.header("accept-ranges"))
        head = self.fetch("a.test", "/missing.html", method="HEAD")
        self.assertEqual((head.status, head.body), (404, b""))
        self.assertEqual(int(head.header("content-length")), len(PAGE_404))

    def test_a_405_page_keeps_allow_and_its_content_type(self):
        response = self.fetch("a.test", "/index.html", method="DELETE")
        self.assertEqual((response.status, response.body), (405, PAGE_405))
        self.assertTrue(response.header("content-type").startswith("text/plain"))
        self.assertIn("GET", response.header("allow"))
        # Another site keeps the built-in page.
        response = self.fetch("b.test", "/index.html", method="DELETE")
        self.assertEqual(response.status, 405)
        self.assertIn(b"405 Method Not Allowed", response.body)

    def test_a_down_backend_gets_the_sites_502_page(self):
        response = self.fetch("down.test", "/x.php")
        self.assertEqual((response.status, response.body), (502, PAGE_502))
        head = self.fetch("down.test", "/x.php", method="HEAD")
        self.assertEqual(head.status, 502)
        self.assertEqual(int(head.header("content-length")), len(PAGE_502))

    def test_a_script_error_page_runs_with_the_original_status_as_get(self):
        response = self.fetch("b.test", "/missing.html?q=1")
        self.assertEqual(response.status, 404)
        self.assertEqual(response.body, b"script 404 for /missing.html?q=1 via GET")
        response = self.fetch("b.test", "/missing.php", method="POST", body=b"abc")
        self.assertEqual(response.status, 404)
        self.assertEqual(response.body, b"script 404 for /missing.php via GET")

    # --- try_files front controller and redirects -------------------------------

    def test_a_pretty_url_reaches_the_front_controller(self):
        response = self.fetch("app.test", "/posts/42?sort=new&page=2")
        self.assertEqual(response.status, 200, response.body)
        data = json.loads(response.body)
        self.assertEqual((data["route"], data["id"]), ("post", 42))
        self.assertEqual(data["get"], {"sort": "new", "page": "2"})
        self.assertEqual(data["server"]["SCRIPT_NAME"], "/index.php")
        self.assertEqual(data["server"]["REQUEST_URI"], "/posts/42?sort=new&page=2")
        self.assertEqual(data["server"]["QUERY_STRING"], "sort=new&page=2")

    def test_files_and_scripts_that_exist_are_served_as_they_are(self):
        response = self.fetch("app.test", "/style.css")
        self.assertEqual((response.status, response.body), (200, b"body { color: red }\n"))
        self.assertIn("text/css", response.header("content-type"))
        self.assertEqual(self.fetch("app.test", "/info.php").body, b"info /info.php")
        response = self.fetch("app.test", "/no/such/page")
        self.assertEqual(response.status, 404)
        self.assertEqual(json.loads(response.body)["route"], "not found")

    def test_post_form_cookie_and_redirect_through_the_front_controller(self):
        response = self.fetch("app.test", "/login",
                              "Content-Type: application/x-www-form-urlencoded",
                              method="POST", body="user=ada&remember=1")
        self.assertEqual(response.status, 200, response.body)
        self.assertEqual(json.loads(response.body)["user"], "ada")
        cookie = response.header("set-cookie").split(";")[0]
        self.assertEqual(cookie, "session=user-ada")
        data = json.loads(self.fetch("app.test", "/whoami", "Cookie: " + cookie).body)
        self.assertEqual(data["session"], "user-ada")
        response = self.fetch("app.test", "/old-page")
        self.assertEqual((response.status, response.header("location")), (302, "/new-page"))

    def test_an_upload_reaches_the_front_controller_whole(self):
        content = os.urandom(200000)
        boundary = "lepusboundary7d93"
        body = (("--%s\r\nContent-Disposition: form-data; name=\"document\"; filename=\"a.bin\""
                 "\r\nContent-Type: application/octet-stream\r\n\r\n" % boundary).encode() +
                content + ("\r\n--%s--\r\n" % boundary).encode())
        response = self.fetch("app.test", "/upload",
                              "Content-Type: multipart/form-data; boundary=" + boundary,
                              method="POST", body=body)
        self.assertEqual(response.status, 200, response.body)
        data = json.loads(response.body)
        self.assertEqual((data["name"], data["size"]), ("a.bin", len(content)))
        self.assertEqual(data["md5"], hashlib.md5(content).hexdigest())

    def test_a_directory_without_its_slash_is_redirected_with_the_query(self):
        for host in ("a.test", "app.test"):
            response = self.fetch(host, "/docs?x=1")
            self.assertEqual(response.status, 301, host)
            self.assertTrue(response.header("location").endswith("/docs/?x=1"), host)
            self.assertEqual(self.fetch(host, "/docs/").body, b"<p>docs</p>\n")

    # --- https_redirect ------------------------------------------------------------

    def test_https_redirect_on_plain_requests_and_none_over_tls(self):
        response = self.fetch("secure.test:8080", "/private/x?a=1&b=2")
        self.assertEqual(response.header("strict-transport-security"), "max-age=60")
        if self.server.over_tls:
            # The request came over TLS (HTTP/2 over TLS, or HTTP/3) already: redirecting it would loop
            # (router.cc skips secure connections). The site is served as it is.
            self.assertEqual((response.status, response.body), (200, b"secret file"))
            return
        self.assertEqual(response.status, 301)
        self.assertEqual(response.header("location"), "https://secure.test/private/x?a=1&b=2")
        self.assertEqual(self.fetch("a.test", "/index.html").status, 200)


if __name__ == "__main__":
    harness.main()
