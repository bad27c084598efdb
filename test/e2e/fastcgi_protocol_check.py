"""FastCGI protocol library against real peers, through fcgi_probe.

Registered by test/fastcgi/CMakeLists.txt (CTest e2e_fastcgi_protocol), which
sets FCGI_PROBE and FCGI_RESPONDER; not named *_test.py so that test/e2e does
not register it a second time. Two peers: a real php-fpm (phpfpm.py) running the
scripts of test/e2e/php/, and fcgi_responder, which misbehaves on demand.
"""
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import phpfpm  # noqa: E402

PROBE = os.environ.get("FCGI_PROBE", "")
RESPONDER = os.environ.get("FCGI_RESPONDER", "")
MIB = 1024 * 1024


def require_peers():
    """Fails (never skips) without the two test peers: CTest always sets both."""
    if not (PROBE and os.access(PROBE, os.X_OK) and RESPONDER and os.access(RESPONDER, os.X_OK)):
        raise AssertionError("FCGI_PROBE and FCGI_RESPONDER must name the built fcgi_probe and "
                             "fcgi_responder (CTest sets them: ctest -R e2e_fastcgi_protocol)")


class ProbeResult:
    def __init__(self, proc):
        self.code = proc.returncode
        self.stderr = proc.stderr.decode(errors="replace")
        self.responses = []
        self.connections = None
        out = proc.stdout
        pos = 0
        current = None
        while pos < len(out):
            end = out.index(b"\n", pos)
            line = out[pos:end].decode(errors="replace")
            pos = end + 1
            if line.startswith("status "):
                current = {"status": int(line.split()[1]), "headers": []}
            elif line.startswith("header "):
                name, _, value = line[7:].partition(": ")
                current["headers"].append((name, value))
            elif line.startswith("stderr-length "):
                current["stderr_length"] = int(line.split()[1])
            elif line.startswith("app-status "):
                current["app_status"] = int(line.split()[1])
            elif line.startswith("body-length "):
                length = int(line.split()[1])
                current["body"] = out[pos:pos + length]
                assert out[pos + length:pos + length + 1] == b"\n", "body not followed by newline"
                pos += length + 1
                self.responses.append(current)
            elif line.startswith("connections "):
                self.connections = int(line.split()[1])
            else:
                raise AssertionError("unexpected probe output line %r" % line)

    @property
    def response(self):
        assert len(self.responses) == 1, self.responses
        return self.responses[0]

    def header(self, name, index=0):
        for n, v in self.responses[index]["headers"]:
            if n.lower() == name.lower():
                return v
        return None


def probe(address, script, *args, timeout=60):
    proc = subprocess.run([PROBE, address, script] + [str(a) for a in args],
                          capture_output=True, timeout=timeout)
    return ProbeResult(proc)


