"""Slow and idle clients end to end (issue 7): a slowloris attack of 1,000
connections trickling their headers is cut off at the header timeout while a
normal client keeps being served, and 10,000 idle connections cost lepus only a
few hundred bytes each. The real binary, real sockets on 127.0.0.1; each test
bounds its own duration and prints the figures it measured."""
import selectors
import socket
import threading
import time
import unittest

import harness
from harness import Lepus, raise_fd_limit

HEADER_TIMEOUT = 3.0


class NormalClient(threading.Thread):
    """Fetches / on a fresh connection every `interval` seconds until stopped,
    recording every status (or exception) and the slowest answer."""

    def __init__(self, server, interval=0.1):
        super().__init__(daemon=True)
        self.server, self.interval = server, interval
        self.statuses, self.errors, self.slowest = [], [], 0.0
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            start = time.monotonic()
            try:
                status = self.server.request(
                    "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", timeout=10).status
                self.statuses.append(status)
            except OSError as e:
                self.errors.append(repr(e))
            self.slowest = max(self.slowest, time.monotonic() - start)
            self.stopping.wait(self.interval)

    def stop(self):
        self.stopping.set()
        self.join(timeout=20)


class Slowloris(unittest.TestCase):
    CONNECTIONS = 1000
    BYTE_INTERVAL = 1.5  # seconds between two bytes of one slow client

    def test_trickled_headers_are_cut_at_the_header_timeout(self):
        raise_fd_limit(65536)
        server = Lepus(["--threads", "2", "--header-timeout", "%ds" % HEADER_TIMEOUT],
                       access_log=False)
        server.write("index.html", "hello")
        slow = []
        connected_at = []
        normal = NormalClient(server)
        try:
            request = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
            for _ in range(self.CONNECTIONS):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                s.setblocking(False)
                slow.append(s)
                connected_at.append(time.monotonic())
            normal.start()
            selector = selectors.DefaultSelector()
            start = time.monotonic()
            # Connection i sends its first byte at start + i/N * interval, then one byte
            # per interval: an even trickle of N/interval bytes per second in all.
            sent = [0] * self.CONNECTIONS
            first_byte = [None] * self.CONNECTIONS
            closed_at = [None] * self.CONNECTIONS
            answered = 0
            for i, s in enumerate(slow):
                selector.register(s, selectors.EVENT_READ, i)
            open_count = self.CONNECTIONS
            deadline = start + self.BYTE_INTERVAL + HEADER_TIMEOUT + 20
            while open_count and time.monotonic() < deadline:
                now = time.monotonic()
                for i, s in enumerate(slow):
                    if closed_at[i] is not None:
                        continue
                    due = start + (i / self.CONNECTIONS + sent[i]) * self.BYTE_INTERVAL
                    if now >= due and sent[i] < len(request):
                        try:
                            s.send(request[sent[i]:sent[i] + 1])
                        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                            continue  # the read side reports the close
                        if sent[i] == 0:
                            first_byte[i] = time.monotonic()
                        sent[i] += 1
                for key, _ in selector.select(timeout=0.05):
                    i = key.data
                    try:
                        data = key.fileobj.recv(4096)
                    except ConnectionResetError:
                        data = b""
                    except BlockingIOError:
                        continue
                    if data:
                        answered += 1  # e.g. a 408 before the close: allowed
                        continue
                    closed_at[i] = time.monotonic()
                    selector.unregister(key.fileobj)
                    open_count -= 1
            normal.stop()
            self.assertEqual(open_count, 0, "%d slow connections were never closed" % open_count)
            # The header deadline runs from accept (nginx's client_header_timeout):
            # a connection cannot buy time by waiting before its first byte.
            delays = [closed_at[i] - connected_at[i] for i in range(self.CONNECTIONS)
                      if first_byte[i] is not None]
            never_sent = sum(1 for t in first_byte if t is None)
            print("\nslowloris: %d connections closed %.2f-%.2f s after connecting "
                  "(header timeout %.0f s; %d closed before sending, %d got bytes back); "
                  "normal client meanwhile: %d requests, all %s, slowest %.3f s, errors %d"
                  % (self.CONNECTIONS, min(delays), max(delays), HEADER_TIMEOUT, never_sent,
                     answered, len(normal.statuses), sorted(set(normal.statuses)),
                     normal.slowest, len(normal.errors)))
            self.assertEqual(never_sent, 0, "connections closed before their first byte")
            # The deadline runs from accept and is never extended by later bytes.
            self.assertGreaterEqual(min(delays), HEADER_TIMEOUT - 0.25)
            self.assertLess(max(delays), HEADER_TIMEOUT + 10)
            self.assertEqual(normal.errors, [])
            self.assertGreater(len(normal.statuses), 5)
            self.assertEqual(set(normal.statuses), {200})
            self.assertEqual(server.request(b"GET / HTTP/1.1\r\nHost: x\r\n"
                                            b"Connection: close\r\n\r\n").status, 200)
        finally:
            normal.stopping.set()
            for s in slow:
                s.close()
            server.stop(self)


class IdleFlood(unittest.TestCase):
    CONNECTIONS = 10000
    MAX_BYTES_PER_CONNECTION = 3 * 1024

    def test_ten_thousand_idle_connections_cost_little_memory(self):
        raise_fd_limit(65536)
        server = Lepus(["--threads", "2"], access_log=False)
        server.write("index.html", "hello")
        sockets = []
        try:
            # Warm up: every reactor has served, pools and caches exist.
            for _ in range(50):
                self.assertEqual(server.get("/").status, 200)
            time.sleep(0.5)
            fds_before, rss_before = server.fd_count(), server.rss_kib()
            for _ in range(self.CONNECTIONS):
                sockets.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            deadline = time.monotonic() + 30
            while server.fd_count() < fds_before + self.CONNECTIONS and \
                    time.monotonic() < deadline:
                time.sleep(0.2)
            self.assertGreaterEqual(server.fd_count(), fds_before + self.CONNECTIONS)
            # A normal client is served while they are all held.
            self.assertEqual(server.get("/").status, 200)
            time.sleep(0.5)
            rss_held = server.rss_kib()
            per_connection = (rss_held - rss_before) * 1024 / self.CONNECTIONS
            for s in sockets:
                s.close()
            sockets = []
            deadline = time.monotonic() + 30
            while server.fd_count() > fds_before and time.monotonic() < deadline:
                time.sleep(0.2)
            fds_after = server.fd_count()
            print("\nidle flood: %d idle connections; RSS %d KiB -> %d KiB, %.0f bytes per "
                  "idle connection; fds %d -> %d held -> %d after they left"
                  % (self.CONNECTIONS, rss_before, rss_held, per_connection, fds_before,
                     fds_before + self.CONNECTIONS, fds_after))
            self.assertLess(per_connection, self.MAX_BYTES_PER_CONNECTION)
            self.assertEqual(fds_after, fds_before, "descriptors leaked")
            self.assertEqual(server.get("/").status, 200)
        finally:
            for s in sockets:
                s.close()
            server.stop(self)


if __name__ == "__main__":
    harness.main()
