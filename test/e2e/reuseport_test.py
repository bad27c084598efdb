"""--accept reuseport end to end (issue 13): each reactor accepts on its own
SO_REUSEPORT listener, through the same admission code as the acceptor thread:
requests are served on every reactor, keepalive and pipelining work, and
--max-connections answers the newcomer over the limit with a 503 and closes it."""
import socket
import time
import unittest

import harness
from harness import Lepus


class ReusePort(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not harness.BINARY:
            raise AssertionError("LEPUS_BINARY is not set")
        # --defer-accept off: the test holds silent connections, which a deferred
        # listener would not hand over until they send something.
        cls.server = Lepus(["--accept", "reuseport", "--threads", "2", "--max-connections", "4",
                            "--defer-accept", "off",
                            "--status-path", "/status", "--status-allow", "127.0.0.1"])
        cls.server.write("index.html", "hello")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def test_requests_are_served(self):
        for _ in range(20):
            r = self.server.get("/index.html")
            self.assertEqual((r.status, r.body), (200, b"hello"))
        self.assertIn("accept: in the reactors (SO_REUSEPORT)", self.server.error_log_text())

    def test_keepalive_and_pipelining(self):
        with self.server.connect() as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /index.html HTTP/1.1\r\nHost: x\r\n\r\n")
            first = harness.read_response(s)
            second = harness.read_response(s, buffer=first.leftover)
        self.assertEqual((first.status, second.status), (200, 200))
        self.assertEqual(second.body, b"hello")

    def test_over_max_connections_gets_503_and_close(self):
        held = []
        try:
            # Open connections until the server refuses one (4 allowed in all).
            refused = None
            for _ in range(8):
                s = self.server.connect()
                s.settimeout(0.5)
                try:
                    data = s.recv(4096)
                except socket.timeout:
                    held.append(s)
                    continue
                refused = data
                s.close()
                break
            self.assertIsNotNone(refused, "no connection was refused")
            self.assertTrue(refused.startswith(b"HTTP/1.1 503 "), refused)
            self.assertIn(b"Retry-After: 1\r\n", refused)
            self.assertEqual(len(held), 4)
            # Those held are served.
            held[0].settimeout(5)
            held[0].sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            self.assertEqual(harness.read_response(held[0]).status, 200)
        finally:
            for s in held:
                s.close()
        # Once they leave, new connections are admitted again.
        deadline = time.monotonic() + 5
        while True:
            try:
                r = self.server.get("/")
                if r.status == 200:
                    break
            except (ConnectionError, ValueError):
                pass
            self.assertLess(time.monotonic(), deadline, "not admitted after the others left")
            time.sleep(0.05)


if __name__ == "__main__":
    unittest.main(verbosity=2)