def fnv1a64(data):
    h = 14695981039346656037
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def pattern(size):
    alphabet = b"abcdefghijklmnopqrstuvwxyz"
    return (alphabet * (size // 26 + 1))[:size]


def body_file(tmp, size, seed):
    data = random.Random(seed).randbytes(size)
    path = os.path.join(tmp, "body-%d-%d" % (size, seed))
    with open(path, "wb") as f:
        f.write(data)
    return path, data


class Responder:
    def __init__(self, listen, *args):
        self.proc = subprocess.Popen([RESPONDER, "--listen", listen] + [str(a) for a in args],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        match = re.match(r"listening (\S+)", line)
        if not match:
            self.proc.kill()
            raise RuntimeError("fcgi_responder did not start: %r" % line)
        self.address = match.group(1)

    def stop(self):
        """SIGTERM; returns (exit code, connections accepted)."""
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=10)
        match = re.search(r"connections (\d+)", out)
        return self.proc.returncode, int(match.group(1)) if match else None


class PhpFpmTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_peers()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
        cls.fpm = phpfpm.PhpFpm(children=4)
        cls.tmp = harness.temp_dir(cls, "fcgi-check")

    @classmethod
    def tearDownClass(cls):
        log = cls.fpm.log()
        code = cls.fpm.stop()
        cls.fpm.cleanup()
        assert code == 0, "php-fpm exited %s: %s" % (code, log)

    def script(self, name):
        return os.path.join(phpfpm.PHP_DIR, name)

    def test_env_sees_the_cgi_params(self):
        r = probe(self.fpm.address, self.script("env.php"), "--query", "a=1&b=two",
                  "--header", "X-Test: hello", "--header", "Proxy: http://evil:1")
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.response["status"], 200)
        env = json.loads(r.response["body"])
        self.assertEqual(env["REQUEST_METHOD"], "GET")
        self.assertEqual(env["QUERY_STRING"], "a=1&b=two")
        self.assertEqual(env["SCRIPT_NAME"], "/env.php")
        self.assertEqual(env["SCRIPT_FILENAME"], self.script("env.php"))
        self.assertEqual(env["DOCUMENT_ROOT"], phpfpm.PHP_DIR)
        self.assertEqual(env["REQUEST_URI"], "/env.php?a=1&b=two")
        self.assertEqual(env["DOCUMENT_URI"], "/env.php")
        self.assertEqual(env["PHP_SELF"], "/env.php")
        self.assertRegex(env["SERVER_SOFTWARE"], r"^lepus/\d+\.\d+\.\d+$")
        self.assertEqual(env["GATEWAY_INTERFACE"], "CGI/1.1")
        self.assertEqual(env["SERVER_PROTOCOL"], "HTTP/1.1")
        self.assertEqual(env["REDIRECT_STATUS"], "200")
        self.assertEqual(env["REMOTE_ADDR"], "127.0.0.1")
        self.assertEqual(env["HTTP_X_TEST"], "hello")
        self.assertEqual(env["HTTP_HOST"], "localhost")
        self.assertNotIn("HTTP_PROXY", env)
        self.assertNotIn("HTTPS", env)

    def test_post_body_of_one_mib_arrives_intact(self):
        path, data = body_file(self.tmp, MIB, 1)
        r = probe(self.fpm.address, self.script("echo.php"), "--method", "POST",
                  "--content-type", "application/octet-stream", "--body-file", path)
        self.assertEqual(r.code, 0, r.stderr)
        echoed = json.loads(r.response["body"])
        self.assertEqual(echoed["length"], MIB)
        self.assertEqual(echoed["md5"], hashlib.md5(data).hexdigest())

    def test_status_and_custom_header(self):
        r = probe(self.fpm.address, self.script("status.php"))
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.response["status"], 201)
        self.assertEqual(r.header("X-Custom"), "yes")
        self.assertEqual(r.response["body"], b"created\n")

    def test_big_output_is_exactly_one_mib(self):
        r = probe(self.fpm.address, self.script("big.php"))
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(len(r.response["body"]), MIB)
        self.assertEqual(r.response["body"], pattern(MIB))

    def test_keep_conn_serves_three_requests_on_one_connection(self):
        r = probe(self.fpm.address, self.script("hello.php"), "--keep-conn", "--repeat", 3)
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.connections, 1)
        self.assertEqual([x["body"] for x in r.responses], [b"hello 5050"] * 3)

    def test_path_info(self):
        r = probe(self.fpm.address, self.script("pathinfo.php"), "--path-info", "/some/path")
        self.assertEqual(r.code, 0, r.stderr)
        seen = json.loads(r.response["body"])
        self.assertEqual(seen["PATH_INFO"], "/some/path")
        self.assertEqual(seen["SCRIPT_NAME"], "/pathinfo.php")

    def test_slow_and_index(self):
        r = probe(self.fpm.address, self.script("slow.php"), "--query", "ms=50")
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.response["body"], b"slept 50\n")
        r = probe(self.fpm.address, self.script("index.php"))
        self.assertEqual(r.response["body"], b"index of /index.php\n")

    def test_missing_script_is_404_with_stderr(self):
        r = probe(self.fpm.address, self.script("absent.php"))
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.response["status"], 404)
        self.assertIn("Primary script unknown", r.stderr)

    def test_tcp_listener_and_restart(self):
        with phpfpm.PhpFpm(children=1, tcp=True) as fpm:
            self.assertRegex(fpm.address, r"^127\.0\.0\.1:\d+$")
            r = probe(fpm.address, self.script("hello.php"))
            self.assertEqual(r.response["body"], b"hello 5050")
            fpm.restart()
            r = probe(fpm.address, self.script("hello.php"), "--keep-conn", "--repeat", 2)
            self.assertEqual(r.code, 0, r.stderr)
            self.assertEqual(len(r.responses), 2)


