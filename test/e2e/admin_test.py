"""Safe by default for the admin (issue 33).

A port that another process holds refuses the start with exit 1 and one line
naming the address, whatever --accept says: a second lepus of the same user
once shared the port through SO_REUSEPORT and split the traffic with the first.

Started as root, lepus never serves as root unless --allow-root says so: with
no --user it switches to www-data (else nobody) after binding, `--user root`
alone is refused, and `cd / && lepus` does not serve / without ROOT naming it.

--pid-file and `lepus -s reload|reopen|stop|quit` reach lepus without systemd;
a stale PID file (no such process, or not lepus) is refused with exit 1.
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


def scratch_root(test):
    """A root directory the default user can read, with a file only root can."""
    parent = harness.temp_dir(test, "admin")
    os.chmod(parent, 0o755)
    root = os.path.join(parent, "www")
    os.mkdir(root, 0o755)
    for name, mode in (("public.html", 0o644), ("secret.html", 0o600)):
        path = os.path.join(root, name)
        with open(path, "w") as f:
            f.write(name)
        os.chmod(path, mode)
    return root


class NeverRootByAccident(unittest.TestCase):
    @unittest.skipUnless(os.geteuid() == 0, "needs root, to start as root")
    def test_root_without_user_runs_as_the_default_user(self):
        user = default_user()
        server = Lepus(root=scratch_root(self), binary=harness.REAL_BINARY)
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
                server = Lepus(args, root=scratch_root(self), binary=harness.REAL_BINARY)
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


def signal_lepus(word, pid_file, *more):
    """lepus -s WORD --pid-file PID_FILE: (exit code, stderr)."""
    done = subprocess.run([harness.require_binary(), "-s", word, "--pid-file", pid_file] +
                          list(more), capture_output=True, text=True, timeout=30)
    return done.returncode, done.stderr


class PidFile(unittest.TestCase):
    def start(self, args=(), **kwargs):
        self.pid_file = os.path.join(harness.temp_dir(self, "admin"), "lepus.pid")
        server = Lepus(["--pid-file", self.pid_file] + list(args), **kwargs)
        self.addCleanup(server.stop, self)
        return server

    def wait_for_log(self, server, text, count=1):
        deadline = time.monotonic() + 20
        while server.error_log_text().count(text) < count:
            self.assertLess(time.monotonic(), deadline, server.error_log_text())
            time.sleep(0.05)

    def pid_in_file(self):
        with open(self.pid_file) as f:
            return f.read()

    def test_signals_reach_lepus_through_its_pid_file(self):
        server = self.start()
        self.assertEqual(self.pid_in_file(), "%d\n" % server.proc.pid)
        self.assertEqual(signal_lepus("reload", self.pid_file), (0, ""))
        self.wait_for_log(server, "SIGHUP: configuration reloaded")
        self.assertEqual(signal_lepus("reopen", self.pid_file), (0, ""))
        self.wait_for_log(server, "SIGUSR1: logs reopened")
        self.assertEqual(server.get("/").status, 404)

    def test_stop_and_quit_end_lepus_and_its_pid_file(self):
        for word in ("stop", "quit"):
            with self.subTest(word=word):
                server = self.start()
                self.assertEqual(signal_lepus(word, self.pid_file), (0, ""))
                self.assertEqual(server.proc.wait(timeout=30), 0)
                self.assertIn("stopping", server.error_log_text())
                self.assertFalse(os.path.exists(self.pid_file))
                code, err = signal_lepus(word, self.pid_file)
                self.assertEqual(code, 1)
                self.assertEqual(err, "lepus: no pid file '%s': is lepus running (with "
                                      "--pid-file)?\n" % self.pid_file)

    def test_a_stale_pid_file_is_refused(self):
        path = os.path.join(harness.temp_dir(self, "admin"), "lepus.pid")
        ended = subprocess.Popen(["true"])
        ended.wait()
        with subprocess.Popen(["sleep", "60"]) as other:
            try:
                for text, message in (
                        ("%d\n" % ended.pid, "is stale: no process %d is running" % ended.pid),
                        ("%d\n" % other.pid, "is stale: process %d is 'sleep', not lepus" %
                         other.pid),
                        ("lepus\n", "holds no process id")):
                    with self.subTest(text=text):
                        with open(path, "w") as f:
                            f.write(text)
                        code, err = signal_lepus("stop", path)
                        self.assertEqual(code, 1)
                        self.assertEqual(err, "lepus: pid file '%s' %s\n" % (path, message))
                self.assertIsNone(other.poll(), "the process that is not lepus was signalled")
            finally:
                other.kill()

    def test_signal_needs_a_pid_file(self):
        done = subprocess.run([harness.require_binary(), "-s", "reload"], capture_output=True,
                              text=True, timeout=30)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(done.stderr,
                         "lepus: -s needs --pid-file (or a --config that sets pid_file)\n")

    def test_signal_finds_the_pid_file_in_the_config(self):
        server = self.start()
        config = os.path.join(harness.temp_dir(self, "admin"), "lepus.toml")
        with open(config, "w") as f:
            f.write('pid_file = "%s"\n' % self.pid_file)
        done = subprocess.run([harness.require_binary(), "-s", "reload", "--config", config],
                              capture_output=True, text=True, timeout=30, cwd="/")
        self.assertEqual((done.returncode, done.stderr), (0, ""))
        self.wait_for_log(server, "SIGHUP: configuration reloaded")

    @unittest.skipUnless(os.geteuid() == 0, "needs root, to start as root")
    def test_root_writes_the_pid_file_before_switching_user(self):
        # The pid file's directory is root's alone (0700): only root can write it.
        root = scratch_root(self)
        server = self.start(root=root, binary=harness.REAL_BINARY)
        self.assertEqual(uids(server.proc.pid), [default_user().pw_uid] * 4)
        self.assertEqual(self.pid_in_file(), "%d\n" % server.proc.pid)
        self.assertEqual(os.stat(self.pid_file).st_uid, 0)
        self.assertEqual(signal_lepus("reopen", self.pid_file), (0, ""))
        self.wait_for_log(server, "SIGUSR1: logs reopened")


if __name__ == "__main__":
    harness.main()
