"""One upstream library for FastCGI and the proxy (issue 36), against real
backends: Python HTTP backends (proxy_test.Backend, which counts the
connections it accepts) and php-fpm pools (phpfpm.PhpFpm).

Checks that a stream reset before it is answered opens no backend connection
(issue 32, item 3); several php-fpm for one site, weighted; a backend that
hangs on connect (the connect timeout, then the next backend) for FastCGI and
the proxy; least connections with one slow backend; consistent hashing that
moves only the added backend's share of the keys.
"""
import concurrent.futures
import http.server
import json
import os
import re
import shutil
import socket
import socketserver
import signal
import struct
import subprocess
import sys
import threading
import time
import unittest

import harness
import phpfpm
from http2_test import (END_HEADERS, END_STREAM, HEADERS, PREFACE, RST_STREAM, SETTINGS, frame,
                        read_frames, request_block)
from proxy_test import Backend, wait_for_log

CANCEL = 0x8
WINDOW_UPDATE = 0x8
PHP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "php")


class NamedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path != "/health":  # a slow backend still passes its checks
            time.sleep(self.server.delay)
        body = self.server.name.encode()
        if self.path == "/health":
            with self.server.lock:
                self.server.checks += 1
            self.send_response(200 if self.server.healthy else 503)
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class NamedBackend(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """An HTTP backend that answers its name, after `delay` seconds."""
    daemon_threads = True

    def __init__(self, name, delay=0.0):
        self.name, self.delay = name, delay
        self.healthy, self.checks, self.lock = True, 0, threading.Lock()
        http.server.HTTPServer.__init__(self, ("127.0.0.1", 0), NamedHandler)
        self.address = "http://127.0.0.1:%d" % self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self):
        self.shutdown()
        self.server_close()


# A backend in a process of its own, so that it can be killed: it answers its
# name after 100 ms, the whole response in one write, and closes (every
# request on a fresh connection: none is saved by the replay of a request on
# a pooled connection the backend had closed).
KILLABLE_BACKEND = r"""
import http.server, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        time.sleep(0.1)
        body = sys.argv[1].encode()
        self.wfile.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))
        self.close_connection = True
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
server = S(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def killable_backend(test, name):
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE_BACKEND, name],
                            stdout=subprocess.PIPE, text=True)
    test.addCleanup(proc.wait)
    test.addCleanup(proc.kill)
    return proc, "http://127.0.0.1:%s" % proc.stdout.readline().strip()


def hanging_listener(test):
    """A TCP address whose accept queue is full and never drained: the kernel
    drops further SYNs, so a connect neither succeeds nor fails."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    test.addCleanup(listener.close)
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        test.addCleanup(filler.close)
    time.sleep(0.2)
    return "127.0.0.1:%d" % listener.getsockname()[1]


def site_config(test, lines, top=""):
    """A config file with one [[site]] holding `lines`; returns (path, root)."""
    tmp = harness.temp_dir(test)
    root = os.path.join(tmp, "www")
    os.makedirs(root)
    path = os.path.join(tmp, "lepus.toml")
    with open(path, "w") as f:
        f.write('threads = 1\n%s\n[[site]]\nroot = "%s"\n%s\n' % (top, root, lines))
    return path, root


def start(test, config, *args):
    server = harness.Lepus(["--config", config] + list(args))
    test.addCleanup(server.stop, test)
    return server


def php_pools(test, count):
    if not phpfpm.find_php_fpm():
        test.skipTest("php-fpm not installed")
    pools = [phpfpm.PhpFpm(children=2) for _ in range(count)]
    for pool in pools:
        test.addCleanup(pool.cleanup)
    return pools


