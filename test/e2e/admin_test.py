"""Safe by default for the admin (issue 33).

A port that another process holds refuses the start with exit 1 and one line
naming the address, whatever --accept says: a second lepus of the same user
once shared the port through SO_REUSEPORT and split the traffic with the first.
"""
import os
import signal
import socket
import subprocess
import time
import unittest

import harness
from harness import Lepus


def start_and_fail(test, args):
    """Runs `lepus ARGS`, which must not start: returns (exit code, stderr).
    A lepus that starts serving fails the test at once (and is killed)."""
    root = harness.temp_dir(test, "admin")
    proc = subprocess.Popen([harness.require_binary(), root, "--access-log", "off"] + list(args),
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


if __name__ == "__main__":
    harness.main()
