"""Per-client limits and access rules in the protocol matrix (issue 35): a
site's `limits` (nginx's limit_req: a leaky bucket per client address, 429
with Retry-After over the burst, delayed within it without nodelay) and
`access` (nginx's allow/deny per path prefix, 403), over HTTP/1.1, HTTP/2
over TLS and h2c. The client address is the one a trusted proxy names in
X-Forwarded-For (--real-ip-from 127.0.0.1), so one test process plays many
clients, IPv4 and IPv6, as a load balancer in front of lepus would.

limits_test.py has what is about connections: --conn-limit and conn_limit
over HTTP/1.1 connections and HTTP/2 streams, the table's memory bound under
a million addresses, and `lepus -t`. Needs php-fpm."""
import hashlib
import json
import re
import threading
import time
import unittest

import harness
import limits_fixture
from limits_fixture import forwarded_for

BODY_MD5 = "<?php echo md5(file_get_contents('php://input'));\n"
LOGIN = "<?php echo 'login ', $_SERVER['REMOTE_ADDR'], ' ', strlen(file_get_contents('php://input'));\n"


class MatrixLimits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        limits_fixture.site_dir(cls, "matrix-limits")

        def config(address):
            # 1r/m: no request leaks out of the bucket while a test runs.
            return ('status_path = "/_status"\n\n'
                    '[[site]]\nserver_names = ["limited.test"]\ndefault = true\n'
                    'root = "%s"\nfastcgi = "%s"\n' % (cls.root, address) +
                    'limits = [{ paths = ["/wp-login.php"], rate = "1r/m", burst = 5, '
                    'nodelay = true },\n'
                    '  { paths = ["/slow/"], rate = "2r/s", burst = 3 },\n'
                    '  { paths = ["/held/"], rate = "2r/s", burst = 1 },\n'
                    '  { paths = ["/busy/"], rate = "1r/m", status = 503 }]\n'
                    'access = [{ paths = ["/admin/"], allow = ["10.0.0.0/8", '
                    '"2001:db8:a::/48"], deny = ["0.0.0.0/0", "::/0"] },\n'
                    '  { paths = ["/admin/public/"], allow = ["::/0", "0.0.0.0/0"] },\n'
                    '  { paths = ["/office/"], deny = ["192.0.2.0/24", "2001:db8:bad::/48"] }]\n')
        limits_fixture.start_behind_proxy(cls, config)
        for name, content in (("index.html", "home\n"), ("wp-login.php", LOGIN),
                              ("held/body.php", BODY_MD5),
                              ("slow/page.txt", "slow page\n"), ("busy/page.txt", "busy\n"),
                              ("admin/index.html", "admin\n"), ("admin/public/logo.txt", "logo\n"),
                              ("office/index.html", "office\n")):
            cls.server.write(name, content)

    def fetch(self, path, client, **kwargs):
        return self.server.fetch(path, headers=forwarded_for(client), **kwargs)

    def test_a_burst_of_login_posts_gets_the_burst_through_and_429_for_the_rest(self):
        statuses = []
        for i in range(100):
            response = self.fetch("/wp-login.php", "203.0.113.10", method="POST",
                                  body="log=admin&pwd=guess%d" % i)
            statuses.append(response.status)
            if response.status == 429:
                retry = response.header("retry-after")
                self.assertTrue(retry and retry.isdigit() and int(retry) >= 1, retry)
            else:
                self.assertEqual(response.body, b"login 203.0.113.10 %d" % len(
                    "log=admin&pwd=guess%d" % i))
        # The first request and the burst of five (nginx's limit_req).
        self.assertEqual(statuses[:6], [200] * 6)
        self.assertEqual(statuses[6:], [429] * 94)
        # Another client is served as usual, and so is the first one elsewhere.
        self.assertEqual(self.fetch("/wp-login.php", "203.0.113.11", method="POST",
                                    body="x").status, 200)
        self.assertEqual(self.fetch("/index.html", "203.0.113.10").status, 200)
        # One error-log line for the 94 refusals, not one each.
        lines = self.server.error_lines("client: 203.0.113.10,")
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("limiting requests", lines[0])
        self.assertIn('request: "POST /wp-login.php', lines[0])

    def test_the_status_over_the_limit_is_the_rules(self):
        self.assertEqual(self.fetch("/busy/page.txt", "198.51.100.20").status, 200)
        response = self.fetch("/busy/page.txt", "198.51.100.20")
        self.assertEqual(response.status, 503)
        self.assertTrue(response.header("retry-after", "").isdigit())

    def limited_requests(self):
        status = json.loads(self.server.fetch("/_status").body)
        return status["limits"]["sites"].get("limited.test", {}).get("limited_requests", 0)

    def test_the_status_page_counts_refusals_per_site(self):
        before = self.limited_requests()
        for _ in range(3):
            self.fetch("/busy/page.txt", "198.51.100.21")
        self.assertGreaterEqual(self.limited_requests() - before, 2)
        status = json.loads(self.server.fetch("/_status").body)
        self.assertGreater(status["limits"]["capacity"], 200000)  # 16m of 68-byte entries
        self.assertLessEqual(status["limits"]["entries"], status["limits"]["capacity"])
        prometheus = self.server.fetch("/_status?format=prometheus").body.decode()
        self.assertRegex(prometheus, r'lepus_limited_requests_total\{site="limited.test"\} \d+')

    def test_a_post_body_held_through_a_delay_reaches_php(self):
        # The second request waits 500 ms for the bucket while its whole body
        # (within HTTP/2's stream window) arrives and is held; when the wait
        # is over the body and its end are offered at once, and the stream
        # must then be polled to open its backend connection and send them
        # (over HTTP/2 it once never was: the request hung).
        body = b"q" * 150000
        for i in range(2):
            response = self.fetch("/held/body.php?%d" % i, "198.51.100.40", method="POST",
                                  body=body)
            self.assertEqual((response.status, response.body),
                             (200, hashlib.md5(body).hexdigest().encode()))

    def test_a_burst_without_nodelay_is_delayed_then_served(self):
        # 2r/s with a burst of 3: the first request at once, the next three
        # each 500 ms after the one before (the bucket leaks), the fifth is
        # over the burst and refused at once.
        results, lock = {}, threading.Lock()

        def one(i):
            started = time.monotonic()
            response = self.fetch("/slow/page.txt?%d" % i, "198.51.100.30")
            with lock:
                results[i] = (response.status, response.body, time.monotonic() - started)
        threads = [threading.Thread(target=one, args=(i,)) for i in range(5)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)  # in order, so that the fifth is the refused one
        # While they wait, the reactor serves everyone else.
        self.assertEqual(self.fetch("/index.html", "198.51.100.31").status, 200)
        for thread in threads:
            thread.join(timeout=30)
        statuses = sorted(status for status, _, _ in results.values())
        self.assertEqual(statuses, [200, 200, 200, 200, 429], results)
        served = [(body, seconds) for status, body, seconds in results.values() if status == 200]
        self.assertTrue(all(body == b"slow page\n" for body, _ in served))
        # The last one let through waited for three leaks of 500 ms.
        self.assertGreaterEqual(max(seconds for _, seconds in served), 1.0, results)

    def test_allow_and_deny_per_path_for_ipv4_and_ipv6_through_a_trusted_proxy(self):
        for client, status in (("10.1.2.3", 200), ("192.168.7.7", 403), ("2001:db8:a::5", 200),
                               ("2001:db8:b::5", 403), ("::ffff:10.9.9.9", 200)):
            response = self.fetch("/admin/", client)
            self.assertEqual(response.status, status, client)
            if status == 200:
                self.assertEqual(response.body, b"admin\n")
        # The decoded path is what the rule sees.
        self.assertEqual(self.fetch("/%61dmin/index.html", "192.168.7.7").status, 403)
        self.assertEqual(self.fetch("//admin/index.html", "192.168.7.7").status, 403)
        # The longest prefix wins: a public corner of /admin/.
        self.assertEqual(self.fetch("/admin/public/logo.txt", "192.168.7.7").status, 200)
        # A deny-only rule: an address in neither list passes.
        for client, status in (("192.0.2.44", 403), ("2001:db8:bad::1", 403),
                               ("198.51.100.44", 200), ("2001:db8:900d::1", 200)):
            self.assertEqual(self.fetch("/office/", client).status, status, client)
        # Paths no rule covers are open to everyone.
        self.assertEqual(self.fetch("/index.html", "192.168.7.7").status, 200)
        lines = self.server.error_lines("access forbidden by rule, client: 2001:db8:b::5,")
        self.assertTrue(lines, self.server.error_log_text())

    def test_a_forwarded_chain_is_judged_by_its_nearest_untrusted_hop(self):
        # A client that writes an allowed address first in its own
        # X-Forwarded-For gains nothing: the trusted proxy appended the
        # address it saw, which is the client (nginx's real_ip_recursive).
        response = self.server.fetch("/admin/", headers=[
            "X-Forwarded-For: 10.1.2.3, 192.168.7.8"])
        self.assertEqual(response.status, 403)


if __name__ == "__main__":
    harness.main()