class ResetStreams(unittest.TestCase):
    # HEADERS then RST_STREAM for 20 streams in one write (a client, or
    # MadeYouReset, cancelling at once), then one stream that is answered:
    # only that one reaches the backend. Before, each reset stream had
    # opened (and closed) a backend connection of its own.
    def test_a_stream_reset_before_it_is_polled_opens_no_backend_connection(self):
        if harness.PROTOCOL != "h1":
            self.skipTest("raw h2c frames of its own: once is enough")
        backend = Backend("a")
        self.addCleanup(backend.stop)
        server = harness.Lepus(["--proxy", backend.address, "--threads", "1"])
        self.addCleanup(server.stop, self)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            burst = PREFACE + frame(SETTINGS, 0, 0)
            for i in range(20):
                stream = 1 + 2 * i
                burst += frame(HEADERS, END_HEADERS | END_STREAM, stream,
                               request_block(b"/reset?mode=echo"))
                burst += frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL))
            burst += frame(HEADERS, END_HEADERS | END_STREAM, 41, request_block(b"/x?mode=echo"))
            sock.sendall(burst)
            frames = read_frames(sock, seconds=10,
                                 done=lambda fs: any(f[0] == HEADERS and f[2] == 41 for f in fs))
        self.assertTrue(any(f[0] == HEADERS and f[2] == 41 for f in frames))
        with backend.lock:
            self.assertEqual(backend.connections, 1)
            self.assertEqual([seen[1] for seen in backend.seen], ["/x?mode=echo"])

    # MadeYouReset (CVE-2025-8671): each stream's HEADERS is followed by a
    # WINDOW_UPDATE that overflows its window, so the server resets it
    # (FLOW_CONTROL_ERROR, RFC 9113 §6.9.1) in the same read that opened it.
    # None of these streams may open a backend connection (before, 4,600 such
    # streams in a second opened 3,562); the stream after them is answered.
    def test_streams_the_server_resets_at_once_open_no_backend_connection(self):
        if harness.PROTOCOL != "h1":
            self.skipTest("raw h2c frames of its own: once is enough")
        backend = Backend("a")
        self.addCleanup(backend.stop)
        server = harness.Lepus(["--proxy", backend.address, "--threads", "1"])
        self.addCleanup(server.stop, self)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            burst = PREFACE + frame(SETTINGS, 0, 0)
            for i in range(20):
                stream = 1 + 2 * i
                burst += frame(HEADERS, END_HEADERS | END_STREAM, stream,
                               request_block(b"/reset?mode=echo"))
                burst += frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", 0x7fffffff))
            burst += frame(HEADERS, END_HEADERS | END_STREAM, 41, request_block(b"/x?mode=echo"))
            sock.sendall(burst)
            frames = read_frames(sock, seconds=10,
                                 done=lambda fs: any(f[0] == HEADERS and f[2] == 41 for f in fs))
        self.assertTrue(any(f[0] == HEADERS and f[2] == 41 for f in frames))
        self.assertGreaterEqual(len([f for f in frames if f[0] == RST_STREAM and f[2] < 41]), 20)
        with backend.lock:
            self.assertEqual(backend.connections, 1)
            self.assertEqual([seen[1] for seen in backend.seen], ["/x?mode=echo"])


class FastCgiBackends(unittest.TestCase):
    # Two php-fpm for one site, weights 3 and 1: one reactor's smooth
    # weighted round robin gives them 30 and 10 of 40 requests.
    def test_several_php_fpm_are_balanced_by_weight(self):
        a, b = php_pools(self, 2)
        config, root = site_config(self, 'fastcgi = { address = ["%s", "%s"], weights = [3, 1] }'
                                   % (a.address, b.address))
        shutil.copy(os.path.join(PHP_DIR, "backend_pid.php"), root)
        server = start(self, config)
        answers = [server.fetch("/backend_pid.php") for _ in range(40)]
        self.assertEqual({r.status for r in answers}, {200})
        pids = [int(r.body) for r in answers]
        self.assertEqual(pids.count(a.proc.pid), 30, pids)
        self.assertEqual(pids.count(b.proc.pid), 10, pids)

    # The first php-fpm address never completes a connect: each request
    # waits for --fastcgi-connect-timeout at most, then goes to the next
    # (before, a hanging connect fell under the 60 s --fastcgi-timeout).
    def test_a_backend_that_hangs_on_connect_is_passed_for_the_next(self):
        (fpm,) = php_pools(self, 1)
        config, root = site_config(
            self, 'fastcgi = { address = ["%s", "%s"] }' % (hanging_listener(self), fpm.address),
            top='fastcgi_connect_timeout = "300ms"')
        shutil.copy(os.path.join(PHP_DIR, "backend_pid.php"), root)
        server = start(self, config)
        for _ in range(4):
            r = server.fetch("/backend_pid.php")
            self.assertEqual(r.status, 200)
            self.assertEqual(int(r.body), fpm.proc.pid)
        wait_for_log(self, server, "no connection within --fastcgi-connect-timeout")
        wait_for_log(self, server, "FastCGI: trying %s instead" % fpm.address)


    # Active checks of php-fpm (a FastCGI request for /health.php every
    # 100 ms): one php-fpm stopped is taken out after two failed checks, the
    # other answers everything; started again, it passes two and is back.
    def test_active_health_checks_of_php_fpm(self):
        a, b = php_pools(self, 2)
        config, root = site_config(
            self, 'fastcgi = { address = ["%s", "%s"], slow_start = "0s", health = { '
            'path = "/health.php", interval = "100ms", fails = 2, passes = 2 } }'
            % (a.address, b.address))
        shutil.copy(os.path.join(PHP_DIR, "backend_pid.php"), root)
        with open(os.path.join(root, "health.php"), "w") as f:
            f.write("<?php echo 'ok';\n")
        server = start(self, config)
        a.stop()
        wait_for_log(self, server, "health check of /health.php failed 2 time(s)")
        answers = [server.fetch("/backend_pid.php") for _ in range(6)]
        self.assertEqual({(r.status, int(r.body)) for r in answers}, {(200, b.proc.pid)})
        a.start()
        wait_for_log(self, server, "%s: health check passed 2 time(s), back in" % a.address)
        pids = {int(server.fetch("/backend_pid.php").body) for _ in range(4)}
        self.assertIn(a.proc.pid, pids)


