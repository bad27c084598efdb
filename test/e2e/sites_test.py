"""Per-site settings end to end (issue 8): error_page, access_log and fastcgi in
[[site]] blocks, their reload with SIGHUP, and the FastCGI gauges of the status
page. The FastCGI parts need php-fpm (apt-get install php-fpm) and
fcgi_responder (test/fastcgi/responder.cc); they are skipped without php-fpm and
fail without fcgi_responder, which is built with the tests."""
import json
import os
import shutil
import signal
import socket
import textwrap
import threading
import unittest

import harness
import phpfpm
from client_load import ClientLoad
from fastcgi_test import Responder, find_responder
from harness import Lepus, wait_until

PAGE_404 = b"<html><body>custom 404 of a.test</body></html>\n"
PAGE_405 = b"no such method here\n"
PAGE_502 = b"<p>the backend is having a rest</p>\n"


def write_file(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())


def ask(port, host, path, method="GET", headers=(), keep=False):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: " + host]
    if not keep:
        lines.append("Connection: close")
    lines += list(headers)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        return harness.read_response(s, head_only=method == "HEAD")


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def has_request(lines, path):
    return any((" %s HTTP/1.1\"" % path) in line for line in lines)


class Sites:
    """A temporary directory with one root per site and a lepus.toml."""

    def __init__(self, names):
        self.dir = harness.temp_dir(name="sites")
        for name in names:
            os.makedirs(self.root(name))
            write_file(os.path.join(self.root(name), "index.html"), name)
        self.config = os.path.join(self.dir, "lepus.toml")

    def root(self, name):
        return os.path.join(self.dir, name)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_config(self, text):
        with open(self.config + ".tmp", "w") as f:
            f.write(textwrap.dedent(text).format(d=self.dir))
        os.replace(self.config + ".tmp", self.config)

    def cleanup(self):
        harness.remove_temp_dir(self.dir)


def require_backends():
    harness.require_binary()
    if not phpfpm.find_php_fpm():
        raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
    if not find_responder():
        raise AssertionError("fcgi_responder not found (built with the tests in "
                             "test/fastcgi; or set FCGI_RESPONDER)")


# --- error_page -------------------------------------------------------------------


