"""Migrating from nginx (issue 37) in the protocol matrix: what an nginx
config does that lepus now does too, every request through
harness.Lepus.fetch() over HTTP/1.1, HTTP/2 over TLS and h2c, in front of a
real php-fpm.

fastcgi_params (nginx's fastcgi_param): the global table and a site's own on
top of it, seen by PHP in $_SERVER (SERVER_SOFTWARE = "nginx" is what
WordPress asks before it offers pretty permalinks).

redirects beyond exact paths (nginx's return and rewrite): prefix redirects
keep the rest of the path and the query, pattern redirects (PCRE2) fill $1..$9
percent-encoded (a capture with CR LF cannot add a header), the first rule
that matches wins, and `rewrite = true` serves a front controller or a file
in place of the path, method and body kept.

locations with their own root (nginx's alias): the path below the prefix is
a file of the location's root (uploads served where a front controller
would answer 404), the longest prefix wins and an exact location wins over
prefixes, a prefix takes whole segments, a directory's 301 keeps the prefix,
a script under a static location is refused (403, never its source), a link
out of the root is refused, and handler = "fastcgi" runs scripts with the
location's root as DOCUMENT_ROOT.

access_log_format: a text with nginx's variables at the top level (the
protocol, TLS version and backend time as each row has them) and "json" for
one site, one object per line that parses whatever the client sent.

migrating_config_test.py keeps what is not about requests (includes, -t,
reload, the guide's keys). Needs php-fpm."""
import json
import os
import time
import shutil
import textwrap
import unittest

import harness
import phpfpm

HERE = os.path.dirname(os.path.abspath(__file__))


