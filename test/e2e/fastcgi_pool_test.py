"""lepus's FastCGI defaults against php-fpm's defaults must never hang (issue 32).

php-fpm binds a child to each connection it accepts until that connection
closes. lepus's default pool (--fastcgi-pool 8, split over the reactors) is
larger than Debian's www.conf (pm = dynamic, pm.max_children = 5): with
connections kept alive (FCGI_KEEP_CONN) a request given to a pooled connection
that php-fpm never accepted waited in its listen backlog until
--fastcgi-timeout. With the default --fastcgi-keepalive off each connection
carries one request and php-fpm closes it after END_REQUEST, so a connection
still in the backlog is accepted by the next child that frees itself.

Rounds of 50 concurrent requests for a trivial script; every request must be
answered 200. A hang shows as a missing answer within a generous client timeout
(10 s), never as a timing assertion; the first round with a missing answer
ends the test, so a failing run stays bounded too.

Not a protocol matrix test: this is about lepus's backend connections, which
are the same whatever the client speaks; plain HTTP/1.1 keeps 50 clients cheap.
"""
import json
import socket
import threading
import unittest

import harness
import phpfpm

CLIENTS = 50
ROUNDS = 20
CLIENT_TIMEOUT = 10  # seconds; far beyond what a trivial script takes


def fetch_status(port, path):
    """One GET on its own connection: the status code, or None when no answer
    came within CLIENT_TIMEOUT (a 200 must carry the script's output)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                       % path).encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    head, separator, body = data.partition(b"\r\n\r\n")
    if not separator or not head.startswith(b"HTTP/1.1 "):
        return None
    status = int(head.split()[1])
    if status == 200 and b"hello 5050" not in body:
        return "200 without the script's output"
    return status


class DefaultsAgainstPhpFpm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")

    def start(self, fpm, *args):
        # Two reactors and otherwise lepus's defaults (pool 8: four per reactor).
        server = harness.Lepus(["--fastcgi", fpm.address, "--threads", "2",
                                "--status-path", "/_status"] + list(args))
        self.addCleanup(server.stop, self)
        server.write("hello.php", '<?php echo "hello " . array_sum(range(1, 100));\n')
        return server

    def fpm(self, **kwargs):
        fpm = phpfpm.PhpFpm(**kwargs)
        self.addCleanup(fpm.cleanup)
        return fpm

    def rounds(self, server):
        for number in range(1, ROUNDS + 1):
            statuses = [None] * CLIENTS

            def client(i):
                statuses[i] = fetch_status(server.port, "/hello.php")

            threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(CLIENT_TIMEOUT + 5)
            missing = sum(1 for s in statuses if s is None)
            self.assertEqual(missing, 0, "round %d: %d of %d requests got no answer within %d s"
                             % (number, missing, CLIENTS, CLIENT_TIMEOUT))
            self.assertEqual(statuses, [200] * CLIENTS, "round %d" % number)

    def gauges(self, server):
        """The FastCGI gauges of the status page, summed over the reactors."""
        with server.connect() as s:
            s.sendall(b"GET /_status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            response = harness.read_response(s)
        self.assertEqual(response.status, 200)
        reactors = json.loads(response.body)["reactors"]
        return {key: sum(r["fastcgi"][key] for r in reactors) for key in ("busy", "idle", "queued")}

    def test_debian_dynamic_pool(self):
        # Debian's www.conf: pm = dynamic, 5 children, 2 started, 1 to 3 spare.
        fpm = self.fpm(children=5, pm="dynamic", start_servers=2, min_spare=1, max_spare=3)
        server = self.start(fpm)
        self.rounds(server)
        # One connection per request: none is left open, none counted idle.
        self.assertEqual(self.gauges(server), {"busy": 0, "idle": 0, "queued": 0})

    def test_static_pool_smaller_than_lepus_pool(self):
        fpm = self.fpm(children=4)
        server = self.start(fpm)
        self.rounds(server)

    def test_slow_client_does_not_hold_a_child(self):
        # One child; a client that does not read a 200 KB answer. lepus has the
        # whole answer once END_REQUEST arrives and must close the backend
        # connection then: php-fpm's child reads until that close before it
        # accepts another connection, so the next request would wait on the
        # slow client.
        fpm = self.fpm(children=1)
        server = self.start(fpm, "--threads", "1", "--fastcgi-pool", "2")
        server.write("big.php", '<?php echo str_repeat("x", 200000);\n')
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(slow.close)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(CLIENT_TIMEOUT)
        slow.connect(("127.0.0.1", server.port))
        slow.sendall(b"GET /big.php HTTP/1.1\r\nHost: localhost\r\n\r\n")
        self.assertEqual(slow.recv(12), b"HTTP/1.1 200")  # php-fpm has answered
        self.assertEqual(fetch_status(server.port, "/hello.php"), 200)
        received = 12
        while received < 200000:
            chunk = slow.recv(65536)
            self.assertTrue(chunk, "the slow client's answer was cut")
            received += len(chunk)

    def test_keepalive_with_pool_within_children(self):
        # The documented way to keep connections alive: a pool no larger than
        # pm.max_children, so php-fpm has a child for every pooled connection.
        fpm = self.fpm(children=5, pm="dynamic", start_servers=2, min_spare=1, max_spare=3)
        server = self.start(fpm, "--fastcgi-keepalive", "on", "--fastcgi-pool", "4")
        self.rounds(server)
        gauges = self.gauges(server)
        self.assertEqual((gauges["busy"], gauges["queued"]), (0, 0))
        self.assertGreaterEqual(gauges["idle"], 1, "kept-alive connections are pooled")
        self.assertLessEqual(gauges["idle"], 4)


if __name__ == "__main__":
    harness.main()
