"""SIGHUP with a changed `listen` in the config file (issue 8): the new address
is opened, the dropped one closed, connections already open on the old address
keep being served, and a new address that cannot be bound refuses the whole
reload while lepus keeps serving. Registered for epoll and io_uring."""
import os
import signal
import socket
import subprocess
import time
import unittest

import harness
from harness import Lepus, read_response


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path="/", keep=None):
    """One GET; on `keep` (an open socket) when given, else a new connection."""
    s = keep or socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    response = read_response(s)
    if not keep:
        s.close()
    return response


def refuses(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except ConnectionRefusedError:
        return True


def wait_for(predicate, seconds=5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class ListenReload(unittest.TestCase):
    accept = ["--accept", "acceptor"]  # the acceptor thread opens and closes the listeners

    def setUp(self):
        self.first, self.second = free_port(), free_port()
        self.server = None

    def tearDown(self):
        if self.server:
            self.server.stop(self)

    def start(self):
        self.config = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                   "lepus-listen-%d.toml" % os.getpid())
        self.write_config([self.first])
        self.server = Lepus(["--config", self.config] + self.accept, listen=None)
        self.server.write("index.html", "hello\n")
        self.assertIn(":%d/" % self.first, self.server.first_line)

    def write_config(self, ports):
        with open(self.config, "w") as f:
            f.write("listen = [%s]\n" % ", ".join('"127.0.0.1:%d"' % p for p in ports))

    def reload(self, marker, count=1):
        os.kill(self.server.proc.pid, signal.SIGHUP)
        self.assertTrue(wait_for(lambda: self.server.error_log_text().count(marker) >= count),
                        self.server.error_log_text())

    def test_changed_address_is_opened_and_old_one_closed(self):
        self.start()
        kept = socket.create_connection(("127.0.0.1", self.first), timeout=5)
        self.assertEqual(get(self.first, keep=kept).status, 200)

        self.write_config([self.second])
        self.reload("configuration reloaded")
        self.assertTrue(wait_for(lambda: refuses(self.first)), "old address still accepts")
        self.assertEqual(get(self.second).status, 200)
        # A connection accepted on the old address is not dropped by the reload.
        self.assertEqual(get(self.first, keep=kept).body, b"hello\n")
        kept.close()
        log = self.server.error_log_text()
        self.assertIn("listening on 127.0.0.1:%d" % self.second, log)
        self.assertIn("no longer listening on 127.0.0.1:%d" % self.first, log)

        # Both at once, then back to the first only.
        self.write_config([self.first, self.second])
        self.reload("configuration reloaded", 2)
        self.assertEqual(get(self.first).status, 200)
        self.assertEqual(get(self.second).status, 200)
        self.write_config([self.first])
        self.reload("configuration reloaded", 3)
        self.assertTrue(wait_for(lambda: refuses(self.second)))
        self.assertEqual(get(self.first).status, 200)

    def test_address_that_cannot_be_bound_refuses_the_reload(self):
        self.start()
        with socket.socket() as taken:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            taken.bind(("127.0.0.1", self.second))
            taken.listen()
            self.write_config([self.second])
            self.reload("keeping the running configuration")
        self.assertEqual(get(self.first).status, 200)
        self.assertIn("127.0.0.1:%d" % self.second, self.server.error_log_text())

    def test_unchanged_listen_keeps_the_socket(self):
        self.start()
        listeners = self.listening_inodes()
        self.reload("configuration reloaded")
        self.assertEqual(self.listening_inodes(), listeners)
        self.assertEqual(get(self.first).status, 200)

    def test_an_h2c_listener_added_and_dropped_by_reload(self):
        # h2c:// (HTTP/2 with prior knowledge only) is opened and closed as any
        # other address, and its connections are HTTP/2 from the first byte.
        self.start()
        with open(self.config, "w") as f:
            f.write('listen = ["127.0.0.1:%d", "h2c://127.0.0.1:%d"]\n' % (self.first, self.second))
        self.reload("configuration reloaded")
        self.assertEqual(get(self.first).status, 200)
        with socket.create_connection(("127.0.0.1", self.second), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = s.recv(4096)
        self.assertFalse(answer.startswith(b"HTTP/"), answer)
        self.assertEqual(answer[3], 4, answer)  # the server's SETTINGS, then GOAWAY (RFC 9113 §3.4)
        done = subprocess.run(["curl", "-s", "--max-time", "10", "--http2-prior-knowledge", "-w",
                               "%{http_version}", "http://127.0.0.1:%d/" % self.second],
                              capture_output=True, timeout=30)
        self.assertEqual(done.stdout, b"hello\n2", done.stderr)
        self.write_config([self.first])
        self.reload("configuration reloaded", 2)
        self.assertTrue(wait_for(lambda: refuses(self.second)), "h2c:// address still accepts")
        self.assertEqual(get(self.first).status, 200)

    def listening_inodes(self):
        """Inodes of the sockets lepus listens on, from /proc/net/tcp."""
        port_hex = "%04X" % self.first
        with open("/proc/net/tcp") as f:
            return sorted(line.split()[9] for line in f
                          if line.split()[1].endswith(":" + port_hex) and line.split()[3] == "0A")


class ListenReloadInReactors(ListenReload):
    """The same with in-reactor accept: each reactor opens and closes its own
    SO_REUSEPORT socket of the address. As many reactors as the cores lepus may
    run on leave no core for an acceptor thread: --accept auto (the default)
    then chooses in-reactor accept."""
    accept = ["--accept", "auto", "--threads", str(len(os.sched_getaffinity(0)))]

    def start(self):
        super().start()
        chosen = "accept: in the reactors (SO_REUSEPORT; --accept auto:"
        self.assertTrue(wait_for(lambda: chosen in self.server.error_log_text()),
                        self.server.error_log_text())

    def test_a_unix_listener_refuses_the_reload(self):
        self.start()
        path = os.path.join(self.server.tmp, "added.sock")
        with open(self.config, "w") as f:
            f.write('listen = ["127.0.0.1:%d", "unix:%s"]\n' % (self.first, path))
        self.reload("keeping the running configuration")
        self.assertIn("needs the acceptor thread", self.server.error_log_text())
        self.assertEqual(get(self.first).status, 200)


if __name__ == "__main__":
    harness.main()
