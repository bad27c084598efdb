"""Starts the real lepus binary on a free loopback port and talks raw HTTP to it.

Every end-to-end test imports this module. The binary comes from the
LEPUS_BINARY environment variable (CTest sets it); without it the tests fail,
they do not skip (main() and Lepus() say why). Each server gets its own
temporary document root and logs (temp_dir(), the one scratch-directory helper
of the e2e tests); stop() sends SIGTERM, waits, and fails the test if lepus did
not exit 0 or if a sanitizer reported anything.
"""
import atexit
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

BINARY = os.environ.get("LEPUS_BINARY", "")
# REAL_BINARY is lepus itself. As root (as CI runs the tests) BINARY is a wrapper adding
# --allow-root: started as root, lepus switches to www-data after binding
# (issue 33), and the tests' scratch directories are root's alone (mkdtemp
# makes them 0700), as are php-fpm's sockets. admin_test.py runs REAL_BINARY to
# test that switch.
REAL_BINARY = os.path.abspath(BINARY) if BINARY else ""
# LEPUS_IO=uring runs the same tests on the io_uring backend (CTest registers
# *_uring variants of the HTTP and FastCGI tests); stop() then checks that the
# server really ran on it and did not fall back to epoll.
IO = os.environ.get("LEPUS_IO", "")
# LEPUS_PROTOCOL=h2 or h2c runs the same tests over HTTP/2 (CTest registers
# *_h2 and *_h2c variants of the tests in the protocol matrix, like the io_uring
# twins): Lepus.fetch() then speaks that protocol through curl, and checks that
# curl really did. "h1" (the default) is HTTP/1.1 in clear. "h3" (issue 39) adds
# a quic:// listener on the https:// one's port and fetches through h3client.py
# (aioquic); a test is skipped, saying why, without aioquic or a lepus with QUIC.
PROTOCOL = os.environ.get("LEPUS_PROTOCOL", "h1")
PROTOCOLS = ("h1", "h2", "h2c", "h3")
if PROTOCOL not in PROTOCOLS:
    raise SystemExit("LEPUS_PROTOCOL=%r: expected one of %s" % (PROTOCOL, ", ".join(PROTOCOLS)))
CURL = shutil.which("curl")
OPENSSL = shutil.which("openssl")
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "WARNING: ThreadSanitizer",
                     "ERROR: LeakSanitizer")


def _root_wrapper(binary):
    """A script that runs `binary` with the caller's arguments and --allow-root.
    It lives beside the binary, so that tests finding the build directory from
    BINARY still do (a temporary directory where that is not writable), and is
    readable by every user, since some tests start lepus under another uid."""
    binary = os.path.abspath(binary)
    text = '#!/bin/sh\n# lepus started as root by the e2e tests (test/e2e/harness.py)\n' \
           'exec %s "$@" --allow-root\n' % shlex.quote(binary)
    for directory in (os.path.dirname(binary), None):
        if directory is None:
            directory = tempfile.mkdtemp(prefix="lepus-as-root-")
            atexit.register(shutil.rmtree, directory, True)
            os.chmod(directory, 0o755)
        path = os.path.join(directory, "lepus-allow-root")
        # Written aside and renamed: tests running side by side may write it at once.
        scratch = "%s.%d" % (path, os.getpid())
        try:
            with open(scratch, "w") as f:
                f.write(text)
            os.chmod(scratch, 0o755)
            os.rename(scratch, path)
            return path
        except OSError:
            continue


if BINARY and os.geteuid() == 0 and os.access(BINARY, os.X_OK):
    BINARY = _root_wrapper(BINARY)


def require_binary():
    """The lepus binary under test. Raises AssertionError (a failure, never a skip)
    when LEPUS_BINARY is unset or not executable: a suite that cannot find what it
    tests must not pass as skipped under CTest."""
    if not BINARY:
        raise AssertionError("LEPUS_BINARY is not set (CTest sets it; by hand: "
                             "LEPUS_BINARY=build/release/src/server/lepus)")
    if not os.access(BINARY, os.X_OK):
        raise AssertionError("LEPUS_BINARY=%s is not an executable file" % BINARY)
    return BINARY


