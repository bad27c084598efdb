"""Listen addresses (issue 17): a bare port serves IPv4 and IPv6 on one
dual-stack socket (the default, 8080, as `python3 -m http.server`), and
`--listen unix:/PATH` serves on a Unix socket for a proxy in front: a stale
socket file is replaced at start, the file is removed at exit."""
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import BINARY, read_response


def has_ipv6():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class Server:
    """lepus ROOT --listen LISTEN, started in a scratch dir; `url` is what it printed."""

    def __init__(self, test, listen):
        self.test = test
        self.tmp = tempfile.mkdtemp(prefix="lepus-listen-")
        self.root = os.path.join(self.tmp, "www")
        os.mkdir(self.root)
        with open(os.path.join(self.root, "index.html"), "w") as f:
            f.write("hello\n")
        self.access_log = os.path.join(self.tmp, "access.log")
        self.proc = subprocess.Popen([BINARY, self.root, "--listen", listen, "--access-log",
                                      self.access_log, "--error-log", "-"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        match = re.search(r"serving \S+ on (\S+)", line)
        if not match:
            self.proc.wait(timeout=10)
            test.fail("lepus did not start: %r %s" % (line, self.proc.stderr.read()))
        self.url = match.group(1)

    def get(self, family, address):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(address)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return read_response(s)

    def access_clients(self, count):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.exists(self.access_log):
                with open(self.access_log) as f:
                    found = f.read().splitlines()
                if len(found) >= count:
                    return [line.split(" ", 1)[0] for line in found]
            time.sleep(0.1)
        self.test.fail("fewer than %d access-log lines" % count)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.test.assertEqual(code, 0)


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class DualStack(unittest.TestCase):
    @unittest.skipUnless(has_ipv6(), "no IPv6 on this host")
    def test_bare_port_serves_ipv4_and_ipv6(self):
        server = Server(self, "0")
        try:
            match = re.match(r"http://\[::\]:(\d+)/$", server.url)
            self.assertIsNotNone(match, server.url)
            port = int(match.group(1))
            self.assertEqual(server.get(socket.AF_INET, ("127.0.0.1", port)).body, b"hello\n")
            self.assertEqual(server.get(socket.AF_INET6, ("::1", port)).body, b"hello\n")
            # An IPv4 client is logged as such, not as ::ffff:127.0.0.1.
            self.assertEqual(server.access_clients(2), ["127.0.0.1", "::1"])
        finally:
            server.stop()

    def test_explicit_addresses_keep_their_family(self):
        server = Server(self, "127.0.0.1:0")
        try:
            self.assertRegex(server.url, r"^http://127\.0\.0\.1:\d+/$")
        finally:
            server.stop()

    @unittest.skipUnless(shutil.which("unshare") and os.geteuid() == 0, "needs unshare --net")
    def test_default_is_port_8080_on_both_families(self):
        # In a private network namespace, where 8080 is free whatever runs here.
        root = tempfile.mkdtemp(prefix="lepus-listen-")
        try:
            done = subprocess.run(["unshare", "--net", "sh", "-c",
                                   "ip link set lo up 2>/dev/null; exec timeout 2 \"$0\" \"$@\"",
                                   BINARY, root, "--access-log", "off"],
                                  capture_output=True, text=True, timeout=20)
            first = done.stdout.splitlines()[0] if done.stdout else done.stderr
            self.assertIn(first, ("lepus: serving %s on http://[::]:8080/" % root,
                                  "lepus: serving %s on http://0.0.0.0:8080/" % root))
        finally:
            shutil.rmtree(root, ignore_errors=True)


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class UnixSocket(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="lepus-unix-")
        self.path = os.path.join(self.dir, "lepus.sock")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_serves_on_a_unix_socket_and_removes_it_at_exit(self):
        server = Server(self, "unix:" + self.path)
        try:
            self.assertEqual(server.url, "unix:" + self.path)
            r = server.get(socket.AF_UNIX, self.path)
            self.assertEqual((r.status, r.body), (200, b"hello\n"))
            # A proxy running as another user can connect.
            self.assertEqual(os.stat(self.path).st_mode & 0o777, 0o666)
            self.assertEqual(server.access_clients(1), ["unix:"])
        finally:
            server.stop()
        self.assertFalse(os.path.exists(self.path), "socket file left behind")

    def test_a_stale_socket_file_is_replaced(self):
        with socket.socket(socket.AF_UNIX) as stale:
            stale.bind(self.path)  # bound, never listening: what a killed server leaves
        server = Server(self, "unix:" + self.path)
        try:
            self.assertEqual(server.get(socket.AF_UNIX, self.path).status, 200)
        finally:
            server.stop()

    def test_a_live_socket_or_another_file_is_refused(self):
        with socket.socket(socket.AF_UNIX) as live:
            live.bind(self.path)
            live.listen()
            done = subprocess.run([BINARY, self.dir, "--listen", "unix:" + self.path],
                                  capture_output=True, text=True, timeout=10)
            self.assertEqual(done.returncode, 1, done.stdout)
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
            self.assertIn("in use", done.stderr)
        os.unlink(self.path)
        with open(self.path, "w") as f:
            f.write("not a socket")
        done = subprocess.run([BINARY, self.dir, "--listen", "unix:" + self.path],
                              capture_output=True, text=True, timeout=10)
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn("not a socket", done.stderr)
        with open(self.path) as f:
            self.assertEqual(f.read(), "not a socket")

    def test_a_reload_moves_the_socket(self):
        first, second = self.path, os.path.join(self.dir, "second.sock")
        config = os.path.join(self.dir, "lepus.toml")
        root = os.path.join(self.dir, "www")
        os.mkdir(root)

        def write(path):
            with open(config, "w") as f:
                f.write('root = "%s"\nlisten = ["unix:%s"]\naccess_log = "off"\n' % (root, path))
        write(first)
        proc = subprocess.Popen([BINARY, "--config", config], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            self.assertIn("unix:" + first, proc.stdout.readline())
            write(second)
            proc.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 20
            while (os.path.exists(first) or not os.path.exists(second)) and \
                    time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertFalse(os.path.exists(first), "the dropped socket's file stayed")
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(10)
                s.connect(second)
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                self.assertEqual(read_response(s).status, 404)  # an empty root
        finally:
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=30), 0)
            proc.stdout.close()
            proc.stderr.close()
        self.assertFalse(os.path.exists(second), "the socket a reload added stayed after exit")

    def test_reuseport_is_refused(self):
        done = subprocess.run([BINARY, self.dir, "--listen", "unix:" + self.path, "--accept",
                               "reuseport"], capture_output=True, text=True, timeout=10)
        self.assertEqual(done.returncode, 2, done.stdout)
        self.assertIn("--accept acceptor", done.stderr)

    def test_relative_paths_are_refused(self):
        done = subprocess.run([BINARY, self.dir, "--listen", "unix:lepus.sock"],
                              capture_output=True, text=True, timeout=10)
        self.assertEqual(done.returncode, 2, done.stdout)
        self.assertIn("unix:lepus.sock", done.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
