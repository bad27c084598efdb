"""Migrating from nginx (issue 37), the parts that are about the config file
rather than requests: `include` (nginx's conf.d / sites-enabled habit) with
`-t` naming the included file and line of each error and SIGHUP re-reading
the files; the requests themselves are in matrix_migrating_test.py."""
import os
import re
import signal
import subprocess
import textwrap
import time
import unittest

import harness
from harness import BINARY, Lepus


def check(path):
    return subprocess.run([BINARY, "-t", "--config", path], capture_output=True, text=True,
                          timeout=30, cwd="/")


def wait_until(test, condition, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            test.fail("timed out waiting for " + what)
        time.sleep(0.05)


class Includes(unittest.TestCase):
    def setUp(self):
        self.dir = harness.temp_dir(self, "include")
        for site in ("main", "a", "b", "c"):
            os.makedirs(os.path.join(self.dir, site))
            with open(os.path.join(self.dir, site, "index.html"), "w") as f:
                f.write("site " + site)
        os.makedirs(os.path.join(self.dir, "sites.d"))

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).format(d=self.dir))
        return path

    def site(self, name, host, extra=""):
        return self.write("sites.d/%s.toml" % name, """\
            [[site]]
            server_names = ["%s"]
            root = "{d}/%s"
            %s
            """ % (host, name, extra))

    def main(self, include='include = ["sites.d/*.toml"]', sites=""):
        return self.write("lepus.toml", include + "\n" + sites)

    def test_sites_come_from_the_files_in_sorted_order(self):
        # b.toml written first: the order is glob's (sorted), not the disk's.
        self.site("b", "b.test")
        self.site("a", "a.test")
        config = self.main(sites='[[site]]\nserver_names = ["main.test"]\nroot = "%s/main"\n'
                           % self.dir)
        self.assertEqual(check(config).returncode, 0, check(config).stderr)
        server = Lepus(["--config", config], protocol="h1")
        try:
            for host in ("a.test", "b.test", "main.test"):
                r = server.fetch("/", headers=["Host: " + host])
                self.assertEqual((r.status, r.body), (200, b"site " + host[:-5].encode()))
            # No site says default = true: the first, a.toml's, answers other names.
            r = server.fetch("/", headers=["Host: other.test"])
            self.assertEqual(r.body, b"site a")
        finally:
            server.stop(self)

    def test_check_names_the_included_file_and_line_of_each_error(self):
        self.site("a", "a.test", 'autoindex = "yes"')
        bad = self.write("sites.d/b.toml", """\
            listen = ["0.0.0.0:80"]

            [[site]]
            server_names = ["b.test"]
            root = "{d}/b"
            unknown_thing = 1
            """)
        broken = self.write("sites.d/c.toml", '[[site]]\nroot = "{d}/c\n')
        config = self.main(sites='keepalive_timout = "5s"\n')
        result = check(config)
        self.assertEqual(result.returncode, 1, result.stderr)
        a = os.path.join(self.dir, "sites.d", "a.toml")
        self.assertRegex(result.stderr, r"%s:2:\d+: unknown key 'keepalive_timout'"
                         % re.escape(config))
        self.assertRegex(result.stderr, r"%s:4:\d+: 'autoindex' must be true or false"
                         % re.escape(a))
        self.assertRegex(result.stderr, r"%s:1:\d+: 'listen' in an included file: it may hold "
                         r"only \[\[site\]\] blocks" % re.escape(bad))
        self.assertRegex(result.stderr, r"%s:6:\d+: unknown key 'unknown_thing'" % re.escape(bad))
        self.assertRegex(result.stderr, r"%s:2:\d+: " % re.escape(broken))

    def test_an_empty_folder_is_fine_a_missing_file_is_not(self):
        config = self.main(sites='root = "%s/main"\n' % self.dir)
        self.assertEqual(check(config).returncode, 0, check(config).stderr)
        config = self.main(include='include = ["sites.d/*.toml", "/nonexistent/lepus-site.toml"]',
                           sites='root = "%s/main"\n' % self.dir)
        result = check(config)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"%s:1:\d+: include: '/nonexistent/lepus-site.toml' "
                         r"does not exist" % re.escape(config))

    def test_sighup_reads_the_folder_again(self):
        self.site("a", "a.test")
        config = self.main()
        server = Lepus(["--config", config], protocol="h1")
        try:
            self.assertEqual(server.fetch("/", headers=["Host: b.test"]).body, b"site a")
            self.site("b", "b.test")
            os.kill(server.proc.pid, signal.SIGHUP)
            wait_until(self, lambda: "configuration reloaded" in server.error_log_text(),
                       "the reload")
            for _ in range(4):  # each reactor takes the new set at its next request
                self.assertEqual(server.fetch("/", headers=["Host: b.test"]).body, b"site b")
            # A broken included file keeps the running configuration.
            self.write("sites.d/c.toml", "[[site]]\nroot = 3\n")
            os.kill(server.proc.pid, signal.SIGHUP)
            wait_until(self, lambda: "c.toml:2" in server.error_log_text(), "the refusal")
            self.assertEqual(server.fetch("/", headers=["Host: b.test"]).body, b"site b")
        finally:
            server.stop(self)


