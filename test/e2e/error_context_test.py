"""The error log's context (issue 33 item 8), over the protocol matrix: a line
about a request names the client, the site, the request line and the Host as
nginx does (`client: 127.0.0.1, server: down.test, request: "GET /x.php
HTTP/1.1", upstream: "unix:/...", host: "down.test"`), for FastCGI and proxy
failures (a backend that is down, one that never answers) and for a symbolic
link the files refuse; a php-fpm socket lepus may not write to says which group
to add (as root only: the socket's owner must differ); and at info, start-up
names the config file, the listeners and the sites."""
import os
import socket
import textwrap
import threading
import time
import unittest

import harness


def request_line(server, path):
    version = server.http_version
    return 'request: "GET %s %s"' % (path, version)


def wait_for_line(test, server, *needles, timeout=10):
    """The error log line holding every needle (the log is written asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in server.error_log_text().splitlines():
            if all(needle in line for needle in needles):
                return line
        test.assertLess(time.monotonic(), deadline,
                        "no line with %r in:\n%s" % (needles, server.error_log_text()[-3000:]))
        time.sleep(0.05)


class SilentBackend:
    """A unix socket that accepts and never answers (php-fpm stuck)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.held = []
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


class ErrorContext(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="error-context")
        for site in ("down", "slow", "api", "files"):
            os.makedirs(os.path.join(cls.dir, site))
        for script in ("down/x.php", "slow/wait.php"):
            with open(os.path.join(cls.dir, script), "w") as f:
                f.write("<?php echo 'never runs';\n")
        os.makedirs(os.path.join(cls.dir, "outside"))
        with open(os.path.join(cls.dir, "outside", "secret.txt"), "w") as f:
            f.write("outside the root\n")
        os.symlink(os.path.join(cls.dir, "outside", "secret.txt"),
                   os.path.join(cls.dir, "files", "link.txt"))
        cls.silent = SilentBackend(os.path.join(cls.dir, "silent.sock"))
        closed = harness.free_port()
        cls.config = os.path.join(cls.dir, "lepus.toml")
        with open(cls.config, "w") as f:
            f.write(textwrap.dedent("""\
                [[site]]
                server_names = ["down.test"]
                root = "{d}/down"
                fastcgi = "unix:{d}/nobody-listens-here.sock"

                [[site]]
                server_names = ["slow.test", "www.slow.test"]
                root = "{d}/slow"
                fastcgi = {{ address = "unix:{d}/silent.sock", timeout = "1s" }}

                [[site]]
                server_names = ["api.test"]
                root = "{d}/api"
                proxy = {{ address = "127.0.0.1:{closed}", paths = ["/api/"] }}

                [[site]]
                server_names = ["files.test"]
                root = "{d}/files"
                """).format(d=cls.dir, closed=closed))
        cls.closed = closed
        cls.server = harness.Lepus(["--config", cls.config])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.silent.close()

    def fetch(self, host, path):
        return self.server.fetch(path, headers=["Host: " + host])

    def test_fastcgi_backend_down_names_the_request(self):
        self.assertEqual(self.fetch("down.test", "/x.php?a=1").status, 502)
        line = wait_for_line(self, self.server, "nobody-listens-here.sock",
                             'host: "down.test"')
        self.assertIn("[error]", line)
        self.assertIn("client: 127.0.0.1, server: down.test, "
                      + request_line(self.server, "/x.php?a=1"), line)
        self.assertIn('upstream: "unix:%s/nobody-listens-here.sock"' % self.dir, line)

    def test_fastcgi_timeout_names_the_request(self):
        self.assertEqual(self.fetch("www.slow.test", "/wait.php").status, 504)
        line = wait_for_line(self, self.server, "--fastcgi-timeout", 'host: "www.slow.test"')
        self.assertIn("client: 127.0.0.1, server: slow.test, "
                      + request_line(self.server, "/wait.php"), line)
        self.assertIn('upstream: "unix:%s/silent.sock"' % self.dir, line)

    def test_proxy_backend_down_names_the_request(self):
        self.assertEqual(self.fetch("api.test", "/api/items").status, 502)
        line = wait_for_line(self, self.server, "proxy 127.0.0.1:%d" % self.closed,
                             'host: "api.test"')
        self.assertIn("client: 127.0.0.1, server: api.test, "
                      + request_line(self.server, "/api/items"), line)
        self.assertIn('upstream: "127.0.0.1:%d"' % self.closed, line)

    def test_refused_symlink_names_the_request(self):
        self.assertEqual(self.fetch("files.test", "/link.txt").status, 403)
        line = wait_for_line(self, self.server, "--symlinks", 'host: "files.test"')
        self.assertIn("client: 127.0.0.1, server: files.test, "
                      + request_line(self.server, "/link.txt"), line)

    def test_start_up_names_config_listeners_and_sites(self):
        text = self.server.error_log_text()
        self.assertIn("config: " + self.config, text)
        self.assertIn("listening on http://127.0.0.1:%d/" % self.server.port, text)
        for name in ("down.test", "slow.test www.slow.test", "api.test", "files.test"):
            self.assertIn("site " + name, text)
        self.assertIn("FastCGI unix:%s/silent.sock" % self.dir, text)
        self.assertIn("proxy 127.0.0.1:%d" % self.closed, text)


@unittest.skipUnless(os.geteuid() == 0, "needs root: a socket of another owner and --user")
class PhpFpmSocketPermission(unittest.TestCase):
    """Debian's php-fpm socket is www-data:www-data 0660: a lepus whose user is
    not in that group gets EACCES, and the log says which group to add."""

    def test_permission_denied_names_the_group(self):
        harness.require_binary()
        directory = harness.temp_dir(self, "fpm-socket")
        os.chmod(directory, 0o755)
        path = os.path.join(directory, "php-fpm.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(listener.close)
        listener.bind(path)
        listener.listen(4)
        os.chown(path, 0, 0)
        os.chmod(path, 0o660)
        server = harness.Lepus(["--fastcgi", "unix:" + path, "--user", "nobody"])
        os.chmod(server.tmp, 0o755)
        os.chmod(server.root, 0o755)
        server.write("x.php", "<?php echo 1;", mode=0o644)
        try:
            self.assertEqual(server.fetch("/x.php").status, 502)
            line = wait_for_line(self, server, "Permission denied")
            self.assertIn('writable by the group "root"', line)
            self.assertIn("usermod -aG root nobody", line)
            self.assertIn(request_line(server, "/x.php"), line)
        finally:
            server.stop(self)


if __name__ == "__main__":
    harness.main()
