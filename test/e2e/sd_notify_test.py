"""systemd Type=notify: lepus sends READY=1 once it serves, RELOADING=1 and
READY=1 around a SIGHUP reload, STOPPING=1 on SIGTERM, to $NOTIFY_SOCKET (a
unix datagram socket the test holds, as systemd does); nothing without it."""
import os
import re
import signal
import socket
import time
import unittest

import harness
from harness import Lepus, read_response


class NotifySocket(unittest.TestCase):
    def setUp(self):
        self.dir = harness.temp_dir(self, "notify")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(10)
        self.saved = os.environ.get("NOTIFY_SOCKET")

    def tearDown(self):
        self.sock.close()
        if self.saved is None:
            os.environ.pop("NOTIFY_SOCKET", None)
        else:
            os.environ["NOTIFY_SOCKET"] = self.saved

    def message(self):
        return self.sock.recv(4096).decode()

    def start(self, socket_name):
        os.environ["NOTIFY_SOCKET"] = socket_name
        server = Lepus()
        os.environ.pop("NOTIFY_SOCKET")
        server.write("index.html", "ok\n")
        return server

    def test_ready_reloading_stopping(self):
        server = self.start(self.path)
        try:
            self.assertEqual(self.message(), "READY=1")
            # READY=1 comes after the listener is bound: a request succeeds now.
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_response(s).status, 200)
            os.kill(server.proc.pid, signal.SIGHUP)
            reloading = self.message().split("\n")
            self.assertEqual(reloading[0], "RELOADING=1")
            # Type=notify-reload (systemd 253+) wants the time of the reload.
            self.assertTrue(reloading[1].startswith("MONOTONIC_USEC="), reloading)
            self.assertGreater(int(reloading[1].split("=")[1]), 0)
            self.assertEqual(self.message(),
                             "READY=1\nSTATUS=configuration reloaded (0 sites)")
        finally:
            server.stop(self)
        self.assertEqual(self.message(), "STOPPING=1")

    def test_failed_reload_says_why_in_status_and_error_log(self):
        """Issue 33: a refused reload showed nowhere but stderr; now STATUS=
        names the file and line, and so does the error log."""
        config = os.path.join(self.dir, "lepus.toml")
        with open(config, "w") as f:
            f.write('index = ["index.html"]\n')
        os.environ["NOTIFY_SOCKET"] = self.path
        server = Lepus(["--config", config])
        os.environ.pop("NOTIFY_SOCKET")
        server.write("index.html", "ok\n")
        try:
            self.assertEqual(self.message(), "READY=1")
            with open(config, "w") as f:
                f.write('index = ["index.html"]\nno_such_key = 1\n')
            os.kill(server.proc.pid, signal.SIGHUP)
            self.assertTrue(self.message().startswith("RELOADING=1\n"))
            ready = self.message()
            self.assertRegex(ready, r"^READY=1\nSTATUS=reload failed: %s:2:\d+: unknown key "
                             "'no_such_key'$" % re.escape(config))
            # The error log is written by its own thread: wait for the line.
            deadline = time.monotonic() + 5
            while "keeping the running one" not in server.error_log_text() and \
                    time.monotonic() < deadline:
                time.sleep(0.05)
            log = server.error_log_text()
            self.assertRegex(log, r"SIGHUP: %s:2:\d+: unknown key 'no_such_key'" % re.escape(config))
            self.assertIn("keeping the running one", log)
            self.assertEqual(server.get("/").status, 200)
        finally:
            server.stop(self)

    def test_abstract_socket_name(self):
        self.sock.close()
        name = "lepus-notify-%d" % os.getpid()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + name)
        self.sock.settimeout(10)
        server = self.start("@" + name)
        try:
            self.assertEqual(self.message(), "READY=1")
        finally:
            server.stop(self)

    def test_nothing_without_notify_socket(self):
        os.environ.pop("NOTIFY_SOCKET", None)
        server = Lepus()
        server.stop(self)
        self.sock.settimeout(0.5)
        with self.assertRaises(socket.timeout):
            self.sock.recv(4096)


if __name__ == "__main__":
    harness.main()