class ErrorPages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.sites = Sites(["a", "b"])
        write_file(os.path.join(cls.sites.root("a"), "404.html"), PAGE_404)
        write_file(os.path.join(cls.sites.root("a"), "errors", "405.txt"), PAGE_405)
        cls.sites.write_config("""\
            [[site]]
            server_names = ["a.test"]
            root = "{d}/a"
            error_page.404 = "/404.html"
            error_page.405 = "/errors/405.txt"
            error_page.403 = "/404.html"

            [[site]]
            server_names = ["b.test"]
            root = "{d}/b"
            error_page.404 = "/no-such-page.html"
            """)
        cls.server = Lepus(["--config", cls.sites.config])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())
        cls.sites.cleanup()

    def test_custom_404_keeps_the_status(self):
        r = ask(self.server.port, "a.test", "/missing.html")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, PAGE_404)
        self.assertTrue(r.header("content-type").startswith("text/html"))
        # The validators of the page file would describe the page, not the error.
        self.assertIsNone(r.header("etag"))
        self.assertIsNone(r.header("accept-ranges"))

    def test_conditional_and_range_requests_still_get_the_page(self):
        r = ask(self.server.port, "a.test", "/missing.html",
                headers=["Range: bytes=0-3", 'If-None-Match: "x"'])
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, PAGE_404)

    def test_head_gets_the_head_only(self):
        with self.server.connect() as s:
            s.sendall(b"HEAD /missing.html HTTP/1.1\r\nHost: a.test\r\n\r\n"
                      b"GET /index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            head = harness.read_response(s, head_only=True, buffer=b"")
            self.assertEqual(head.status, 404)
            self.assertEqual(int(head.header("content-length")), len(PAGE_404))
            # No body bytes in between: the next response starts right after the head.
            after = harness.read_response(s, buffer=head.leftover)
            self.assertEqual(after.status, 200)
            self.assertEqual(after.body, b"a")

    def test_405_page_keeps_allow_and_its_content_type(self):
        r = ask(self.server.port, "a.test", "/index.html", method="DELETE")
        self.assertEqual(r.status, 405)
        self.assertEqual(r.body, PAGE_405)
        self.assertTrue(r.header("content-type").startswith("text/plain"))
        self.assertIn("GET", r.header("allow"))

    def test_keepalive_continues_after_an_error_page(self):
        with self.server.connect() as s:
            s.sendall(b"GET /nope HTTP/1.1\r\nHost: a.test\r\n\r\n"
                      b"GET /nope2 HTTP/1.1\r\nHost: a.test\r\n\r\n")
            first = harness.read_response(s, buffer=b"")
            second = harness.read_response(s, buffer=first.leftover)
            self.assertEqual((first.status, first.body), (404, PAGE_404))
            self.assertEqual((second.status, second.body), (404, PAGE_404))

    def test_missing_error_page_falls_back_to_the_built_in_one(self):
        r = ask(self.server.port, "b.test", "/missing.html")
        self.assertEqual(r.status, 404)
        self.assertIn(b"404 Not Found", r.body)
        self.assertIn(b"lepus", r.body)

    def test_other_sites_and_statuses_keep_the_built_in_page(self):
        r = ask(self.server.port, "b.test", "/index.html", method="DELETE")
        self.assertEqual(r.status, 405)
        self.assertIn(b"405 Method Not Allowed", r.body)
        self.assertEqual(ask(self.server.port, "a.test", "/").body, b"a")

    def test_parser_errors_happen_before_the_site_is_known(self):
        r = self.server.request(b"GET / HTTP/1.1\r\nHost: a.test\r\nno colon here\r\n\r\n")
        self.assertEqual(r.status, 400)
        self.assertIn(b"400 Bad Request", r.body)


# --- access_log ---------------------------------------------------------------------


class AccessLogs(unittest.TestCase):
    def setUp(self):
        harness.require_binary()
        self.sites = Sites(["a", "b", "c"])
        self.addCleanup(self.sites.cleanup)

    def config(self, a_log=None, b_log=None):
        text = '[[site]]\nserver_names = ["a.test"]\nroot = "{d}/a"\n'
        if a_log:
            text += 'access_log = "%s"\n' % a_log
        text += '\n[[site]]\nserver_names = ["b.test"]\nroot = "{d}/b"\n'
        if b_log:
            text += 'access_log = "%s"\n' % b_log
        text += '\n[[site]]\nserver_names = ["c.test"]\nroot = "{d}/c"\naccess_log = "off"\n'
        self.sites.write_config(text)

    def start(self):
        # The global log lives with the sites: the harness removes its own
        # directory when the server stops, and the logs are read after that.
        self.global_log = self.sites.path("global.log")
        return Lepus(["--config", self.sites.config, "--threads", "2",
                      "--access-log", self.global_log])

    def wait_for_error_log(self, server, text, count=1):
        wait_until(self, lambda: server.error_log_text().count(text) >= count,
                   "'%s' in the error log" % text)

    def test_site_lines_go_to_the_site_log_and_survive_sigusr1(self):
        a_log = self.sites.path("a.log")
        self.config(a_log=a_log)
        server = self.start()
        try:
            for host, path in (("a.test", "/a1"), ("b.test", "/b1"), ("c.test", "/c1")):
                self.assertEqual(ask(server.port, host, path).status, 404)
            # logrotate: rename, then SIGUSR1; lines after the reopen go to a new file.
            wait_until(self, lambda: os.path.exists(a_log), "the site log to be created")
            os.rename(a_log, a_log + ".1")
            os.kill(server.proc.pid, signal.SIGUSR1)
            self.wait_for_error_log(server, "SIGUSR1: logs reopened")
            self.assertEqual(ask(server.port, "a.test", "/a2").status, 404)
        finally:
            server.stop(self)  # flushes every log: no line may be lost
        old, new = read_lines(a_log + ".1"), read_lines(a_log)
        global_lines = read_lines(self.global_log)
        self.assertTrue(has_request(old, "/a1"), old)
        self.assertFalse(has_request(old, "/a2"), old)
        self.assertTrue(has_request(new, "/a2"), new)
        self.assertEqual(len(new), 1, new)
        self.assertTrue(has_request(global_lines, "/b1"), global_lines)
        for path in ("/a1", "/a2", "/c1"):
            self.assertFalse(has_request(global_lines, path), global_lines)
        self.assertFalse(has_request(old + new, "/c1"))

    def test_reload_starts_a_new_site_log(self):
        self.config()
        server = self.start()
        b_log = self.sites.path("logs-b.log")
        try:
            self.assertEqual(ask(server.port, "b.test", "/before").status, 404)
            self.config(b_log=b_log)
            os.kill(server.proc.pid, signal.SIGHUP)
            self.wait_for_error_log(server, "configuration reloaded")
            for _ in range(4):  # each reactor takes the new set at its next request
                self.assertEqual(ask(server.port, "b.test", "/after").status, 404)
        finally:
            server.stop(self)
        site_lines, global_lines = read_lines(b_log), read_lines(self.global_log)
        self.assertEqual(len(site_lines), 4, site_lines)
        self.assertTrue(all(has_request([line], "/after") for line in site_lines))
        self.assertTrue(has_request(global_lines, "/before"))
        self.assertFalse(has_request(global_lines, "/after"))

    def test_unwritable_site_log_stops_startup(self):
        self.config(a_log=self.sites.path("no/such/dir/a.log"))
        with self.assertRaises(RuntimeError) as failure:
            Lepus(["--config", self.sites.config])
        self.assertIn("access log", str(failure.exception))


# --- fastcgi -------------------------------------------------------------------------


def tcp_connections_to(pid, port):
    """Sockets of process `pid` connected to 127.0.0.1:port (from /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


class FastCgiSites(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_backends()
        cls.fpm = phpfpm.PhpFpm(children=2)
        cls.responder = Responder()
        cls.sites = Sites(["one", "two", "three"])
        for name in ("env.php", "hello.php"):
            shutil.copy(os.path.join(phpfpm.PHP_DIR, name), cls.sites.root("two"))
        write_file(os.path.join(cls.sites.root("one"), "x.php"), "read by nobody")
        write_file(os.path.join(cls.sites.root("one"), "page.cgi"), "read by nobody")
        write_file(os.path.join(cls.sites.root("three"), "x.php"), "<?php echo 'never';")
        write_file(os.path.join(cls.sites.root("three"), "502.html"), PAGE_502)
        write_file(os.path.join(cls.sites.root("three"), "404.html"), PAGE_404)
        cls.sites.write_config("""\
            [[site]]
            server_names = ["one.test"]
            root = "{d}/one"
            fastcgi = {{ address = "%s", ext = [".php", ".cgi"], pool = 2 }}

            [[site]]
            server_names = ["two.test"]
            root = "{d}/two"

            [[site]]
            server_names = ["three.test"]
            root = "{d}/three"
            fastcgi = "unix:{d}/nobody-listens-here.sock"
            error_page.502 = "/502.html"
            error_page.404 = "/404.html"
            """ % cls.responder.address)
        cls.server = Lepus(["--config", cls.sites.config, "--fastcgi", cls.fpm.address,
                            "--threads", "2"])

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop(harness.LepusTestCase._Checker())
        finally:
            cls.responder.stop()
            cls.fpm.cleanup()
            cls.sites.cleanup()

    def test_site_with_its_own_backend(self):
        for path in ("/x.php", "/page.cgi"):
            r = ask(self.server.port, "one.test", path)
            self.assertEqual(r.status, 200, r.body)
            params = json.loads(r.body)["params"]  # fcgi_responder's echo
            self.assertEqual(params["DOCUMENT_ROOT"], os.path.realpath(self.sites.root("one")))
            self.assertEqual(params["SCRIPT_NAME"], path)

    def test_site_without_fastcgi_uses_the_global_backend_with_its_own_root(self):
        r = ask(self.server.port, "two.test", "/env.php")
        self.assertEqual(r.status, 200, r.body)
        env = json.loads(r.body)  # php-fpm running env.php
        self.assertNotIn("params", env)
        self.assertEqual(env["DOCUMENT_ROOT"], os.path.realpath(self.sites.root("two")))
        self.assertEqual(env["SCRIPT_FILENAME"],
                         os.path.join(os.path.realpath(self.sites.root("two")), "env.php"))
        self.assertEqual(ask(self.server.port, "two.test", "/hello.php").status, 200)
        # .cgi is one.test's extension only: here it is a static (missing) file.
        self.assertEqual(ask(self.server.port, "two.test", "/page.cgi").status, 404)

    def test_scripts_are_looked_up_under_the_site_root(self):
        self.assertEqual(ask(self.server.port, "one.test", "/env.php").status, 404)

    def test_backend_errors_get_the_site_error_page(self):
        r = ask(self.server.port, "three.test", "/x.php")
        self.assertEqual(r.status, 502)
        self.assertEqual(r.body, PAGE_502)
        r = ask(self.server.port, "three.test", "/x.php", method="HEAD")
        self.assertEqual(r.status, 502)
        self.assertEqual(int(r.header("content-length")), len(PAGE_502))
        r = ask(self.server.port, "three.test", "/missing.php")
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, PAGE_404)


class FastCgiReload(unittest.TestCase):
    def test_reload_switches_backends_without_failing_a_request(self):
        require_backends()
        fpm = phpfpm.PhpFpm(children=2)
        self.addCleanup(fpm.cleanup)
        old = Responder(tcp=True)
        self.addCleanup(old.stop)
        old_port = int(old.address.rsplit(":", 1)[1])
        sites = Sites(["x"])
        self.addCleanup(sites.cleanup)
        write_file(os.path.join(sites.root("x"), "who.php"), "<?php echo 'php-fpm';\n")

        def config(address):
            sites.write_config("""\
                [[site]]
                server_names = ["x.test"]
                root = "{d}/x"
                fastcgi = {{ address = "%s", pool = 2 }}
                """ % address)

        config(old.address)
        server = Lepus(["--config", sites.config, "--threads", "2"])
        answers = []

        def backend_of(r):
            if r.status != 200:
                return "status %d" % r.status
            return "php-fpm" if r.body == b"php-fpm" else "responder" if b"params" in r.body \
                else "unknown %r" % r.body[:50]

        load = ClientLoad(server, "x.test", "/who.php",
                                  lambda r: answers.append(backend_of(r)), per_connection=10)
        try:
            load.start()
            wait_until(self, lambda: answers.count("responder") >= 20, "answers from the old backend")
            config(fpm.address)
            os.kill(server.proc.pid, signal.SIGHUP)
            wait_until(self, lambda: "configuration reloaded" in server.error_log_text(),
                       "the reload")
            mark = len(answers)
            wait_until(self, lambda: answers[mark:].count("php-fpm") >= 20,
                       "answers from the new backend", timeout=20)
            load.stop()
            self.assertEqual(load.failures, [])
            bad = [a for a in answers if a not in ("responder", "php-fpm")]
            self.assertEqual(bad, [])
            # Requests started after the switch all went to the new backend.
            tail = answers[-10:]
            self.assertEqual(tail, ["php-fpm"] * len(tail))

            # The old pools are closed on their reactors once no request holds
            # them: lepus keeps no connection to the old backend.
            def old_connections_gone():
                for _ in range(4):  # each reactor retires its old set at its next request
                    self.assertEqual(ask(server.port, "x.test", "/who.php").body, b"php-fpm")
                return tcp_connections_to(server.proc.pid, old_port) == 0

            wait_until(self, old_connections_gone, "the old backend connections to close")
        finally:
            load.stop()
            server.stop(self)


# --- the status page ---------------------------------------------------------------------


class FastCgiGauges(unittest.TestCase):
    def test_busy_idle_and_queued_move(self):
        require_backends()
        # Kept alive, so that the connection returns to the pool and counts as idle.
        _, server = phpfpm.start_site(self, ["--fastcgi-pool", "1", "--threads", "1",
                                             "--fastcgi-keepalive", "on",
                                             "--status-path", "/_lepus/status"], children=2)
        shutil.copy(os.path.join(phpfpm.PHP_DIR, "slow.php"), server.root)
        results = []

        def slow(ms):
            results.append(ask(server.port, "localhost", "/slow.php?ms=%d" % ms).status)

        def gauges():
            status = json.loads(ask(server.port, "localhost", "/_lepus/status").body)
            return status["reactors"][0]["fastcgi"]

        def metric(text, name):
            for line in text.splitlines():
                if line.startswith(name + " "):
                    return int(line.split()[-1])
            self.fail("no %s in:\n%s" % (name, text))

        self.assertEqual(gauges(), {"busy": 0, "idle": 0, "queued": 0})
        first = threading.Thread(target=slow, args=(4000,))
        first.start()
        wait_until(self, lambda: gauges()["busy"] == 1, "a busy backend connection")
        # The pool has one connection: the second request waits in the queue.
        second = threading.Thread(target=slow, args=(1,))
        second.start()
        wait_until(self, lambda: gauges()["queued"] == 1, "a queued request")
        text = ask(server.port, "localhost", "/_lepus/status?format=prometheus").body.decode()
        self.assertEqual(
            metric(text, 'lepus_fastcgi_connections{reactor="0",state="busy"}'), 1)
        self.assertEqual(
            metric(text, 'lepus_fastcgi_connections{reactor="0",state="idle"}'), 0)
        self.assertEqual(metric(text, 'lepus_fastcgi_queued_requests{reactor="0"}'), 1)
        first.join()
        second.join()
        self.assertEqual(results, [200, 200])
        wait_until(self, lambda: gauges() == {"busy": 0, "idle": 1, "queued": 0},
                   "the connection back in the pool")
        text = ask(server.port, "localhost", "/_lepus/status?format=prometheus").body.decode()
        self.assertEqual(
            metric(text, 'lepus_fastcgi_connections{reactor="0",state="idle"}'), 1)


if __name__ == "__main__":
    harness.main()