class MatrixMigrating(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="matrix-migrating")
        for site in ("wp", "plain", "r", "approot"):
            os.makedirs(os.path.join(cls.dir, site))
            shutil.copy(os.path.join(HERE, "php", "env.php"), os.path.join(cls.dir, site))
        files = {"content/uploads/2024/a.jpg": "jpeg bytes", "content/plugins/p/x.php":
                 "<?php echo 'ran';", "special/b.txt": "special b",
                 "robots/robots.txt": "User-agent: *", "robots/other.txt": "other",
                 "secret.txt": "secret", "wp/wp-contentx": "not a location"}
        for name, content in files.items():
            path = os.path.join(cls.dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(content)
        os.symlink(os.path.join(cls.dir, "secret.txt"),
                   os.path.join(cls.dir, "content", "uploads", "escape.txt"))
        config = os.path.join(cls.dir, "lepus.toml")

        def write_config(address):
            with open(config, "w") as f:
                f.write(textwrap.dedent("""\
                    fastcgi = "{fpm}"
                    fastcgi_params = {{ APP_ENV = "prod", APP_REGION = "eu" }}
                    access_log_format = '$remote_addr $host "$request" $status $body_bytes_sent $request_time $upstream_response_time "$http_user_agent" [$ssl_protocol] [$http2] $scheme'

                    [[site]]
                    server_names = ["wp.test"]
                    root = "{d}/wp"
                    fastcgi_params = {{ SERVER_SOFTWARE = "nginx", APP_ENV = "staging", HTTP_HOST = "canonical.test" }}

                    [[site]]
                    server_names = ["plain.test"]
                    root = "{d}/plain"
                    access_log_format = "json"

                    [[site]]
                    server_names = ["r.test"]
                    root = "{d}/r"
                    redirects = [
                      {{ from = "/exact", to = "https://example.test/", status = 302 }},
                      {{ from = "/old/", to = "/new/", prefix = true }},
                      {{ pattern = '^/blog/(\d+)/(.*)$', to = "/posts/$1/$2", status = 308 }},
                      {{ pattern = '^/tag/([a-z]+)$', to = "/search?tag=$1", status = 307 }},
                      {{ pattern = '^/raw/([^/]+)$', to = "/cooked/$1" }},
                      {{ from = "/latest", to = "/v2.txt", rewrite = true }},
                      {{ pattern = '^/app/(.*)$', to = "/env.php?route=$1", rewrite = true }},
                      {{ pattern = '^/app', to = "/never-reached" }},
                    ]

                    [[site]]
                    server_names = ["loc.test"]
                    root = "{d}/wp"
                    try_files = ["$uri", "$uri/", "/env.php?$query_string"]
                    locations = [
                      {{ path = "/wp-content/", root = "{d}/content" }},
                      {{ path = "/wp-content/special", root = "{d}/special" }},
                      {{ path = "/robots.txt", exact = true, root = "{d}/robots" }},
                      {{ path = "/app/", root = "{d}/approot", handler = "fastcgi" }},
                    ]
                    """).format(d=cls.dir, fpm=address))
            return ["--config", config]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=4, fastcgi=False)
        with open(os.path.join(cls.dir, "r", "v2.txt"), "w") as f:
            f.write("version 2\n")

    def fetch(self, host, path, *headers, **kwargs):
        return self.server.fetch(path, headers=["Host: " + host] + list(headers), **kwargs)

    def env(self, host, path="/env.php"):
        response = self.fetch(host, path)
        self.assertEqual(response.status, 200, response.body)
        return json.loads(response.body)

    # --- fastcgi_params -------------------------------------------------------

    def test_a_site_overrides_server_software_and_the_global_parameters(self):
        env = self.env("wp.test")
        self.assertEqual(env["SERVER_SOFTWARE"], "nginx")
        self.assertEqual(env["APP_ENV"], "staging")  # the site's wins over the global
        self.assertEqual(env["APP_REGION"], "eu")    # the global one is kept
        self.assertEqual(env["HTTP_HOST"], "canonical.test")
        self.assertEqual(env["SCRIPT_NAME"], "/env.php")  # the others are untouched

    def test_a_site_without_its_own_gets_the_global_parameters(self):
        env = self.env("plain.test")
        self.assertTrue(env["SERVER_SOFTWARE"].startswith("lepus/"), env["SERVER_SOFTWARE"])
        self.assertEqual(env["APP_ENV"], "prod")
        self.assertEqual(env["APP_REGION"], "eu")
        self.assertEqual(env["HTTP_HOST"], "plain.test")


    # --- redirects and rewrites -----------------------------------------------

    def assert_redirect(self, path, status, location):
        response = self.fetch("r.test", path)
        self.assertEqual((response.status, response.header("location")), (status, location), path)
        return response

    def test_an_exact_redirect_is_unchanged(self):
        self.assert_redirect("/exact", 302, "https://example.test/")
        self.assert_redirect("/exact?q=1", 302, "https://example.test/")
        self.assertEqual(self.fetch("r.test", "/exact/more").status, 404)

    def test_a_prefix_redirect_keeps_the_rest_of_the_path_and_the_query(self):
        self.assert_redirect("/old/a?b", 301, "/new/a?b")
        self.assert_redirect("/old/", 301, "/new/")
        self.assert_redirect("/old/d%20e/f.html", 301, "/new/d%20e/f.html")
        self.assertEqual(self.fetch("r.test", "/old").status, 404)  # not under the prefix

    def test_a_pattern_redirect_fills_its_captures(self):
        self.assert_redirect("/blog/2024/hello", 308, "/posts/2024/hello")
        self.assert_redirect("/blog/7/a/b?x=1", 308, "/posts/7/a/b?x=1")
        self.assert_redirect("/tag/news", 307, "/search?tag=news")
        self.assert_redirect("/tag/news?page=2", 307, "/search?tag=news&page=2")
        self.assertEqual(self.fetch("r.test", "/blog/x/hello").status, 404)  # \d+ needs digits

    def test_a_capture_cannot_add_a_header(self):
        # ('.' stops at a newline, as in nginx: [^/] takes it.)
        response = self.assert_redirect("/raw/a%0d%0aSet-Cookie:%20x=1", 301,
                                        "/cooked/a%0D%0ASet-Cookie%3A%20x=1")
        self.assertNotIn("set-cookie", response.headers)

    def test_a_rewrite_serves_a_file_in_place_of_the_path(self):
        response = self.fetch("r.test", "/latest")
        self.assertEqual((response.status, response.body), (200, b"version 2\n"))
        self.assertIsNone(response.header("location"))

    def test_a_rewrite_runs_a_front_controller_with_the_method_and_body(self):
        env = self.env("r.test", "/app/users/42?page=2")
        self.assertEqual(env["SCRIPT_NAME"], "/env.php")
        self.assertEqual(env["QUERY_STRING"], "route=users/42&page=2")
        self.assertEqual(env["REQUEST_URI"], "/app/users/42?page=2")  # the client's, as nginx
        response = self.fetch("r.test", "/app/form", "Content-Type: text/plain",
                              method="POST", body=b"hello")
        self.assertEqual(response.status, 200, response.body)
        env = json.loads(response.body)
        self.assertEqual((env["REQUEST_METHOD"], env["CONTENT_LENGTH"]), ("POST", "5"))


    # --- locations ---------------------------------------------------------------

    def assert_body(self, path, status, body):
        response = self.fetch("loc.test", path)
        self.assertEqual((response.status, response.body), (status, body), path)
        return response

    def test_a_location_serves_files_of_its_own_root(self):
        response = self.assert_body("/wp-content/uploads/2024/a.jpg", 200, b"jpeg bytes")
        self.assertEqual(response.header("content-type"), "image/jpeg")
        # %-encoded and dot segments are the same path to the location.
        self.assert_body("/wp-content/uploads/%32024/./a.jpg", 200, b"jpeg bytes")
        self.assert_body("/wp-content/uploads/x/../2024/a.jpg", 200, b"jpeg bytes")

    def test_a_missing_file_under_a_location_is_a_404_not_the_front_controller(self):
        response = self.fetch("loc.test", "/wp-content/uploads/none.jpg")
        self.assertEqual(response.status, 404)
        # Outside the locations the site's try_files still runs its script.
        env = self.env("loc.test", "/some/pretty/permalink")
        self.assertEqual(env["SCRIPT_NAME"], "/env.php")

    def test_the_longest_prefix_then_exact_and_whole_segments(self):
        self.assert_body("/wp-content/special/b.txt", 200, b"special b")
        self.assert_body("/robots.txt", 200, b"User-agent: *")
        # Not the exact path: the site's own try_files (its front controller).
        self.assertEqual(json.loads(self.fetch("loc.test", "/robots.txt/x").body)["SCRIPT_NAME"],
                         "/env.php")
        self.assert_body("/wp-contentx", 200, b"not a location")

    def test_a_directory_redirect_keeps_the_prefix(self):
        response = self.fetch("loc.test", "/wp-content/uploads/2024?a=1")
        self.assertEqual(response.status, 301)
        self.assertEqual(response.header("location"), "/wp-content/uploads/2024/?a=1")

    def test_a_script_under_a_static_location_is_refused(self):
        response = self.fetch("loc.test", "/wp-content/plugins/p/x.php")
        self.assertEqual(response.status, 403)
        self.assertNotIn(b"<?php", response.body)

    def test_a_link_out_of_the_location_root_is_refused(self):
        response = self.fetch("loc.test", "/wp-content/uploads/escape.txt")
        self.assertIn(response.status, (403, 404))
        self.assertNotIn(b"secret", response.body)
        # Normalised to /secret.txt, which is not in a location (the front controller's).
        response = self.fetch("loc.test", "/wp-content/../secret.txt")
        self.assertEqual(json.loads(response.body)["SCRIPT_NAME"], "/env.php")

    def test_a_fastcgi_location_runs_scripts_of_its_root(self):
        env = self.env("loc.test", "/app/env.php/extra?x=1")
        root = os.path.realpath(os.path.join(self.dir, "approot"))
        self.assertEqual(env["DOCUMENT_ROOT"], root)
        self.assertEqual(env["SCRIPT_FILENAME"], os.path.join(root, "env.php"))
        self.assertEqual(env["SCRIPT_NAME"], "/app/env.php")
        self.assertEqual(env["PATH_INFO"], "/extra")
        self.assertEqual(env["REQUEST_URI"], "/app/env.php/extra?x=1")
        self.assertEqual(env["APP_REGION"], "eu")  # the site's parameters


    # --- access_log_format ---------------------------------------------------------

    def log_line(self, needle):
        # Lines are written by the log thread: wait for this request's.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = [line for line in self.server.access_lines() if needle in line]
            if found:
                return found[-1]
            time.sleep(0.05)
        self.fail("no access line with %r" % needle)

    def row(self):
        protocol = self.server.protocol
        return {"h1": ("HTTP/1.1", "", "", "http"), "h2": ("HTTP/2.0", "TLSv1.3", "h2", "https"),
                "h2c": ("HTTP/2.0", "", "h2c", "http"),
                # nginx's $http2 is empty over HTTP/3 (it has $http3 for that);
                # QUIC's handshake is TLS 1.3.
                "h3": ("HTTP/3.0", "TLSv1.3", "", "https")}[protocol]

    def test_a_format_text_names_nginx_variables(self):
        version, tls, http2, scheme = self.row()
        self.fetch("loc.test:8080", "/wp-content/uploads/2024/a.jpg?fmt=1", "User-Agent: ua/1")
        line = self.log_line("a.jpg?fmt=1")
        self.assertRegex(line, r'^127\.0\.0\.1 loc\.test "GET /wp-content/uploads/2024/a\.jpg\?fmt=1 '
                         + version.replace(".", r"\.") + r'" 200 10 \d+\.\d{3} - "ua/1" '
                         r'\[%s\] \[%s\] %s$' % (tls.replace(".", r"\.") or "-", http2, scheme))
        # A script's line has its backend time.
        self.env("wp.test", "/env.php?fmt=2")
        line = self.log_line("env.php?fmt=2")
        self.assertRegex(line, r'" 200 \d+ \d+\.\d{3} \d+\.\d{3} "')

    def test_json_lines_parse_whatever_the_client_sent(self):
        version, tls, http2, scheme = self.row()
        self.fetch("plain.test", "/nothing%C3%A9?json=1", 'User-Agent: a "quoted" \\ agent')
        record = json.loads(self.log_line("json=1"))
        self.assertEqual(record["status"], 404)
        self.assertEqual(record["uri"], "/nothing%C3%A9?json=1")
        self.assertEqual(record["protocol"], version)
        self.assertEqual(record["host"], "plain.test")
        self.assertEqual(record["user_agent"], 'a "quoted" \\ agent')
        self.assertEqual(record["upstream_response_time"], "-")
        self.assertIsInstance(record["request_time"], float)
        self.assertEqual((record["scheme"], record["http2"]), (scheme, http2))
        self.assertRegex(record["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$")


if __name__ == "__main__":
    harness.main()