def temp_dir(owner=None, name="e2e"):
    """A fresh directory $TMPDIR/lepus-<name>-XXXXXX. With owner (a TestCase, or a
    TestCase class from setUpClass) it is removed with its content when that test
    or class is done; without, the caller removes it with remove_temp_dir()."""
    path = tempfile.mkdtemp(prefix="lepus-%s-" % name)
    if isinstance(owner, type):
        owner.addClassCleanup(remove_temp_dir, path)
    elif owner is not None:
        owner.addCleanup(remove_temp_dir, path)
    return path


def wait_until(test, condition, what, timeout=10.0):
    """Polls condition() until it is true and returns its value; fails `test`
    (a TestCase), saying `what` it waited for, after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            test.fail("timed out waiting for " + what)
        time.sleep(0.05)


def remove_temp_dir(path):
    """Removes a directory made by temp_dir() with its content; a missing one is fine."""
    shutil.rmtree(path, ignore_errors=True)


def is_sanitized():
    """True when the lepus under test was built with AddressSanitizer (REAL_BINARY:
    BINARY may be the --allow-root wrapper script)."""
    with open(REAL_BINARY, "rb") as f:
        return b"__asan_init" in f.read()


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_certificate = None


def test_certificate():
    """(cert, key): a self-signed P-256 certificate for localhost and 127.0.0.1,
    made once per test process with openssl, in a directory removed at exit."""
    global _certificate
    if _certificate is None:
        if not OPENSSL:
            raise AssertionError("openssl is needed for the TLS tests (apt-get install openssl)")
        directory = temp_dir(name="cert")
        import atexit
        atexit.register(remove_temp_dir, directory)
        cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)
        _certificate = (cert, key)
    return _certificate


def free_tcp_and_udp_port():
    """A port on 127.0.0.1 free a moment ago for both TCP and UDP: an https://
    and a quic:// listener share the number (issue 39)."""
    for _ in range(50):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no port free for both TCP and UDP")


_quic_binaries = {}


def binary_has_quic(binary=None):
    """True when this lepus offers quic:// listeners (its --help names them)."""
    binary = binary or BINARY
    if binary not in _quic_binaries:
        done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        _quic_binaries[binary] = "quic://" in done.stdout + done.stderr
    return _quic_binaries[binary]


