"""Per-client limits about connections and the table's memory (issue 35):
--conn-limit / conn_limit over HTTP/1.1 connections and HTTP/2 streams (nginx's
limit_conn: requests in progress per client address), the client table's
bound under a million addresses sent through the PROXY protocol, and `lepus
-t` on bad rules. matrix_limits_test.py has the request rate and allow/deny
in the protocol matrix. Needs php-fpm.

A request is held "in progress" by sending its head and not yet its body:
lepus takes a script's body whole before php-fpm sees it, so the request
waits, counted, until the test sends the rest. Over HTTP/1.1 the 100
Continue answer to `Expect: 100-continue` says the router has let it in."""
import json
import multiprocessing
import os
import re
import socket
import struct
import subprocess
import sys
import time
import unittest

import harness
import limits_fixture
from limits_fixture import forwarded_for
from http2_test import (DATA, END_HEADERS, END_STREAM, HEADERS, PREFACE, WIDE_OPEN, frame,
                        hpack, read_frames, read_streams)

HOLD = "<?php echo 'got ', strlen(file_get_contents('php://input'));\n"


def hold_head(client, host="localhost"):
    return ("POST /hold.php HTTP/1.1\r\nHost: %s\r\nX-Forwarded-For: %s\r\n"
            "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n" % (host, client)).encode()


