"""Safe by default for the admin (issue 33).

A port that another process holds refuses the start with exit 1 and one line
naming the address, whatever --accept says: a second lepus of the same user
once shared the port through SO_REUSEPORT and split the traffic with the first.

Started as root, lepus never serves as root unless --allow-root says so: with
no --user it switches to www-data (else nobody) after binding, `--user root`
alone is refused, and `cd / && lepus` does not serve / without ROOT naming it.
"""
import os
import pwd
import signal
import socket
import subprocess
import time
import unittest

import harness
from harness import Lepus


def start_and_fail(test, args, binary=None, root=True, cwd=None):
    """Runs `lepus ROOT ARGS` (a scratch ROOT; none when `root` is False), which
    must not start: returns (exit code, stderr). A lepus that starts serving
    fails the test at once (and is killed)."""
    roots = [harness.temp_dir(test, "admin")] if root else []
    proc = subprocess.Popen([binary or harness.require_binary()] + roots +
                            ["--access-log", "off"] + list(args), cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line:
        proc.kill()
        proc.communicate()
        test.fail("lepus started: %r" % line)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


class PortInUse(unittest.TestCase):
    def first_lepus(self, accept):
        server = Lepus(["--accept", accept, "--threads", "2"])
        self.addCleanup(server.stop, self)
        server.write("index.html", "first\n")
        return server

    def assert_refused(self, port, args):
        code, err = start_and_fail(self, ["--listen", "127.0.0.1:%d" % port] + args)
        self.assertEqual(code, 1, err)
        self.assertEqual(err.splitlines(),
                         ["lepus: port %d is already in use (127.0.0.1:%d)" % (port, port)])

    def test_second_lepus_is_refused_in_both_accept_modes(self):
        for first in ("reuseport", "acceptor"):
            server = self.first_lepus(first)
            for second in ("reuseport", "acceptor", "auto"):
                with self.subTest(first=first, second=second):
                    self.assert_refused(server.port, ["--accept", second, "--threads", "2"])
            # The first keeps the port, and every connection.
            for _ in range(8):
                self.assertEqual(server.get("/").body, b"first\n")

    def test_a_port_held_by_another_program_is_refused(self):
        for reuse_port in (False, True):
            with self.subTest(reuse_port=reuse_port), socket.socket() as taken:
                taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                # SO_REUSEPORT on the holder too: the kernel would let a socket
                # of the same user with it join, and lepus must not.
                if reuse_port:
                    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                taken.bind(("127.0.0.1", 0))
                taken.listen()
                port = taken.getsockname()[1]
                for accept in ("reuseport", "acceptor"):
                    self.assert_refused(port, ["--accept", accept, "--threads", "2"])

    def test_reload_refuses_an_address_another_lepus_holds(self):
        other = self.first_lepus("reuseport")
        config = os.path.join(harness.temp_dir(self, "admin"), "lepus.toml")
        port = harness.free_port()
        with open(config, "w") as f:
            f.write('listen = ["127.0.0.1:%d"]\n' % port)
        server = Lepus(["--config", config, "--accept", "reuseport", "--threads", "2"],
                       listen=None)
        self.addCleanup(server.stop, self)
        server.write("index.html", "second\n")
        with open(config, "w") as f:
            f.write('listen = ["127.0.0.1:%d", "127.0.0.1:%d"]\n' % (port, other.port))
        os.kill(server.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 20
        while "keeping the running" not in server.error_log_text():
            self.assertLess(time.monotonic(), deadline, server.error_log_text())
            time.sleep(0.05)
        self.assertIn("port %d is already in use" % other.port, server.error_log_text())
        for _ in range(8):
            self.assertEqual(other.get("/").body, b"first\n")
            self.assertEqual(server.get("/").body, b"second\n")


def uids(pid):
    """The real, effective, saved and file-system uids of a process."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Uid:"):
                return [int(field) for field in line.split()[1:]]
    raise AssertionError("no Uid line for %d" % pid)


def default_user():
    for name in ("www-data", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    raise AssertionError("neither www-data nor nobody exists")


class NeverRootByAccident(unittest.TestCase):
    def scratch_root(self):
        """A root directory the default user can read, with a file only root can."""
        parent = harness.temp_dir(self, "admin")
        os.chmod(parent, 0o755)
        root = os.path.join(parent, "www")
        os.mkdir(root, 0o755)
        for name, mode in (("public.html", 0o644), ("secret.html", 0o600)):
            path = os.path.join(root, name)
            with open(path, "w") as f:
                f.write(name)
            os.chmod(path, mode)
        return root

    @unittest.skipUnless(os.geteuid() == 0, "needs root, to start as root")
    def test_root_without_user_runs_as_the_default_user(self):
        user = default_user()
        server = Lepus(root=self.scratch_root(), binary=harness.REAL_BINARY)
        self.addCleanup(server.stop, self)
        self.assertEqual(uids(server.proc.pid), [user.pw_uid] * 4)
        self.assertEqual(server.get("/public.html").status, 200)
        self.assertEqual(server.get("/secret.html").status, 403)
        self.assertIn("lepus: started as root: running as %s (--user to choose, --allow-root to "
                      "stay root)\n" % user.pw_name, server.stderr())

    @unittest.skipUnless(os.geteuid() == 0, "needs root, to start as root")
    def test_allow_root_stays_root(self):
        for args in (["--allow-root"], ["--user", "root", "--allow-root"]):
            with self.subTest(args=args):
                server = Lepus(args, root=self.scratch_root(), binary=harness.REAL_BINARY)
                self.addCleanup(server.stop, self)
                self.assertEqual(uids(server.proc.pid), [0] * 4)
                self.assertEqual(server.get("/secret.html").status, 200)
                self.assertNotIn("started as root", server.stderr())

    def test_user_root_alone_is_refused(self):
        code, err = start_and_fail(self, ["--user", "root"], binary=harness.REAL_BINARY)
        self.assertEqual(code, 2, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("--user root serves every file root can read: add --allow-root", err)

    def test_current_directory_slash_is_not_served(self):
        code, err = start_and_fail(self, ["--listen", "127.0.0.1:0"], binary=harness.REAL_BINARY,
                                   root=False, cwd="/")
        self.assertEqual(code, 2, err)
        self.assertEqual(err.splitlines(), ["lepus: the current directory is /: give ROOT / to "
                                            "serve the whole file system (see lepus --help)"])

    def test_root_slash_given_explicitly_is_served(self):
        server = Lepus(root="/", binary=harness.REAL_BINARY)
        self.addCleanup(server.stop, self)
        self.assertIn("serving / on", server.first_line)


if __name__ == "__main__":
    harness.main()
