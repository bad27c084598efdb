"""Limits that must hold when a resource runs short (issue 32, items 5, 9 and 10).

- WebSocket tunnels leave the proxy's pool: silent tunnels beyond --proxy-pool
  do not starve plain requests, and --proxy-tunnels bounds them (503 beyond).
- The open-file cache is sized from RLIMIT_NOFILE: a client fetching more
  distinct files than the descriptor limit allows gets no 500, and a new
  connection is still accepted.
- HTTP/2: a client that opens a zero window and dribbles 1-byte WINDOW_UPDATEs
  is closed once it falls below the minimum send rate, rather than keeping
  its streams (and their memory) forever.
"""
import json
import resource
import socket
import struct
import threading
import time
import unittest

import harness
from harness import Lepus, read_response, recv_until
from http2_test import (DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PREFACE, SETTINGS, frame,
                        request_block)


def exchange(port, raw, timeout=10):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        return read_response(s)


def get(port, path):
    return exchange(port, b"GET %s HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" %
                    path.encode())


class SilentTunnelBackend:
    """An HTTP/1.1 backend: an upgrade gets 101 and then silence until the
    client leaves; anything else gets 200 "ok" (keepalive)."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.address = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.tunnels = 0
        self.lock = threading.Lock()
        self.sockets = []
        self.stopping = False
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while not self.stopping:
            try:
                s, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.sockets.append(s)
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                if b"\r\nupgrade:" in head.lower():
                    s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              b"Connection: Upgrade\r\n\r\n")
                    with self.lock:
                        self.tunnels += 1
                    while s.recv(65536):  # silence, until lepus closes the tunnel
                        pass
                    return
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
        except OSError:
            pass
        finally:
            s.close()

    def stop(self):
        self.stopping = True
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class TunnelsLeaveThePool(unittest.TestCase):
    """Item 5: 40 silent WebSockets took 32 of 32 pool connections and plain
    requests got 503 after the queue timeout."""

    POOL, TUNNELS = 2, 5

    def setUp(self):
        self.backend = SilentTunnelBackend()
        self.addCleanup(self.backend.stop)
        self.server = Lepus(["--proxy", self.backend.address, "--threads", "1",
                             "--proxy-pool", str(self.POOL), "--proxy-queue-timeout", "2s",
                             "--proxy-tunnels", str(self.TUNNELS), "--keepalive-timeout", "60s",
                             "--status-path", "/_status"])
        self.addCleanup(self.server.stop, self)

    def upgrade(self):
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  b"Sec-WebSocket-Version: 13\r\n\r\n")
        head = recv_until(s, b"\r\n\r\n").split(b"\r\n\r\n", 1)[0].decode("latin-1")
        return s, head

    def proxy_gauges(self):
        return json.loads(get(self.server.port, "/_status").body)["reactors"][0]["proxy"]

    def test_silent_tunnels_beyond_the_pool_leave_requests_served(self):
        for i in range(self.TUNNELS):
            _, head = self.upgrade()
            self.assertTrue(head.startswith("HTTP/1.1 101 "), "upgrade %d: %s" % (i + 1, head))
        # Every tunnel silent, more of them than the pool has connections:
        # a plain request still gets a connection of its own.
        r = get(self.server.port, "/plain")
        self.assertEqual((r.status, r.body), (200, b"ok\n"))
        gauges = self.proxy_gauges()
        self.assertEqual(gauges["tunnels"], self.TUNNELS)
        self.assertLessEqual(gauges["busy"] + gauges["idle"], self.POOL)
        # One tunnel more than --proxy-tunnels allows: 503 with Retry-After,
        # never sent to the backend.
        s, head = self.upgrade()
        self.assertTrue(head.startswith("HTTP/1.1 503 "), head)
        self.assertIn("\r\nRetry-After: ", head)
        self.assertEqual(self.backend.tunnels, self.TUNNELS)
        s.close()
        # Requests are still served, and a tunnel that ends gives its slot back.
        self.assertEqual(get(self.server.port, "/plain").status, 200)

    def test_a_closed_tunnel_gives_its_slot_back(self):
        tunnels = [self.upgrade() for _ in range(self.TUNNELS)]
        for s, head in tunnels:
            self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
        tunnels[0][0].close()
        deadline = time.monotonic() + 10
        while self.proxy_gauges()["tunnels"] != self.TUNNELS - 1:
            self.assertLess(time.monotonic(), deadline, "the closed tunnel is still counted")
            time.sleep(0.05)
        _, head = self.upgrade()
        self.assertTrue(head.startswith("HTTP/1.1 101 "), head)
        self.assertEqual(get(self.server.port, "/plain").status, 200)


class FileCacheUnderTheDescriptorLimit(unittest.TestCase):
    """Item 10: with `ulimit -n 1500`, one client fetching 1,500 distinct files
    filled the open-file cache with descriptors: 500s, refused connections."""

    LIMIT, FILES = 256, 400

    def test_many_distinct_files_never_starve_accept(self):
        def low_limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.LIMIT, self.LIMIT))

        server = Lepus(["--threads", "2"], preexec=low_limit)
        self.addCleanup(server.stop, self)
        body = bytes(range(256)) * 64  # 16 KiB
        for i in range(self.FILES):
            server.write("f/%d.bin" % i, body)
        statuses = {}
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            for i in range(self.FILES):
                s.sendall(b"GET /f/%d.bin HTTP/1.1\r\nHost: h\r\n\r\n" % i)
                r = read_response(s)
                statuses[r.status] = statuses.get(r.status, 0) + 1
                if r.status != 200:
                    break
                self.assertEqual(len(r.body), len(body))
        self.assertEqual(statuses, {200: self.FILES})
        # More descriptors than the limit allows were asked for, yet a new
        # connection is accepted and answered.
        for i in (0, self.FILES - 1):
            self.assertEqual(get(server.port, "/f/%d.bin" % i).status, 200)
        self.assertLess(server.fd_count(), self.LIMIT)


WINDOW_UPDATE = 8


def drip(port, streams, path, increment, period, seconds):
    """An h2c client with a zero initial window that asks for `path` on
    `streams` streams, then opens each stream's window by `increment` bytes
    every `period` seconds, reading all the while. Returns (seconds until the
    connection closed or None, DATA bytes, streams ended)."""
    ids = [1 + 2 * i for i in range(streams)]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # SETTINGS_INITIAL_WINDOW_SIZE 0: no DATA may come until WINDOW_UPDATE.
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) + b"".join(
            frame(HEADERS, END_HEADERS | END_STREAM, i, request_block(path)) for i in ids))
        start = time.monotonic()
        next_update = start
        buffer, data_bytes, ended = b"", 0, set()
        while time.monotonic() - start < seconds:
            now = time.monotonic()
            if now >= next_update:
                update = struct.pack(">I", increment)
                try:
                    sock.sendall(frame(WINDOW_UPDATE, 0, 0, update) + b"".join(
                        frame(WINDOW_UPDATE, 0, i, update) for i in ids if i not in ended))
                except OSError:
                    return now - start, data_bytes, len(ended)
                next_update += period
            sock.settimeout(max(0.01, next_update - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return time.monotonic() - start, data_bytes, len(ended)
            buffer += chunk
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                length, kind, flags = int.from_bytes(buffer[:3], "big"), buffer[3], buffer[4]
                stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                if kind == DATA:
                    data_bytes += length
                if kind in (DATA, HEADERS) and flags & END_STREAM:
                    ended.add(stream)
                buffer = buffer[9 + length:]
            if len(ended) == streams:
                return None, data_bytes, len(ended)
        return None, data_bytes, len(ended)


class ZeroWindowDribble(unittest.TestCase):
    """Item 9: a 1-byte WINDOW_UPDATE every 20 s kept 5 connections x 100
    streams open for over 100 s: every byte out restarted the send timeout."""

    SEND_TIMEOUT = 2

    def setUp(self):
        self.server = Lepus(["--send-timeout", "%ds" % self.SEND_TIMEOUT, "--threads", "1"])
        self.addCleanup(self.server.stop, self)
        self.server.write("big.bin", bytes(range(256)) * 1024)  # 256 KiB

    def test_one_byte_window_updates_do_not_keep_the_connection(self):
        # Each update lets a 1-byte DATA frame out, far more often than the
        # send timeout; far less than the minimum rate.
        closed_after, data_bytes, _ = drip(self.server.port, 4, b"/big.bin", 1, 0.25,
                                           seconds=6 * self.SEND_TIMEOUT)
        self.assertGreater(data_bytes, 0)  # the dribble did let bytes out
        self.assertIsNotNone(closed_after, "still open after %d s" % (6 * self.SEND_TIMEOUT))
        self.assertLess(closed_after, 4 * self.SEND_TIMEOUT)

    def test_a_slow_reader_above_the_minimum_rate_is_served(self):
        # 8 KiB a quarter of a second: 32 KiB/s, the file takes about 8 s,
        # four send timeouts, with output waiting on the window all along.
        closed_after, data_bytes, ended = drip(self.server.port, 1, b"/big.bin", 8192, 0.25,
                                               seconds=30)
        self.assertIsNone(closed_after)
        self.assertEqual((ended, data_bytes), (1, 256 * 1024))


if __name__ == "__main__":
    harness.main()
