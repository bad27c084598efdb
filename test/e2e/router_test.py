"""The router's rules end to end (issue 13): site rules are applied once, up
front, whatever the handler.

- An error_page that names a script runs it through php-fpm, with the
  original status (nginx's internal redirect), instead of serving its source.
- Header rules hold on the decoded, normalised path ("/%70rivate/x",
  "//private/x", "/./private/x" are "/private/x") and on PHP responses too.
- SERVER_NAME is the matched site's name, never the client's Host or target.

Needs php-fpm (apt-get install php-fpm)."""
import json
import os
import shutil
import subprocess
import textwrap
import unittest

import harness
import phpfpm

PHP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "php")


def write_file(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())


class Router(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not harness.BINARY:
            raise AssertionError("LEPUS_BINARY is not set")
        if not phpfpm.find_php_fpm():
            raise AssertionError("php-fpm is needed (apt-get install php-fpm)")
        cls.dir = harness.temp_dir(cls, name="router")
        root = os.path.join(cls.dir, "site")
        write_file(os.path.join(root, "index.html"), "home")
        write_file(os.path.join(root, "private", "x"), "secret file")
        write_file(os.path.join(root, "private", "page.php"), "<?php echo 'private page';")
        write_file(os.path.join(root, "notfound.php"),
                   "<?php echo 'script 404 for ', $_SERVER['REQUEST_URI'], ' via ', "
                   "$_SERVER['REQUEST_METHOD'];")
        shutil.copy(os.path.join(PHP_DIR, "env.php"), os.path.join(root, "env.php"))
        config = os.path.join(cls.dir, "lepus.toml")

        def write_config(address):
            with open(config, "w") as f:
                f.write(textwrap.dedent("""\
                [[site]]
                server_names = ["a.test", "www.a.test"]
                root = "{root}"
                fastcgi = {{ address = "{fpm}" }}
                error_page.404 = "/notfound.php"
                headers = [ {{ match = "/private/", name = "X-Private", value = "yes" }},
                            {{ match = "*.php", name = "X-Script", value = "php" }} ]

                [[site]]
                server_names = ["secure.test"]
                root = "{root}"
                https_redirect = true
                headers = [ {{ match = "*", name = "Strict-Transport-Security", value = "max-age=60" }} ]

                [[site]]
                server_names = ["port.test"]
                root = "{root}"
                https_redirect = 8443
                """).format(root=root, fpm=address))
            return ["--config", config]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=2, fastcgi=False)

    def get(self, target, host="a.test"):
        return self.server.request(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                                    % (target, host)).encode())

    def test_error_page_script_runs_with_the_original_status(self):
        r = self.get("/missing.html?q=1")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, b"script 404 for /missing.html?q=1 via GET")
        self.assertNotIn(b"<?php", r.body)

    def test_error_page_script_turns_other_methods_into_get(self):
        r = self.server.request(b"POST /missing.php HTTP/1.1\r\nHost: a.test\r\n"
                                b"Content-Length: 3\r\nConnection: close\r\n\r\nabc")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, b"script 404 for /missing.php via GET")

    def test_error_page_script_keeps_the_connection(self):
        with self.server.connect(timeout=20) as s:
            s.sendall(b"GET /nope HTTP/1.1\r\nHost: a.test\r\n\r\n"
                      b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            first = harness.read_response(s, buffer=b"")
            second = harness.read_response(s, buffer=first.leftover)
        self.assertEqual(first.status, 404)
        self.assertTrue(first.body.startswith(b"script 404"))
        self.assertEqual((second.status, second.body), (200, b"home"))

    def test_header_rule_holds_on_every_spelling_of_the_path(self):
        for target in ["/private/x", "/%70rivate/x", "//private/x", "/./private/x",
                       "/other/../private/x"]:
            r = self.get(target)
            self.assertEqual(r.status, 200, target)
            self.assertEqual(r.body, b"secret file", target)
            self.assertEqual(r.header("x-private"), "yes", target)

    def test_header_rule_holds_on_php_responses(self):
        r = self.get("/private/page.php")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"private page")
        self.assertEqual(r.header("x-private"), "yes")
        self.assertEqual(r.header("x-script"), "php")
        r = self.get("/%70rivate/page.php")
        self.assertEqual(r.header("x-private"), "yes")

    def test_header_rule_holds_on_errors_and_error_pages(self):
        r = self.get("/private/missing")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.header("x-private"), "yes")

    def test_https_redirect_sends_plain_requests_to_https(self):
        r = self.get("/private/x?a=1&b=2", host="secure.test:8080")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("location"), "https://secure.test/private/x?a=1&b=2")
        self.assertEqual(r.header("strict-transport-security"), "max-age=60")
        r = self.get("http://port.test/index.html", host="port.test")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("location"), "https://port.test:8443/index.html")
        # Other sites are served as they are.
        self.assertEqual(self.get("/index.html").status, 200)

    def test_bad_https_redirect_is_a_config_error(self):
        path = os.path.join(self.dir, "bad.toml")
        with open(path, "w") as f:
            f.write('[[site]]\nserver_names = ["x.test"]\nroot = "%s"\nhttps_redirect = "yes"\n'
                    % self.dir)
        result = subprocess.run([harness.BINARY, "-t", "--config", path], capture_output=True,
                                text=True, timeout=30)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("https_redirect", result.stderr)

    def test_server_name_is_the_sites_name(self):
        # Issue 14, finding 7: the client's Host or absolute-form target must
        # not become SERVER_NAME (applications build links from it).
        for target, host in [("/env.php", "a.test"), ("http://evil.example/env.php", "a.test"),
                             ("/env.php", "www.a.test")]:
            r = self.get(target, host=host)
            self.assertEqual(r.status, 200, target)
            self.assertEqual(json.loads(r.body)["SERVER_NAME"], "a.test", target)


if __name__ == "__main__":
    unittest.main(verbosity=2)