def raise_fd_limit(wanted=65536):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), max(hard, wanted)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Lepus:
    """One running lepus process."""

    def __init__(self, args=(), root=None, preexec=None, access_log=True, listen="127.0.0.1:0",
                 protocol=None, binary=None):
        require_binary()
        # The protocol fetch() speaks: the matrix's (LEPUS_PROTOCOL) unless given.
        # "h2" adds an https:// listener with a test certificate (tls_port);
        # "h3" also a quic:// one on the same port number (quic_port).
        self.protocol = protocol or PROTOCOL
        self.tls_port = None
        self.quic_port = _quic_port(args)
        if self.protocol == "h3" and listen:
            _skip_without_h3(binary)
            cert, key = test_certificate()
            self.tls_port = self.quic_port = free_tcp_and_udp_port()
            args = ["--listen", "https://127.0.0.1:%d" % self.tls_port, "--listen",
                    "quic://127.0.0.1:%d" % self.quic_port, "--tls-cert", cert,
                    "--tls-key", key] + list(args)
        if self.protocol == "h2" and listen:
            cert, key = test_certificate()
            self.tls_port = free_port()
            args = ["--listen", "https://127.0.0.1:%d" % self.tls_port, "--tls-cert", cert,
                    "--tls-key", key] + list(args)
        self.tmp = temp_dir()
        self.root = root or os.path.join(self.tmp, "www")
        os.makedirs(self.root, exist_ok=True)
        self.access_log = os.path.join(self.tmp, "access.log") if access_log else "off"
        self.error_log = os.path.join(self.tmp, "error.log")
        # listen=None: the addresses come from a config file in `args`.
        cmd = [binary or BINARY, self.root] + (["--listen", listen] if listen else []) + [
            "--access-log", self.access_log, "--error-log", self.error_log, "--log-level", "info"]
        if IO:
            cmd += ["--io", IO]
        cmd += list(args)
        self.stderr_path = os.path.join(self.tmp, "stderr.txt")
        self.stderr_file = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr_file,
                                     text=True, preexec_fn=preexec)
        line = self.proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        self.first_line = line
        if not match:
            self.proc.wait(timeout=10)
            raise RuntimeError("lepus did not start: %r %s" % (line, self.stderr()))
        self.port = int(match.group(1))

    # --- files -------------------------------------------------------------
    def write(self, relative, content, mode=None):
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
        if mode is not None:
            os.chmod(path, mode)
        return path

    # --- talking -----------------------------------------------------------
    def connect(self, timeout=10):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def request(self, raw, timeout=10):
        """Sends raw bytes on a new connection and reads one response."""
        with self.connect(timeout) as s:
            s.sendall(raw if isinstance(raw, bytes) else raw.encode())
            return read_response(s)

    def get(self, path, headers=(), method="GET"):
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: localhost", "Connection: close"]
        lines += list(headers)
        return self.request("\r\n".join(lines) + "\r\n\r\n")

    @property
    def over_tls(self):
        """Whether fetch()'s requests arrive over TLS (HTTPS=on, https://):
        HTTP/2 over TLS and HTTP/3 (QUIC is always TLS 1.3)."""
        return self.protocol in ("h2", "h3")

    @property
    def http_version(self):
        """fetch()'s protocol as the access log and SERVER_PROTOCOL say it."""
        return {"h1": "HTTP/1.1", "h2": "HTTP/2.0", "h2c": "HTTP/2.0",
                "h3": "HTTP/3.0"}[self.protocol]

    def url(self, path):
        """The URL of `path` on the listener of this server's protocol."""
        if self.protocol == "h3":
            return "https://127.0.0.1:%d%s" % (self.quic_port, path)
        if self.protocol == "h2":
            return "https://127.0.0.1:%d%s" % (self.tls_port, path)
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def fetch(self, path, headers=(), method="GET", body=None, timeout=20, curl_options=()):
        """One request with curl over this server's protocol (HTTP/1.1, HTTP/2
        over TLS, or h2c with prior knowledge), on a new connection. `headers`
        are "Name: value" lines ("Host: x" becomes :authority over HTTP/2);
        curl_options are more curl arguments (--connect-to through a relay).
        Returns a Response whose .protocol is what curl spoke ("1.1" or "2"):
        a request that did not go over the wanted protocol fails the test.
        Over h3 the request goes through h3client.py instead (.protocol "3")."""
        if self.protocol == "h3":
            return self._fetch_h3(path, headers, method, body, timeout, curl_options)
        if not CURL:
            raise AssertionError("curl is needed for the protocol matrix (apt-get install curl)")
        flags = {"h1": ["--http1.1"], "h2": ["--http2", "-k"],
                 "h2c": ["--http2-prior-knowledge"]}[self.protocol]
        with tempfile.TemporaryDirectory(prefix="lepus-fetch-") as scratch:
            head_file = os.path.join(scratch, "head")
            body_file = os.path.join(scratch, "body")
            cmd = [CURL, "-s", "-S", "--max-time", str(timeout), "-X", method, "-D", head_file,
                   "-o", body_file, "-w", "%{http_version}", "--path-as-is"] + flags + list(
                       curl_options)
            if method == "HEAD":
                cmd[cmd.index("-X"):cmd.index("-X") + 2] = ["-I"]
            for line in headers:
                cmd += ["-H", line]
            if body is not None:
                with open(os.path.join(scratch, "request"), "wb") as f:
                    f.write(body if isinstance(body, bytes) else body.encode())
                cmd += ["--data-binary", "@" + os.path.join(scratch, "request")]
            cmd.append(self.url(path))
            done = subprocess.run(cmd, capture_output=True, timeout=timeout + 10)
            if done.returncode != 0:
                raise ConnectionError("curl %s: exit %d: %s" % (
                    " ".join(cmd[1:]), done.returncode, done.stderr.decode(errors="replace")))
            with open(head_file, "rb") as f:
                raw_head = f.read()
            body_bytes = b""
            if method != "HEAD" and os.path.exists(body_file):  # -I writes the head there
                with open(body_file, "rb") as f:
                    body_bytes = f.read()
        version = done.stdout.decode().strip()
        wanted = "1.1" if self.protocol == "h1" else "2"
        if version != wanted:
            raise AssertionError("curl spoke HTTP/%s, not HTTP/%s (%s)" % (version, wanted,
                                                                          self.protocol))
        # The last head: a 100 Continue may come first.
        head = raw_head.strip().split(b"\r\n\r\n")[-1].decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2) + [""]
        headers_seen = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers_seen[name.strip().lower()] = value.strip()
        response = Response(int(parts[1]), parts[2], headers_seen, body_bytes,
                            head.encode("latin-1"))
        response.protocol = version
        response.header_lines = lines[1:]
        return response

    def _fetch_h3(self, path, headers, method, body, timeout, curl_options):
        """fetch() over HTTP/3 on this server's quic:// listener, as a Response."""
        import h3client
        if not h3client.AIOQUIC:
            raise unittest.SkipTest(h3client.MISSING_REASON)
        if self.quic_port is None:
            raise unittest.SkipTest("LEPUS_PROTOCOL=h3: this lepus was started without a "
                                    "quic:// listener")
        if curl_options:
            raise unittest.SkipTest("LEPUS_PROTOCOL=h3: curl options %s have no HTTP/3 "
                                    "equivalent in h3client.py" % " ".join(curl_options))
        return fetch_h3(self.url(path), headers, method, body, timeout)

    # --- process -----------------------------------------------------------
    def stderr(self):
        with open(self.stderr_path) as f:
            return f.read()

    def error_log_text(self):
        try:
            with open(self.error_log) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def error_lines(self, *needles, count=1, timeout=10):
        """The error-log lines holding every one of `needles`, once there are
        `count` of them (the log is written by a thread of its own), or those
        there are after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in self.error_log_text().splitlines()
                     if all(needle in line for needle in needles)]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)

    def access_lines(self):
        with open(self.access_log) as f:
            return f.read().splitlines()

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def fd_targets(self):
        """What each open descriptor is ({fd: readlink}), for a message about a leak."""
        targets = {}
        for fd in os.listdir("/proc/%d/fd" % self.proc.pid):
            try:
                targets[int(fd)] = os.readlink("/proc/%d/fd/%s" % (self.proc.pid, fd))
            except OSError:
                pass  # closed meanwhile
        return targets

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self, test=None, expect_code=0, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            if test:
                test.fail("lepus did not stop within %d s after SIGTERM" % timeout)
        self.proc.stdout.close()
        self.stderr_file.close()
        text = self.stderr() + self.error_log_text()
        if test:
            for marker in SANITIZER_MARKERS:
                test.assertNotIn(marker, text, "sanitizer report:\n" + text[-4000:])
            test.assertEqual(code, expect_code, "lepus exit code; stderr:\n" + text[-2000:])
            if IO and code == 0 and "lepus started" in text:
                test.assertIn(", %s, max" % IO, text, "lepus did not run on --io " + IO)
        remove_temp_dir(self.tmp)
        return code


def fetch_h3(url, headers=(), method="GET", body=None, timeout=20):
    """One HTTP/3 request through h3client.py (aioquic) as a Response with
    .protocol "3", like Lepus.fetch()'s (also for the peers the h3 fixtures
    are checked against: test/e2e/h3_fixtures_test.py)."""
    import h3client
    answer = h3client.h3_fetch(url, method, list(headers), body, timeout)
    lines = ["%s: %s" % (name, value) for name, value in answer.headers]
    head = "\r\n".join(["HTTP/3 %d" % answer.status] + lines)
    response = Response(answer.status, "", {name: value for name, value in answer.headers},
                        answer.body, head.encode("latin-1"))
    response.protocol = "3"
    response.header_lines = lines
    return response


def _quic_port(args):
    """The port of a quic://ADDR:PORT listener among lepus's arguments, or None."""
    for arg in args:
        match = re.match(r"quic://.*:(\d+)$", str(arg))
        if match:
            return int(match.group(1))
    return None