class ConnLimits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        limits_fixture.site_dir(cls, "limits")
        limits_fixture.start_behind_proxy(
            cls, lambda address: 'conn_limit = 10\n\n'
            '[[site]]\ndefault = true\nroot = "%s"\nfastcgi = "%s"\n\n'
            '[[site]]\nserver_names = ["small.test"]\nroot = "%s"\nfastcgi = "%s"\n'
            'conn_limit = 2\n' % (cls.root, address, cls.root, address),
            args=["--h2c", "on"], protocol="h1")
        cls.server.write("hold.php", HOLD)
        cls.server.write("index.html", "home\n")

    def hold(self, client, host="localhost"):
        """A connection whose request is in progress (its body not sent)."""
        s = self.server.connect()
        self.addCleanup(s.close)
        s.sendall(hold_head(client, host))
        response = harness.read_response(s)
        self.assertEqual(response.status, 100)
        return s

    def get(self, client, host="localhost"):
        return self.server.get("/index.html", forwarded_for(client, "Host: " + host)
                               if host != "localhost" else forwarded_for(client))

    def finish(self, s):
        s.sendall(b"hello")
        response = harness.read_response(s)
        self.assertEqual((response.status, response.body), (200, b"got 5"))

    def test_a_conn_limit_of_10_refuses_the_11th_from_one_address_not_from_another(self):
        held = [self.hold("203.0.113.50") for _ in range(10)]
        refused = self.get("203.0.113.50")
        self.assertEqual(refused.status, 503)
        self.assertEqual(refused.header("retry-after"), "1")
        self.assertEqual(self.get("203.0.113.50").status, 503)
        self.assertEqual(self.get("203.0.113.51").status, 200)
        # One error-log line for the client's refusals, not one each.
        lines = self.server.error_lines("limiting connections", "client: 203.0.113.50,")
        self.assertEqual(len(lines), 1, self.server.error_log_text())
        # Its requests done, the client is served again.
        for s in held:
            self.finish(s)
        self.assertEqual(self.get("203.0.113.50").status, 200)
        status_held = [self.hold("203.0.113.50") for _ in range(10)]
        for s in status_held:
            self.finish(s)

    def test_a_sites_own_conn_limit_counts_apart(self):
        held = [self.hold("203.0.113.60", "small.test") for _ in range(2)]
        self.assertEqual(self.server.get("/index.html", forwarded_for("203.0.113.60")).status,
                         200)  # the default site: --conn-limit's
        refused = self.server.request(
            "GET /index.html HTTP/1.1\r\nHost: small.test\r\nX-Forwarded-For: 203.0.113.60\r\n"
            "Connection: close\r\n\r\n")
        self.assertEqual(refused.status, 503)
        for s in held:
            self.finish(s)

    def test_http2_streams_are_counted(self):
        s = self.server.connect()
        self.addCleanup(s.close)

        def post(stream, client):
            block = hpack([(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/hold.php"),
                           (b":authority", b"localhost"), (b"content-length", b"5"),
                           (b"x-forwarded-for", client)])
            return frame(HEADERS, END_HEADERS, stream, block)
        streams = list(range(1, 22, 2))  # eleven
        s.sendall(PREFACE + WIDE_OPEN + b"".join(post(n, b"203.0.113.70") for n in streams))
        frames = read_frames(s, seconds=10,
                             done=lambda got: any(f[0] == HEADERS and f[2] == 21 for f in got))
        refused = [f for f in frames if f[0] == HEADERS and f[2] == 21]
        self.assertTrue(refused, frames)
        # :status 503 is not in HPACK's static table: a literal "503".
        self.assertIn(b"503", refused[0][3])
        self.assertFalse([f for f in frames if f[0] == HEADERS and f[2] != 21])
        # Another client on the same connection is not counted with it.
        s.sendall(post(23, b"203.0.113.71") + frame(DATA, END_STREAM, 23, b"hello"))
        # The ten held streams end; then the client may start more.
        s.sendall(b"".join(frame(DATA, END_STREAM, n, b"hello") for n in streams[:10]))
        got = read_streams(s, streams[:10] + [23])
        for n in streams[:10] + [23]:
            head, body = got[n]
            self.assertEqual((head[:1], body), (b"\x88", b"got 5"), n)  # 0x88: :status 200
        s.sendall(post(25, b"203.0.113.70") + frame(DATA, END_STREAM, 25, b"hello"))
        self.assertEqual(read_streams(s, [25])[25][1], b"got 5")


def send_addresses(port, first, count, path="/login.html", parallel=200):
    """Connects `count` times to lepus, each connection with a PROXY v2 header
    naming the next IPv4 source from `first`, and one request for `path`;
    returns how many got 200. Closed with a reset (SO_LINGER 0): no TIME_WAIT
    pile-up."""
    import selectors
    signature = b"\r\n\r\n\x00\r\nQUIT\n"
    request = b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode()
    linger = struct.pack("ii", 1, 0)
    selector = selectors.DefaultSelector()
    state = {"next": first, "ok": 0}
    end = first + count

    def start():
        address = state["next"]
        state["next"] += 1
        s = socket.socket()
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        s.connect_ex(("127.0.0.1", port))
        header = signature + b"\x21\x11\x00\x0c" + struct.pack(">IIHH", address, 0x7f000001,
                                                              1000, 80)
        selector.register(s, selectors.EVENT_WRITE, [header + request, b""])
    while state["next"] < end and len(selector.get_map()) < parallel:
        start()
    deadline = time.monotonic() + 200  # within CTest's 300 s: a slow run fails, saying how far it got
    while selector.get_map() and time.monotonic() < deadline:
        for key, events in selector.select(5):
            s, data = key.fileobj, key.data
            if events & selectors.EVENT_WRITE:
                try:
                    s.send(data[0])
                except OSError:
                    pass
                selector.modify(s, selectors.EVENT_READ, data)
                continue
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if chunk:
                data[1] += chunk
                continue
            state["ok"] += data[1].startswith(b"HTTP/1.1 200")
            selector.unregister(s)
            s.close()
            if state["next"] < end:
                start()
    return state["ok"]


class TableMemory(unittest.TestCase):
    ADDRESSES = 1000000

    def test_a_million_addresses_keep_the_table_within_its_budget(self):
        if harness.is_sanitized():
            # ASan's quarantine keeps freed memory (a million connections' worth):
            # RSS measures the sanitizer, not the table (the release run checks it).
            self.skipTest("RSS under a sanitizer says nothing about the table's budget")
        directory = harness.temp_dir(self, name="limits-memory")
        config, root = os.path.join(directory, "lepus.toml"), os.path.join(directory, "www")
        with open(config, "w") as f:
            f.write('proxy_protocol = true\nreal_ip_from = ["127.0.0.1"]\n'
                    'status_path = "/_status"\nlimit_memory = "16m"\n\n'
                    '[[site]]\nroot = "%s"\n'
                    'limits = [{ paths = ["/login.html"], rate = "1r/m", burst = 5, '
                    'nodelay = true }]\n' % root)
        server = harness.Lepus(["--config", config], root=root, access_log=False, protocol="h1")
        self.addCleanup(server.stop, self)
        server.write("index.html", "home\n")
        server.write("login.html", "login\n")
        base = 0x0a000000  # 10.0.0.0/8 holds 16 million sources
        # Warm up on a path without limits: connections at the same
        # concurrency, so that what they cost (buffers, allocator caches) is
        # in the baseline, and the table is not (it is made on first use).
        self.assertEqual(send_addresses(server.port, base, 20000, "/index.html"), 20000)
        baseline = server.rss_kib()
        # In two client processes at once (a Python client is slower than lepus).
        half = self.ADDRESSES // 2
        with multiprocessing.Pool(2) as pool:
            served = pool.starmap(send_addresses, [(server.port, base, half),
                                                   (server.port, base + half, half)])
        # Each address is one connection. One fresh-clone run on a loaded machine
        # got 999,999 answers of 1,000,000 (the failed one was not seen); the
        # budget is what this test checks, and it holds for the addresses served.
        self.assertGreaterEqual(sum(served), 2 * half - self.ADDRESSES // 10000)
        grown_kib = server.rss_kib() - baseline
        print("\n%d addresses: RSS %d KiB after the warm-up, grew by %d KiB" % (
            self.ADDRESSES, baseline, grown_kib), file=sys.stderr)
        s = server.connect()
        s.sendall(b"PROXY TCP4 127.0.0.1 127.0.0.1 1 80\r\nGET /_status HTTP/1.1\r\n"
                  b"Host: x\r\nConnection: close\r\n\r\n")
        limits = json.loads(harness.read_response(s).body)["limits"]
        s.close()
        self.assertLessEqual(limits["entries"], limits["capacity"])
        self.assertLessEqual(limits["capacity"] * 68, 16 << 20)
        self.assertGreaterEqual(limits["evictions"], 2 * half - limits["capacity"])
        # A million 64-byte entries would be 64 MB; the budget is 16 MB, all
        # of it in use by now.
        self.assertLess(grown_kib, 16 * 1024 + 4 * 1024,
                        "RSS grew by %d KiB over %d addresses" % (grown_kib, self.ADDRESSES))
        # The limit still works for a new client after all that eviction.
        statuses = [send_addresses(server.port, 0x0b000001, 1) for _ in range(7)]
        self.assertEqual(statuses, [1] * 6 + [0])


class CheckConfig(unittest.TestCase):
    def check(self, site):
        """`lepus -t` on a lepus.toml of one [[site]] with a root and then `site`."""
        directory = harness.temp_dir(self, name="limits-check")
        config = os.path.join(directory, "lepus.toml")
        with open(config, "w") as f:
            f.write('[[site]]\nroot = "%s"\n' % directory + site)
        return subprocess.run([harness.BINARY, "-t", "--config", config], capture_output=True,
                              text=True, timeout=30)

    def test_t_refuses_bad_networks_and_rates(self):
        done = self.check('access = [{ paths = ["/admin/"], allow = ["10.0.0.0/33"], '
                          'deny = ["::/0"] }]\n'
                          'limits = [{ paths = ["/login"], rate = "10r/h" }, '
                          '{ paths = ["/x"], rate = "5r/s", status = 200 }]\n'
                          'conn_limit = 0\n')
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("10.0.0.0/33", done.stderr)
        self.assertRegex(done.stderr, r"lepus.toml:4:\d+: 'rate' is requests per second or minute")
        self.assertNotIn("needs a 'rate'", done.stderr)  # one message for one mistake
        self.assertIn("'status' must be a 4xx or 5xx status", done.stderr)
        self.assertIn("'conn_limit' must be a positive whole number", done.stderr)
        done = self.check('access = [{ paths = ["/admin/"], allow = ["10.0.0.0/8", '
                          '"2001:db8::/32"], deny = ["0.0.0.0/0", "::/0"] }]\n'
                          'limits = [{ paths = ["/login"], rate = "10r/m", burst = 5 }]\n'
                          'conn_limit = 20\n')
        self.assertEqual(done.returncode, 0, done.stderr)


if __name__ == "__main__":
    harness.main()
