"""A location's own keys (issue 37): nginx's `location /x/ { proxy_pass ...;
add_header ...; auth_basic ...; limit_req ...; limit_conn ...; try_files ...; }`
as `locations = [{ path = "/x/", proxy = {...}, headers = [...], auth = {...},
limits = {...}, conn_limit = N, try_files = [...] }]` in a [[site]], every
request through harness.Lepus.fetch() over HTTP/1.1, HTTP/2 over TLS and h2c
(CMakeLists.txt's protocol_e2e).

- handler = "proxy": /api/ goes to a backend written for this test (Python's
  threaded http.server), its path unchanged, while the rest of the site is
  its files; a longer location with a root of its own wins under /api/.
- headers: added to the site's on every answer of the location, a proxied
  one and an error page included; a name both set is the location's.
- auth: a location asks for a password where the site asks none, and
  another opens a part of a site that asks one everywhere (auth_basic off).
- limits, conn_limit and access: a location's replace the site's for its paths.
- try_files: a location's replace the site's, among the location's own
  files when it has a root.
"""
import json
import os
import textwrap
import threading
import unittest

import harness
import http_backend
from auth_test import basic, htpasswd


class Handler(http_backend.Handler):
    def do_GET(self):
        if self.path.startswith("/api/hold"):
            # Held until the test lets it go (bounded): a request in progress.
            self.server.held.set()
            self.server.release.wait(20)
        body = json.dumps({"path": self.path, "host": self.headers.get("Host")}).encode()
        self.send_body(body, "application/json", [("X-Backend", "yes")])


class Backend(http_backend.HttpBackend):
    def __init__(self):
        self.held, self.release = threading.Event(), threading.Event()
        http_backend.HttpBackend.__init__(self, Handler)

    def stop(self):
        self.release.set()
        http_backend.HttpBackend.stop(self)