def _skip_without_h3(binary):
    """Skips the calling test when HTTP/3 cannot be spoken: no aioquic, or a
    lepus without quic:// listeners (issue 39's server side not built in)."""
    import h3client
    if not h3client.AIOQUIC:
        raise unittest.SkipTest(h3client.MISSING_REASON)
    if not binary_has_quic(binary):
        raise unittest.SkipTest("LEPUS_PROTOCOL=h3: this lepus has no quic:// listener "
                                "(its --help does not name one)")


class Response:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status, self.reason, self.headers, self.body, self.raw_head = \
            status, reason, headers, body, raw_head

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)


def recv_until(s, marker, buffer=b""):
    while marker not in buffer:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed before %r; got %r" % (marker, buffer[:200]))
        buffer += chunk
    return buffer


def read_slowly_to_end(s, slow_bytes):
    """Reads s until the peer closes, pausing 1 ms after each read until
    slow_bytes have arrived: the window closes, so the server's writes hit
    EAGAIN and must resume. Returns everything read."""
    data = bytearray()
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) < slow_bytes:
            time.sleep(0.001)


def read_response(s, head_only=False, buffer=b""):
    """Reads one response from s (Content-Length, chunked or close-delimited).
    Returns (Response, leftover bytes) when buffer is given as keyword, else Response."""
    data = recv_until(s, b"\r\n\r\n", buffer)
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    version, status, reason = (lines[0].split(" ", 2) + [""])[:3]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    status = int(status)
    if head_only or status in (204, 304) or 100 <= status < 200:
        body, leftover = b"", rest
    elif "content-length" in headers:
        length = int(headers["content-length"])
        while len(rest) < length:
            chunk = s.recv(1 << 20)
            if not chunk:
                raise ConnectionError("closed after %d of %d body bytes" % (len(rest), length))
            rest += chunk
        body, leftover = rest[:length], rest[length:]
    else:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            rest += chunk
        body, leftover = rest, b""
    response = Response(status, reason, headers, body, head)
    response.leftover = leftover
    return response


def is_closed(s, timeout=5.0):
    """True when the peer closes s (EOF or reset) within timeout seconds."""
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


class LepusTestCase(unittest.TestCase):
    """Starts one lepus per test class (override ARGS) and stops it after."""
    ARGS = ()
    ACCESS_LOG = True

    @classmethod
    def setUpClass(cls):
        cls.server = Lepus(cls.ARGS, access_log=cls.ACCESS_LOG)
        cls.populate(cls.server)

    @classmethod
    def populate(cls, server):
        pass

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(cls._Checker())

    class _Checker(unittest.TestCase):
        def runTest(self):
            pass


def main():
    """Runs the calling test file; without a usable binary it fails at once, one line."""
    try:
        require_binary()
    except AssertionError as error:
        sys.exit("FAIL: %s" % error)
    unittest.main(verbosity=2)