class RedirectKeys(unittest.TestCase):
    """Patterns are compiled when the file is read: -t names each bad one."""

    def test_bad_redirects_are_refused_with_their_line(self):
        folder = harness.temp_dir(self, "redirect-keys")
        path = os.path.join(folder, "lepus.toml")
        with open(path, "w") as f:
            f.write(textwrap.dedent("""\
                [[site]]
                root = "%s"
                redirects = [
                  { pattern = '^/blog/(\\d+', to = "/x" },
                  { pattern = '^/a/(.*)$', to = "/b/$2" },
                  { from = "/a", pattern = '^/a', to = "/b" },
                  { pattern = '^/a', to = "/b", prefix = true },
                  { from = "/a", to = "/b", rewrite = true, status = 302 },
                  { from = "/a", to = "https://elsewhere/", rewrite = true },
                  { pattern = '^/fine/(\\d+)$', to = "/ok/$1", status = 307 },
                ]
                """ % folder))
        result = check(path)
        self.assertEqual(result.returncode, 1, result.stderr)
        where = re.escape(path)
        self.assertRegex(result.stderr, where + r":4:\d+: pattern '\^/blog/\(\\d\+': "
                         r"missing closing parenthesis at offset 11")
        self.assertRegex(result.stderr, where + r":5:\d+: '/b/\$2' names \$2 but the pattern "
                         r"has 1 group")
        self.assertRegex(result.stderr, where + r":6:\d+: a redirect needs from .* or pattern")
        self.assertRegex(result.stderr, where + r":7:\d+: prefix = true goes with from")
        self.assertRegex(result.stderr, where + r":8:\d+: a rewrite goes to a path")
        self.assertRegex(result.stderr, where + r":9:\d+: a rewrite goes to a path")
        self.assertNotRegex(result.stderr, where + r":10:")


class LocationKeys(unittest.TestCase):
    def check_site(self, locations):
        folder = harness.temp_dir(self, "location-keys")
        path = os.path.join(folder, "lepus.toml")
        with open(path, "w") as f:
            f.write('[[site]]\nroot = "%s"\nlocations = [\n%s\n]\n' % (folder, locations))
        return path, check(path)

    def test_bad_locations_are_refused_with_their_line(self):
        path, result = self.check_site(
            '{ path = "wp-content/", root = "/" },\n'
            '{ path = "/a/", headers = [{ name = "X a", value = "v" }] },\n'
            '{ path = "/b/", root = "/", handler = "cgi" },\n'
            '{ path = "/c/../d/", root = "/" },\n'
            '{ path = "/e/", handler = "static" },\n'
            '{ path = "/f/", handler = "proxy" },\n'
            '{ path = "/g/", proxy = { address = "ftp://x" } },\n'
            '{ path = "/h/", proxy = "127.0.0.1:1", root = "/" },\n'
            '{ path = "/i/", limits = { rate = "fast" } },\n'
            '{ path = "/j/", conn_limit = 0 },\n'
            '{ path = "/k/", try_files = ["$uri"] },\n'
            '{ path = "/l/", auth = { realm = "x" } },\n'
            '{ path = "/m/", proxy = { address = "127.0.0.1:1", paths = ["/x/"] } },\n'
            '{ path = "/n/", colour = "red" },\n'
            '{ path = "/o/", handler = "static", proxy = "127.0.0.1:1", root = "/" },\n'
            '{ path = "/p/", proxy = "127.0.0.1:1", try_files = ["$uri", "=404"] },\n'
            '{ path = "/q/", auth = { off = true }, headers = [{ name = "X-Ok", value = "1" }] },')
        self.assertEqual(result.returncode, 1, result.stderr)
        where = re.escape(path)
        for line, message in (
                (4, r"a location needs a path starting with /"),
                (5, r"a header rule needs match, a valid name"),
                (6, r"a location's handler is static, fastcgi or proxy"),
                (7, r"a location's path is a normalised path"),
                (8, r'handler = "static" needs a \'root\''),
                (9, r'handler = "proxy" needs proxy = \{ address = ... \}'),
                (10, r"proxy address 'ftp://x' is not"),
                (11, r"a proxy location has no root"),
                (12, r"'rate' is requests per second or minute"),
                (13, r"'conn_limit' must be a positive whole number"),
                (14, r"try_files"),
                (15, r"an auth rule needs either htpasswd"),
                (16, r"a location's proxy has no paths"),
                (17, r"unknown key 'colour' in locations"),
                (18, r'a location with proxy has handler = "proxy"'),
                (19, r"a proxy location has no try_files")):
            self.assertRegex(result.stderr, where + r":%d:\d+: " % line + message)
        self.assertNotRegex(result.stderr, where + r":20:")  # a good one

    def test_a_missing_root_and_fastcgi_without_a_backend_are_named(self):
        path, result = self.check_site('{ path = "/up/", root = "/nonexistent/lepus-up" },')
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, re.escape(path) + r":4:\d+: location /up/: root "
                         r"'/nonexistent/lepus-up' does not exist")
        path, result = self.check_site('{ path = "/up/", root = "/tmp", handler = "fastcgi" },')
        self.assertEqual(result.returncode, 1)
        self.assertIn("the site has no fastcgi", result.stderr)


class LogFormatKeys(unittest.TestCase):
    def test_an_unknown_variable_is_named_with_its_line(self):
        folder = harness.temp_dir(self, "log-format-keys")
        path = os.path.join(folder, "lepus.toml")
        with open(path, "w") as f:
            f.write('access_log_format = "json"\n[[site]]\nroot = "%s"\n'
                    'access_log_format = "$remote_addr $upstream_addr"\n' % folder)
        result = check(path)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertRegex(result.stderr, re.escape(path) + r":4:\d+: access_log_format: unknown "
                         r"variable '\$upstream_addr'")
        result = subprocess.run([BINARY, "-t", "--access-log-format", "$nope", folder],
                                capture_output=True, text=True, timeout=30)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("unknown variable '$nope'", result.stderr)


if __name__ == "__main__":
    harness.main()
