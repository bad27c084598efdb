"""Reactor core end to end: many idle connections, timeouts, fd exhaustion,
graceful shutdown. Real lepus binary, real sockets on 127.0.0.1."""
import os
import re
import resource
import signal
import socket
import time
import unittest

import harness
from harness import Lepus, is_closed, raise_fd_limit, read_response


def open_idle(port, count):
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.connect(("127.0.0.1", port))
        sockets.append(s)
    return sockets


def simple_get(server):
    return server.request("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")


class ManyIdleConnections(unittest.TestCase):
    def test_ten_thousand_idle_connections_spread_over_reactors(self):
        raise_fd_limit(65536)
        server = Lepus(["--threads", "4"])
        server.write("index.html", "hello")
        sockets = []
        try:
            # The server's own descriptors (listeners, pollers, timers, logs):
            # the 10,000 connections come on top of them.
            baseline = server.fd_count()
            sockets = open_idle(server.port, 10000)
            # Every connection is accepted and held: a request on a fresh one
            # still works, and the server owns 10,000 more descriptors.
            self.assertEqual(simple_get(server).status, 200)
            deadline = time.time() + 30
            while server.fd_count() < baseline + 10000 and time.time() < deadline:
                time.sleep(0.2)
            self.assertGreaterEqual(server.fd_count(), baseline + 10000)
            # SIGUSR1 reopens the logs and reports the connections per reactor.
            os.kill(server.proc.pid, signal.SIGUSR1)
            counts = None
            deadline = time.time() + 10
            while counts is None and time.time() < deadline:
                time.sleep(0.2)
                found = re.findall(r"connections per reactor: ([\d ]+)", server.error_log_text())
                if found:
                    counts = [int(c) for c in found[-1].split()]
            self.assertIsNotNone(counts, server.error_log_text()[-2000:])
            self.assertEqual(len(counts), 4)
            self.assertGreaterEqual(sum(counts), 10000)
            mean = sum(counts) / 4
            for c in counts:
                self.assertLess(abs(c - mean), 0.2 * mean, counts)
        finally:
            for s in sockets:
                s.close()
            server.stop(self)


class Timeouts(unittest.TestCase):
    def setUp(self):
        self.server = Lepus(["--keepalive-timeout", "1s", "--header-timeout", "2s"])
        self.server.write("index.html", "hello")

    def tearDown(self):
        self.server.stop(self)

    def test_idle_connection_closed_after_keepalive_timeout(self):
        with self.server.connect() as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertEqual(read_response(s).status, 200)
            self.assertTrue(is_closed(s, timeout=15), "idle keepalive connection was not closed")

    def test_trickled_header_closed_at_header_timeout_while_others_served(self):
        trickler = self.server.connect()
        request = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
        closed = False
        start = time.time()
        served_meanwhile = 0
        for byte in request:
            try:
                trickler.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            # Another client is served while the slow one trickles.
            if simple_get(self.server).status == 200:
                served_meanwhile += 1
            if is_closed_now(trickler):
                closed = True
                break
            time.sleep(0.25)
            if time.time() - start > 20:
                break
        trickler.close()
        self.assertTrue(closed, "a header trickled byte by byte was never cut off")
        self.assertGreater(served_meanwhile, 0)


def is_closed_now(s):
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.setblocking(True)


class FdExhaustion(unittest.TestCase):
    def test_low_fd_limit_does_not_spin_and_recovers(self):
        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

        server = Lepus(["--threads", "2"], preexec=low_limit, access_log=False)
        server.write("index.html", "hello")
        held = []
        try:
            for _ in range(1000):
                s = socket.socket()
                s.setblocking(False)
                try:
                    s.connect(("127.0.0.1", server.port))
                except BlockingIOError:
                    pass
                held.append(s)
            time.sleep(1.0)
            self.assertIsNone(server.proc.poll(), "lepus died")
            # While clients keep the server out of descriptors, it must wait, not spin.
            before = server.cpu_seconds()
            time.sleep(2.0)
            used = server.cpu_seconds() - before
            self.assertLess(used, 0.5, "lepus burnt %.2f s of CPU in 2 s while out of fds" % used)
            for s in held:
                s.close()
            held = []
            # Service resumes once the others go.
            ok = False
            deadline = time.time() + 20
            while not ok and time.time() < deadline:
                try:
                    ok = simple_get(server).status == 200
                except OSError:
                    time.sleep(0.2)
            self.assertTrue(ok, "lepus did not serve again after the clients left")
        finally:
            for s in held:
                s.close()
            server.stop(self)


class GracefulShutdown(unittest.TestCase):
    def test_sigterm_lets_a_large_response_finish(self):
        server = Lepus(["--threads", "1", "--shutdown-timeout", "60s"])
        size = 64 << 20
        server.write("big.bin", os.urandom(1 << 20) * 64)
        s = server.connect()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        received = bytearray(s.recv(65536))
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            received += chunk
        s.close()
        received = bytes(received)
        head, body = received.split(b"\r\n\r\n", 1)
        self.assertIn(b"200 OK", head)
        self.assertEqual(len(body), size)
        self.assertEqual(server.proc.wait(timeout=30), 0)
        server.stop(self)


if __name__ == "__main__":
    harness.main()