class ProxyBalancing(unittest.TestCase):
    def backends(self, *specs):
        out = []
        for name, delay in specs:
            backend = NamedBackend(name, delay)
            self.addCleanup(backend.stop)
            out.append(backend)
        return out

    def test_a_backend_that_hangs_on_connect_is_passed_for_the_next(self):
        (good,) = self.backends(("good", 0))
        config, _ = site_config(
            self, 'proxy = { address = ["http://%s", "%s"] }' % (hanging_listener(self),
                                                                good.address),
            top='proxy_connect_timeout = "300ms"')
        server = start(self, config)
        for _ in range(4):
            r = server.fetch("/x")
            self.assertEqual((r.status, r.body), (200, b"good"))
        wait_for_log(self, server, "no connection within --proxy-connect-timeout")

    # Four clients at a time for 3 s over two backends; one is killed
    # (SIGKILL) after a second. Requests in flight on it (their connection
    # closed before any answer) go again to the other, as do the ones that
    # find it refusing: every GET is answered. Before, each of those was a 502.
    def test_a_backend_killed_under_load_fails_no_idempotent_request(self):
        victim, victim_address = killable_backend(self, "victim")
        _, survivor_address = killable_backend(self, "survivor")
        config, _ = site_config(self, 'proxy = { address = ["%s", "%s"] }'
                                % (victim_address, survivor_address))
        server = start(self, config)
        deadline = time.monotonic() + 3

        def client(_):
            statuses = []
            while time.monotonic() < deadline:
                try:
                    statuses.append(server.fetch("/x", timeout=10).status)
                except ConnectionError:
                    statuses.append(None)
            return statuses

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            runs = [pool.submit(client, i) for i in range(4)]
            time.sleep(1)
            victim.send_signal(signal.SIGKILL)
            statuses = [s for run in runs for s in run.result()]
        failed = [s for s in statuses if s != 200]
        print("%d requests, %d failed" % (len(statuses), len(failed)), file=sys.stderr)
        self.assertGreater(len(statuses), 20)
        self.assertEqual(failed, [])

    # Active checks (GET /health every 100 ms): backend a starts failing its
    # check; after two failed checks it is taken out, before any client
    # request went wrong, and every request goes to b; once it passes two
    # checks again it is back and gets requests.
    def test_active_health_checks_take_a_backend_out_and_bring_it_back(self):
        a, b = self.backends(("a", 0), ("b", 0))
        config, _ = site_config(
            self, 'proxy = { address = ["%s", "%s"], slow_start = "0s", health = { '
            'path = "/health", interval = "100ms", fails = 2, passes = 2 } }'
            % (a.address, b.address))
        server = start(self, config, "--status-path", "/_status")

        def proxy_status(name):
            reactors = json.loads(server.fetch("/_status").body)["reactors"]
            return sum(r["proxy_backends"][name] for r in reactors)

        self.assertEqual({server.fetch("/x").body for _ in range(4)}, {b"a", b"b"})
        self.assertEqual(proxy_status("down"), 0)
        a.healthy = False
        wait_for_log(self, server, "health check of /health failed 2 time(s) (status 503), taken out")
        self.assertEqual({server.fetch("/x").body for _ in range(6)}, {b"b"})
        self.assertEqual(proxy_status("down"), 1)
        self.assertGreaterEqual(proxy_status("failures"), 2)
        a.healthy = True
        wait_for_log(self, server, "health check passed 2 time(s), back in")
        self.assertIn(b"a", {server.fetch("/x").body for _ in range(4)})
        self.assertEqual(proxy_status("down"), 0)
        self.assertGreater(b.checks, 0)

    # A backend back in is eased in (slow_start = "10s"): right after its
    # checks pass again it gets a small share, not its half (10 of 20 with
    # slow_start = "0s", as the test above has it), and then more.
    def test_a_backend_back_in_is_eased_in(self):
        a, b = self.backends(("a", 0), ("b", 0))
        config, _ = site_config(
            self, 'proxy = { address = ["%s", "%s"], slow_start = "10s", health = { '
            'path = "/health", interval = "100ms", fails = 2, passes = 2 } }'
            % (a.address, b.address))
        server = start(self, config)
        a.healthy = False
        wait_for_log(self, server, "health check of /health failed 2 time(s) (status 503), taken out")
        a.healthy = True
        wait_for_log(self, server, "health check passed 2 time(s), back in")
        names = [server.fetch("/x").body for _ in range(20)]
        self.assertLessEqual(names.count(b"a"), 5, names)
        deadline = time.monotonic() + 20
        while server.fetch("/x").body != b"a":
            self.assertLess(time.monotonic(), deadline, "a never got a request again")

    # The status page lists each backend: its state, requests in flight,
    # failures and last check, in JSON and for Prometheus.
    def test_the_status_page_shows_each_backend(self):
        a, b = self.backends(("a", 0), ("b", 1.0))
        config, _ = site_config(
            self, 'proxy = { address = ["%s", "%s"], health = { path = "/health", '
            'interval = "100ms", fails = 2, passes = 2 } }' % (a.address, b.address))
        server = start(self, config, "--status-path", "/_status")

        def backends():
            listed = json.loads(server.fetch("/_status").body)["backends"]
            return {backend["address"]: backend for backend in listed}

        a.healthy = False
        wait_for_log(self, server, "health check of /health failed 2 time(s) (status 503), taken out")
        slow = threading.Thread(target=lambda: server.fetch("/x", timeout=10))
        slow.start()
        self.addCleanup(slow.join)

        def in_flight():
            listed = backends()
            return listed if listed[b.address]["in_flight"] == 1 else None
        listed, deadline = None, time.monotonic() + 5
        while listed is None and time.monotonic() < deadline:
            listed = in_flight()
            time.sleep(0.02)
        self.assertIsNotNone(listed, "no request in flight to b")
        down, up = listed[a.address], listed[b.address]
        self.assertEqual((down["protocol"], down["state"], down["in_flight"]), ("proxy", "down", 0))
        self.assertGreaterEqual(down["failures"], 2)
        self.assertFalse(down["last_check"]["passed"])
        self.assertEqual((up["state"], up["failures"]), ("up", 0))
        self.assertTrue(up["last_check"]["passed"])
        self.assertLess(up["last_check"]["seconds_ago"], 5)
        metrics = server.fetch("/_status?format=prometheus").body.decode()
        self.assertIn('lepus_backend_up{protocol="proxy",backend="%s"} 0\n' % a.address, metrics)
        self.assertIn('lepus_backend_up{protocol="proxy",backend="%s"} 1\n' % b.address, metrics)
        failures = re.search(r'lepus_backend_failures_total\{protocol="proxy",backend="%s"\} '
                             r'(\d+)\n' % a.address, metrics)
        self.assertGreaterEqual(int(failures.group(1)), 2, metrics)
        self.assertIn('lepus_backend_last_check_passed{protocol="proxy",backend="%s"} 0\n'
                      % a.address, metrics)
        self.assertRegex(metrics, r'lepus_backend_last_check_seconds\{protocol="proxy",'
                         r'backend="%s"\} \d+\.\d{3}\n' % b.address)

    # One backend takes 0.3 s a request, the other answers at once; eight
    # clients at a time. Round robin would give each half; least connections
    # sends the next request where fewer are in flight: the slow one gets fewer.
    def test_least_connections_gives_a_slow_backend_fewer_requests(self):
        slow, fast = self.backends(("slow", 0.3), ("fast", 0))
        config, _ = site_config(self, 'proxy = { address = ["%s", "%s"], balance = "least_conn" }'
                                % (slow.address, fast.address))
        server = start(self, config)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            names = [r.body.decode() for r in pool.map(lambda _: server.fetch("/x"), range(48))]
        self.assertEqual(len(names), 48)
        self.assertLess(names.count("slow"), names.count("fast") / 2, names)

    # Consistent hashing on a header: the same user always reaches the same
    # backend; with a fourth backend added, only the keys the new one takes
    # move (about a quarter), none between the three others.
    def test_hashing_moves_only_the_added_backends_share(self):
        backends = self.backends(("a", 0), ("b", 0), ("c", 0), ("d", 0))

        def owners(count):
            addresses = ", ".join('"%s"' % b.address for b in backends[:count])
            config, _ = site_config(self, 'proxy = { address = [%s], balance = "hash", '
                                    'hash_key = "header:X-User" }' % addresses)
            server = start(self, config)
            return [server.fetch("/x", headers=["X-User: user%d" % i]).body.decode()
                    for i in range(60)]

        three = owners(3)
        self.assertEqual(three, owners(3))
        self.assertEqual(set(three), {"a", "b", "c"})
        four = owners(4)
        moved = [i for i in range(60) if three[i] != four[i]]
        self.assertTrue(all(four[i] == "d" for i in moved), (three, four))
        self.assertGreater(len(moved), 5)
        self.assertLess(len(moved), 30)


if __name__ == "__main__":
    harness.main()
