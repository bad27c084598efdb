"""The config file end to end (issue 8): `lepus -t`, the example config, and
[[site]] blocks chosen by Host, with redirects and extra headers."""
import os
import pwd
import re
import subprocess
import textwrap
import unittest

import harness
from client_load import ClientLoad
from harness import BINARY, Lepus

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "lepus.toml")


def check(path, cwd=None):
    return subprocess.run([BINARY, "-t", "--config", path], capture_output=True, text=True,
                          timeout=30, cwd=cwd)


def run_as_nobody(args, cwd):
    """Runs lepus with `args` as the user nobody (the child drops root first)."""
    nobody = pwd.getpwnam("nobody")

    def as_nobody():
        os.setgroups([])
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)
    return subprocess.run([BINARY] + args, capture_output=True, text=True, timeout=30, cwd=cwd,
                          preexec_fn=as_nobody)


class CheckMode(unittest.TestCase):
    def setUp(self):
        self.dir = harness.temp_dir(self, "config")
        os.makedirs(os.path.join(self.dir, "www"))

    def write(self, text):
        path = os.path.join(self.dir, "lepus.toml")
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_example_config_is_valid_wherever_it_is_copied(self):
        # Copied as /etc/lepus/lepus.toml and checked from / (where systemd
        # starts lepus): nothing in it may depend on the current folder. Its
        # document root is pointed at a scratch folder, /var/www/html may be absent.
        with open(EXAMPLE) as f:
            text = f.read()
        self.assertIn('root = "/var/www/html"', text)
        self.assertNotRegex(text, r'(?m)^\s*(root|access_log|error_log) = "(?![/-]|off)')
        path = self.write(text.replace("/var/www/html", os.path.join(self.dir, "www")))
        result = check(path, cwd="/")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "ok")

    def test_unknown_key_is_worded_for_the_file(self):
        path = self.write("""\
            root = "www"
            threads = 2
            keepalive_timout = "5s"
            """)
        for args, code in ((["-t"], 1), ([], 2)):
            with self.subTest(args=args):
                result = subprocess.run([BINARY] + args + ["--config", path], capture_output=True,
                                        text=True, timeout=30, cwd=self.dir)
                self.assertEqual(result.returncode, code, result.stderr)
                self.assertRegex(result.stderr, r"^lepus: %s:3:\d+: unknown key 'keepalive_timout'\n\Z"
                                 % re.escape(path))

    def test_bad_value_names_the_key(self):
        result = check(self.write('root = "www"\nkeepalive_timeout = "10 parsecs"\n'), cwd=self.dir)
        self.assertEqual(result.returncode, 1)
        self.assertRegex(result.stderr, r"^lepus: \S+lepus.toml:2:\d+: 'keepalive_timeout': '10 parsecs' is not a duration")
        self.assertNotIn("--keepalive-timeout", result.stderr)
        self.assertNotIn("--help", result.stderr)

    # --- -t checks what start-up checks ------------------------------------------
    def assert_check_fails(self, text, *needles):
        result = check(self.write(text), cwd=self.dir)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertNotIn("ok", result.stdout)
        for needle in needles:
            self.assertIn(needle, result.stderr)

    def test_check_refuses_unknown_user_and_group(self):
        self.assert_check_fails('root = "www"\nuser = "no-such-user-here"\n',
                                "no such user 'no-such-user-here'")
        self.assert_check_fails('root = "www"\ngroup = "no-such-group-here"\n',
                                "no such group 'no-such-group-here'")

    @unittest.skipUnless(os.geteuid() == 0, "needs root, to run -t as another user")
    def test_check_by_a_user_who_cannot_switch_users(self):
        # Start-up refuses --user unless started as root; so does -t.
        os.chmod(self.dir, 0o755)
        path = self.write('root = "www"\nuser = "nobody"\n')
        os.chmod(path, 0o644)
        result = run_as_nobody(["-t", "--config", path], cwd=self.dir)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("need lepus to start as root", result.stderr)

    def test_check_refuses_a_missing_log_directory(self):
        self.assert_check_fails('root = "www"\naccess_log = "missing/access.log"\n',
                                "access log 'missing/access.log'", "does not exist")
        self.assert_check_fails('root = "www"\nerror_log = "/nonexistent-dir/error.log"\n',
                                "error log", "does not exist")
        self.assert_check_fails('[[site]]\nroot = "www"\naccess_log = "missing/site.log"\n',
                                "lepus.toml:1:1: access_log 'missing/site.log'")

    @unittest.skipUnless(os.geteuid() == 0, "needs root, to run -t as another user")
    def test_check_refuses_an_existing_log_file_it_cannot_write(self):
        os.chmod(self.dir, 0o777)
        log = os.path.join(self.dir, "access.log")
        with open(log, "w"):
            pass
        os.chmod(log, 0o644)  # root's
        path = self.write('root = "www"\naccess_log = "%s"\n' % log)
        os.chmod(path, 0o644)
        result = run_as_nobody(["-t", "--config", path], cwd=self.dir)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("access log '%s' is not writable" % log, result.stderr)
        # Whereas a start by nobody fails the same way.
        result = run_as_nobody(["--config", path, "--listen", "127.0.0.1:0"], cwd=self.dir)
        self.assertEqual(result.returncode, 1, result.stdout)

    @unittest.skipUnless(os.geteuid() == 0, "needs root, to name a --user")
    def test_check_wants_log_directories_writable_by_the_user(self):
        logs = os.path.join(self.dir, "logs")
        os.mkdir(logs, 0o755)  # root's: nobody cannot create the reopened file there
        text = 'root = "www"\nuser = "nobody"\naccess_log = "%s/access.log"\n' % logs
        self.assert_check_fails(text, "'%s/'" % logs, "not writable by uid")
        os.chown(logs, pwd.getpwnam("nobody").pw_uid, -1)
        os.chmod(self.dir, 0o755)  # nobody serves the root under it (issue 33)
        result = check(self.write(text), cwd=self.dir)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_proxy_keys(self):
        result = check(self.write('root = "www"\nreal_ip_from = ["10.0.0.0/8", "unix:"]\n'
                                  'proxy_protocol = true\nlisten = ["unix:/run/lepus/lepus.sock"]\n'),
                       cwd=self.dir)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assert_check_fails('root = "www"\nreal_ip_from = ["10.0.0.0/40"]\n',
                                "lepus.toml:2:", "'real_ip_from'")

    def test_check_refuses_a_missing_site_root_and_a_bad_listen_address(self):
        self.assert_check_fails('[[site]]\nroot = "nowhere"\n', "lepus.toml:1:1", "'nowhere'")
        self.assert_check_fails('root = "www"\nlisten = ["127.0.0.1:99999"]\n', "127.0.0.1:99999")
        self.assert_check_fails('root = "nowhere"\n', "'nowhere' does not exist")

    def test_unknown_keys_are_reported_with_line_and_column(self):
        path = self.write("""\
            root = "www"
            acces_log = "off"

            [[site]]
            root = "www"
            colour = "blue"
            """)
        result = check(path, cwd=self.dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("lepus.toml:2:", result.stderr)
        self.assertIn("lepus.toml:6:", result.stderr)
        self.assertIn("colour", result.stderr)

    def test_syntax_error(self):
        result = check(self.write("threads = \n"), cwd=self.dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("lepus.toml:1:", result.stderr)

    def test_per_site_error_page_access_log_and_fastcgi_are_accepted(self):
        path = self.write("""\
            [[site]]
            server_names = ["a.test"]
            root = "www"
            error_page.404 = "/404.html"
            error_page.502 = "/50x.html"
            access_log = "a.log"
            fastcgi = { address = "unix:/run/php/php8.2-fpm.sock", ext = [".php"], pool = 4, queue = 16, timeout = "30s" }

            [[site]]
            server_names = ["b.test"]
            root = "www"
            access_log = "off"
            fastcgi = "127.0.0.1:9000"
            """)
        result = check(path, cwd=self.dir)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "ok")

    def test_bad_per_site_fastcgi_is_reported_with_the_site(self):
        path = self.write("""\
            [[site]]
            root = "www"

            [[site]]
            server_names = ["b.test"]
            root = "www"
            fastcgi = "localhost"
            """)
        result = check(path, cwd=self.dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("lepus.toml:4:", result.stderr)
        self.assertIn("fastcgi address 'localhost'", result.stderr)
        path = self.write("""\
            [[site]]
            root = "www"
            fastcgi = { address = "unix:/x.sock", ext = ["php"] }
            """)
        result = check(path, cwd=self.dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("not an extension", result.stderr)

    def test_bad_value(self):
        result = check(self.write('keepalive_timeout = "10 parsecs"\n'), cwd=self.dir)
        self.assertEqual(result.returncode, 1)
        self.assertIn("keepalive", result.stderr)


class Sites(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = harness.temp_dir(cls, "sites")
        for name in ("one", "two", "wild", "fallback"):
            os.makedirs(os.path.join(cls.dir, name))
            with open(os.path.join(cls.dir, name, "index.html"), "w") as f:
                f.write(name)
        with open(os.path.join(cls.dir, "one", "style.css"), "w") as f:
            f.write("body{}")
        config = os.path.join(cls.dir, "lepus.toml")
        with open(config, "w") as f:
            f.write(textwrap.dedent("""\
                [[site]]
                server_names = ["one.test"]
                root = "{d}/one"
                headers = [ {{ match = "*.css", name = "Cache-Control", value = "max-age=60" }} ]
                redirects = [ {{ from = "/old", to = "/new-place", status = 308 }} ]

                [[site]]
                server_names = ["two.test", "www.two.test"]
                root = "{d}/two"

                [[site]]
                server_names = ["*.wild.test"]
                root = "{d}/wild"

                [[site]]
                server_names = ["fallback.test"]
                default = true
                root = "{d}/fallback"
                """).format(d=cls.dir))
        cls.server = Lepus(["--config", config])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def host(self, host, path="/"):
        return self.server.get(path, ["Host: " + host])

    def get(self, path, headers=()):
        return self.server.request("GET %s HTTP/1.1\r\n%s\r\nConnection: close\r\n\r\n"
                                   % (path, "\r\n".join(headers)))

    def test_sites_by_host(self):
        self.assertEqual(self.get("/", ["Host: one.test"]).body, b"one")
        self.assertEqual(self.get("/", ["Host: www.two.test:8080"]).body, b"two")
        self.assertEqual(self.get("/", ["Host: a.b.wild.test"]).body, b"wild")
        self.assertEqual(self.get("/", ["Host: nobody.test"]).body, b"fallback")

    def test_redirect_and_header_rules(self):
        r = self.get("/old", ["Host: one.test"])
        self.assertEqual(r.status, 308)
        self.assertEqual(r.header("location"), "/new-place")
        r = self.get("/style.css", ["Host: one.test"])
        self.assertEqual(r.header("cache-control"), "max-age=60")
        self.assertIsNone(self.get("/", ["Host: two.test"]).header("cache-control"))


class StatusPage(unittest.TestCase):
    def setUp(self):
        self.server = Lepus(["--status-path", "/_lepus/status", "--threads", "2"])
        self.server.write("index.html", "hi")

    def tearDown(self):
        self.server.stop(self)

    def status(self, query=""):
        return self.server.get("/_lepus/status" + query)

    def test_json_parses_and_counters_move(self):
        import json
        first = json.loads(self.status().body)
        for _ in range(5):
            self.assertEqual(self.server.get("/").status, 200)
        self.server.get("/missing")
        second = json.loads(self.status().body)
        self.assertEqual(len(second["reactors"]), 2)
        requests = lambda s: sum(r["requests"] for r in s["reactors"])
        self.assertGreaterEqual(requests(second) - requests(first), 6)
        self.assertGreaterEqual(second["status_codes"]["200"], 5)
        self.assertGreaterEqual(second["status_codes"]["404"], 1)
        self.assertGreater(second["uptime_seconds"], 0)

    def test_prometheus_text_format(self):
        self.server.get("/")
        r = self.status("?format=prometheus")
        self.assertEqual(r.status, 200)
        self.assertTrue(r.header("content-type").startswith("text/plain; version=0.0.4"))
        import re
        sample = re.compile(r'^lepus_[a-z0-9_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? [0-9.]+$')
        names = set()
        for line in r.body.decode().splitlines():
            if line.startswith("# "):
                self.assertRegex(line, r"^# (HELP|TYPE) lepus_")
                continue
            self.assertRegex(line, sample)
            names.add(line.split("{")[0].split(" ")[0])
        self.assertIn("lepus_requests_total", names)
        self.assertIn("lepus_responses_total", names)

    def test_status_restricted_by_network(self):
        other = Lepus(["--status-path", "/_lepus/status", "--status-allow", "10.0.0.0/8"])
        try:
            self.assertEqual(other.get("/_lepus/status").status, 403)
        finally:
            other.stop(self)


@unittest.skipUnless(os.geteuid() == 0, "dropping privileges needs root")
class Privileges(unittest.TestCase):
    def test_user_and_group_dropped_after_bind(self):
        server = Lepus(["--user", "nobody", "--group", "nogroup"])
        os.chmod(server.tmp, 0o755)
        os.chmod(server.root, 0o755)
        server.write("index.html", "x", mode=0o644)
        try:
            with open("/proc/%d/status" % server.proc.pid) as f:
                text = f.read()
            import pwd
            nobody = pwd.getpwnam("nobody").pw_uid
            uid_line = [l for l in text.splitlines() if l.startswith("Uid:")][0]
            self.assertEqual(set(int(x) for x in uid_line.split()[1:]), {nobody})
            self.assertEqual(server.get("/").status, 200)
        finally:
            server.stop(self)


class Reload(unittest.TestCase):
    def test_reload_under_load_drops_nothing_and_bad_config_keeps_serving(self):
        import signal
        import time
        d = harness.temp_dir(self, "reload")
        for version in ("v1", "v2"):
            os.makedirs(os.path.join(d, version))
            with open(os.path.join(d, version, "index.html"), "w") as f:
                f.write(version)
        config = os.path.join(d, "lepus.toml")

        def write_config(root):
            with open(config, "w") as f:
                f.write('[[site]]\nserver_names = ["x.test"]\nroot = "%s"\n' % root)

        write_config(os.path.join(d, "v1"))
        server = Lepus(["--config", config, "--threads", "2"])
        seen = []

        def record(r):
            seen.append(r.body) if r.status == 200 else load.failures.append(r.status)
        load = ClientLoad(server, "x.test", "/", record, per_connection=20)
        try:
            load.start()
            time.sleep(0.5)
            write_config(os.path.join(d, "v2"))
            os.kill(server.proc.pid, signal.SIGHUP)
            time.sleep(1.0)
            with open(config, "w") as f:
                f.write("[[site]\nbroken")
            os.kill(server.proc.pid, signal.SIGHUP)
            time.sleep(0.5)
            load.stop()
            self.assertEqual(load.failures, [])
            self.assertIn(b"v1", seen)
            self.assertEqual(seen[-1], b"v2")
            self.assertEqual(server.request("GET / HTTP/1.1\r\nHost: x.test\r\n\r\n").body, b"v2")
            # The logger writes its buffer once a second: wait for the line,
            # not a fixed time (it was flaky under load).
            server.error_lines("keeping the running")
            self.assertIn("keeping the running", server.error_log_text())
        finally:
            load.stop()
            server.stop(self)


if __name__ == "__main__":
    harness.main()