class MatrixLocations(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="matrix-locations")
        passwords = os.path.join(cls.dir, "htpasswd")
        htpasswd(passwords, "bob", "secret", create=True)
        files = {"www/index.html": "home\n", "www/admin/index.html": "admin\n",
                 "www/login": "login\n", "www/fallback.html": "site fallback\n",
                 "www/spa/shell.html": "spa shell\n", "www/heavy/a.txt": "heavy\n",
                 "www/heavy/free/a.txt": "free\n", "www/staff/a.txt": "staff\n",
                 "www/internal/a.txt": "internal\n", "www/internal/ok/a.txt": "ok\n",
                 "assets/a.css": "body{}\n", "apistatic/doc.txt": "api doc\n",
                 "app/index.html": "app shell\n", "app/real.txt": "real\n",
                 "closed/index.html": "closed\n", "closed/public/a.txt": "public\n"}
        for name, content in files.items():
            path = os.path.join(cls.dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(content)
        cls.backend = Backend()
        cls.addClassCleanup(cls.backend.stop)
        config = os.path.join(cls.dir, "lepus.toml")
        with open(config, "w") as f:
            f.write(textwrap.dedent("""\
                [[site]]
                server_names = ["open.test"]
                root = "{d}/www"
                headers = [{{ match = "*", name = "X-Site", value = "site" }},
                           {{ match = "*", name = "X-Frame-Options", value = "DENY" }}]
                try_files = ["$uri", "/fallback.html"]
                limits = [{{ paths = ["/heavy/"], rate = "1r/m", nodelay = true }}]
                access = [{{ paths = ["/internal/"], deny = ["0.0.0.0/0", "::/0"] }}]
                redirects = [{{ from = "/latest", to = "/app/real.txt", rewrite = true }},
                             {{ from = "/go-admin", to = "/admin/index.html", rewrite = true }}]
                locations = [
                  {{ path = "/api/", proxy = {{ address = "{backend}" }}, conn_limit = 1, headers = [{{ name = "X-Api", value = "1" }}] }},
                  {{ path = "/api/static/", root = "{d}/apistatic" }},
                  {{ path = "/assets/", root = "{d}/assets", headers = [{{ name = "X-Frame-Options", value = "SAMEORIGIN" }}, {{ match = "*.css", name = "Cache-Control", value = "max-age=60" }}] }},
                  {{ path = "/admin/", auth = {{ realm = "Admin", htpasswd = "{pw}" }} }},
                  {{ path = "/login", exact = true, limits = {{ rate = "1r/m", nodelay = true }} }},
                  {{ path = "/heavy/free/", limits = [{{ rate = "100r/s", burst = 100 }}] }},
                  {{ path = "/app/", root = "{d}/app", try_files = ["$uri", "/app/index.html"] }},
                  {{ path = "/spa/", try_files = ["$uri", "/spa/shell.html"] }},
                  {{ path = "/staff/", access = {{ allow = ["10.0.0.0/8"], deny = ["0.0.0.0/0", "::/0"] }} }},
                  {{ path = "/internal/ok/", access = {{ allow = ["127.0.0.0/8", "::1"] }} }},
                ]

                [[site]]
                server_names = ["closed.test"]
                root = "{d}/closed"
                auth = [{{ paths = ["/"], realm = "Closed", htpasswd = "{pw}" }}]
                locations = [{{ path = "/public/", auth = {{ off = true }} }}]
                """).format(d=cls.dir, pw=passwords, backend=cls.backend.address))
        cls.server = harness.Lepus(["--config", config])
        cls.addClassCleanup(cls.server.stop)

    def fetch(self, host, path, *headers, **kwargs):
        return self.server.fetch(path, headers=["Host: " + host] + list(headers), **kwargs)

    def assert_body(self, host, path, status, body, *headers):
        response = self.fetch(host, path, *headers)
        self.assertEqual((response.status, response.body), (status, body), path)
        return response

    # --- handler = "proxy" ------------------------------------------------------

    def test_a_proxy_location_goes_to_its_backend_and_the_rest_is_files(self):
        response = self.fetch("open.test", "/api/users/7?x=1")
        self.assertEqual(response.status, 200, response.body)
        self.assertEqual(response.header("x-backend"), "yes")
        answer = json.loads(response.body)
        self.assertEqual(answer["path"], "/api/users/7?x=1")  # the path unchanged
        self.assertEqual(answer["host"], "open.test")
        self.assert_body("open.test", "/index.html", 200, b"home\n")
        # The longest prefix: a location with a root under the proxied one.
        response = self.assert_body("open.test", "/api/static/doc.txt", 200, b"api doc\n")
        self.assertIsNone(response.header("x-backend"))

    # --- headers ------------------------------------------------------------------

    def test_a_location_adds_its_headers_to_the_sites(self):
        response = self.assert_body("open.test", "/assets/a.css", 200, b"body{}\n")
        self.assertEqual(response.header("cache-control"), "max-age=60")
        self.assertEqual(response.header("x-site"), "site")
        # A name both set: the location's alone.
        self.assertEqual(response.header("x-frame-options"), "SAMEORIGIN")
        frame_options = [line for line in response.header_lines
                         if line.lower().startswith("x-frame-options:")]
        self.assertEqual(len(frame_options), 1, response.header_lines)
        # Outside the location: the site's only.
        response = self.assert_body("open.test", "/index.html", 200, b"home\n")
        self.assertEqual(response.header("x-frame-options"), "DENY")
        self.assertIsNone(response.header("cache-control"))

    def test_a_locations_headers_go_on_its_errors_and_its_backends_answers(self):
        response = self.fetch("open.test", "/assets/missing.css")
        self.assertEqual(response.status, 404)
        self.assertEqual(response.header("cache-control"), "max-age=60")
        self.assertEqual(response.header("x-frame-options"), "SAMEORIGIN")
        response = self.fetch("open.test", "/api/x")
        self.assertEqual((response.status, response.header("x-api")), (200, "1"))
        self.assertEqual(response.header("x-site"), "site")

    # --- auth ---------------------------------------------------------------------

    def test_a_location_asks_a_password_where_the_site_does_not(self):
        response = self.fetch("open.test", "/admin/")
        self.assertEqual(response.status, 401)
        self.assertEqual(response.header("www-authenticate"),
                         'Basic realm="Admin", charset="UTF-8"')
        # The decoded path is the location's too.
        self.assertEqual(self.fetch("open.test", "/%61dmin/").status, 401)
        self.assertEqual(self.fetch("open.test", "/admin/", basic("bob", "wrong")).status, 401)
        # The file: the site's try_files "$uri" is a file test (nginx's), so
        # "/admin/" itself would go to its fallback.
        self.assert_body("open.test", "/admin/index.html", 200, b"admin\n",
                         basic("bob", "secret"))
        self.assert_body("open.test", "/index.html", 200, b"home\n")

    def test_a_location_opens_a_part_of_a_closed_site(self):
        response = self.fetch("closed.test", "/index.html")
        self.assertEqual(response.status, 401)
        self.assertIn('realm="Closed"', response.header("www-authenticate"))
        self.assert_body("closed.test", "/public/a.txt", 200, b"public\n")
        self.assert_body("closed.test", "/index.html", 200, b"closed\n", basic("bob", "secret"))

    # --- limits and conn_limit ----------------------------------------------------

    def test_a_locations_rate_limit(self):
        self.assert_body("open.test", "/login", 200, b"login\n")
        response = self.fetch("open.test", "/login")
        self.assertEqual(response.status, 429)
        self.assertIsNotNone(response.header("retry-after"))
        # Only the location's path is limited.
        for _ in range(5):
            self.assert_body("open.test", "/index.html", 200, b"home\n")

    def test_a_locations_limits_replace_the_sites(self):
        self.assert_body("open.test", "/heavy/a.txt", 200, b"heavy\n")
        self.assertEqual(self.fetch("open.test", "/heavy/a.txt").status, 429)
        # Under the site's rule's prefix, but the location's own rule applies.
        for _ in range(5):
            self.assert_body("open.test", "/heavy/free/a.txt", 200, b"free\n")

    def test_a_locations_conn_limit(self):
        backend = self.backend
        backend.held.clear()
        backend.release.clear()
        first = {}

        def held_request():
            first["response"] = self.fetch("open.test", "/api/hold")

        thread = threading.Thread(target=held_request)
        thread.start()
        try:
            self.assertTrue(backend.held.wait(20), "the first request never reached the backend")
            # One request of this client in progress in the location: the next waits no slot.
            response = self.fetch("open.test", "/api/other")
            self.assertEqual(response.status, 503)
            self.assertEqual(response.header("retry-after"), "1")
            # Outside the location: no limit.
            self.assert_body("open.test", "/index.html", 200, b"home\n")
        finally:
            backend.release.set()
            thread.join(30)
        self.assertEqual(first["response"].status, 200)
        self.assertEqual(self.fetch("open.test", "/api/again").status, 200)

    def test_a_locations_access_rules_replace_the_sites(self):
        self.assertEqual(self.fetch("open.test", "/staff/a.txt").status, 403)
        self.assertEqual(self.fetch("open.test", "/internal/a.txt").status, 403)
        self.assert_body("open.test", "/internal/ok/a.txt", 200, b"ok\n")

    # --- try_files ------------------------------------------------------------------

    def test_a_location_with_a_root_tries_its_own_files(self):
        self.assert_body("open.test", "/app/real.txt", 200, b"real\n")
        self.assert_body("open.test", "/app/some/route", 200, b"app shell\n")
        # Elsewhere the site's own try_files.
        self.assert_body("open.test", "/nothing/here", 200, b"site fallback\n")

    def test_a_rewrite_into_a_location_is_the_locations(self):
        # Served from the location's root, and asking the location's password.
        self.assert_body("open.test", "/latest", 200, b"real\n")
        self.assertEqual(self.fetch("open.test", "/go-admin").status, 401)
        self.assert_body("open.test", "/go-admin", 200, b"admin\n", basic("bob", "secret"))

    def test_a_location_without_a_root_replaces_the_sites_try_files(self):
        self.assert_body("open.test", "/spa/deep/link", 200, b"spa shell\n")
        self.assert_body("open.test", "/spa/shell.html", 200, b"spa shell\n")


if __name__ == "__main__":
    harness.main()