class ResponderTest(unittest.TestCase):
    def setUp(self):
        require_peers()
        self.tmp = harness.temp_dir(self, "fcgi-responder")
        self.responder = Responder("unix:" + os.path.join(self.tmp, "responder.sock"))

    def tearDown(self):
        code, _ = self.responder.stop()
        self.assertEqual(code, 0)

    def run_mode(self, query, *args, address=None):
        return probe(address or self.responder.address, "/srv/app.php", "--query", query, *args)

    def test_echo_params_and_stdin(self):
        path, data = body_file(self.tmp, 200000, 2)
        r = self.run_mode("mode=echo&x=1", "--method", "POST", "--body-file", path,
                          "--header", "X-Forwarded-For: 10.1.2.3")
        self.assertEqual(r.code, 0, r.stderr)
        echoed = json.loads(r.response["body"])
        self.assertEqual(echoed["stdin_length"], len(data))
        self.assertEqual(echoed["stdin_fnv1a64"], fnv1a64(data))
        params = echoed["params"]
        self.assertEqual(params["REQUEST_METHOD"], "POST")
        self.assertEqual(params["CONTENT_LENGTH"], str(len(data)))
        self.assertEqual(params["QUERY_STRING"], "mode=echo&x=1")
        self.assertEqual(params["HTTP_X_FORWARDED_FOR"], "10.1.2.3")
        self.assertEqual(params["SCRIPT_FILENAME"], "/srv/app.php")

    def test_big(self):
        r = self.run_mode("mode=big&size=300001")
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(r.response["body"], pattern(300001))

    def test_status(self):
        r = self.run_mode("mode=status")
        self.assertEqual(r.response["status"], 201)
        self.assertEqual(r.header("X-Custom"), "yes")

    def test_garbage_is_a_protocol_error_not_a_hang(self):
        r = self.run_mode("mode=garbage")
        self.assertEqual(r.code, 2, r.stderr)
        self.assertIn("protocol", r.stderr)

    def test_close_midway(self):
        r = self.run_mode("mode=close")
        self.assertEqual(r.code, 3, r.stderr)
        self.assertIn("closed before END_REQUEST", r.stderr)

    def test_never_answers_times_out(self):
        r = self.run_mode("mode=never", "--timeout-ms", 300)
        self.assertEqual(r.code, 4, r.stderr)

    def test_stderr_record_then_answer(self):
        r = self.run_mode("mode=stderr")
        self.assertEqual(r.code, 0, r.stderr)
        self.assertGreater(r.response["stderr_length"], 0)
        self.assertIn("PHP Warning: from fcgi_responder", r.stderr)
        self.assertEqual(r.response["body"], b"after stderr\n")

    def test_slow_request_does_not_block_others(self):
        # A request that is never answered stays pending while another is served.
        blocked = subprocess.Popen([PROBE, self.responder.address, "/srv/app.php", "--query",
                                    "mode=never", "--timeout-ms", "5000"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # Wait until the blocked probe's connection was accepted: each count
            # request is itself a connection, so more than `asked` means it was.
            for asked in range(1, 200):
                r = self.run_mode("mode=count")
                if int(r.response["body"].split(b"=")[1]) > asked:
                    break
            else:
                self.fail("the blocked probe never connected")
            r = self.run_mode("mode=slow&ms=20")
            self.assertEqual(r.code, 0, r.stderr)
            self.assertIn(b'"QUERY_STRING": "mode=slow&ms=20"', r.response["body"])
            self.assertIsNone(blocked.poll())
        finally:
            blocked.kill()
            blocked.wait()

    def test_keep_conn_and_connection_count(self):
        r = self.run_mode("mode=status", "--keep-conn", "--repeat", 3)
        self.assertEqual(r.code, 0, r.stderr)
        self.assertEqual(len(r.responses), 3)
        r = self.run_mode("mode=count")
        self.assertEqual(r.response["body"], b"connections=2\n")
        code, accepted = self.responder.stop()
        self.assertEqual((code, accepted), (0, 2))
        self.responder = Responder("unix:" + os.path.join(self.tmp, "responder.sock"))

    def test_split_records_with_pauses(self):
        slow = Responder("127.0.0.1:0", "--split", 7, "--pause-ms", 1)
        try:
            r = self.run_mode("mode=status", "--keep-conn", "--repeat", 2, address=slow.address)
            self.assertEqual(r.code, 0, r.stderr)
            self.assertEqual([x["status"] for x in r.responses], [201, 201])
            path, data = body_file(self.tmp, 5000, 3)
            r = self.run_mode("mode=echo", "--method", "POST", "--body-file", path,
                              address=slow.address)
            self.assertEqual(r.code, 0, r.stderr)
            self.assertEqual(json.loads(r.response["body"])["stdin_fnv1a64"], fnv1a64(data))
        finally:
            self.assertEqual(slow.stop()[0], 0)
        fast_split = Responder("127.0.0.1:0", "--split", 3)
        try:
            r = self.run_mode("mode=big&size=100000", address=fast_split.address)
            self.assertEqual(r.code, 0, r.stderr)
            self.assertEqual(r.response["body"], pattern(100000))
        finally:
            self.assertEqual(fast_split.stop()[0], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
