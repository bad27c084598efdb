"""HTTP/2 end to end (issue 19): h2 by ALPN on a TLS listener and h2c with prior
knowledge on a plain one, driven by real clients (curl --http2 and
--http2-prior-knowledge, nghttp with many concurrent streams); static files
with ranges and conditional requests, PHP through php-fpm (a POST body, a
streamed page), the access log's HTTP/2.0 lines and the status page's
counters; --http2 off and --h2c off; and the attacks as raw frames: rapid reset
(CVE-2023-44487), a CONTINUATION flood (CVE-2024-27316), an oversized header
list (431), a SETTINGS flood, and a client that sends nothing after the preface
(closed at the header deadline). When h2spec is installed
(scripts/install-h2spec), its whole suite runs against both listeners, and
with no failure allowed against an h2c:// listener (HTTP/2 only, no HTTP/1.1)."""
import hashlib
import json
import os
import random
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
import unittest

import harness
import phpfpm

CURL = shutil.which("curl")
NGHTTP = shutil.which("nghttp")
OPENSSL = shutil.which("openssl")
H2SPEC = shutil.which("h2spec") or (os.path.expanduser("~/go/bin/h2spec")
                                    if os.path.exists(os.path.expanduser("~/go/bin/h2spec")) else None)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# Frame types and flags (RFC 9113 §6).
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, CONTINUATION = 0, 1, 3, 4, 6, 7, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(
        ">I", stream) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack(fields):
    """Literal header fields without indexing, new names (RFC 7541 §6.2.2)."""
    out = b""
    for name, value in fields:
        out += b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value
    return out


def request_block(path=b"/", extra=()):
    return hpack([(b":method", b"GET"), (b":scheme", b"http"), (b":path", path),
                  (b":authority", b"localhost")] + list(extra))


def read_frames(sock, seconds=5, result=None, done=None):
    """Frames until the connection closes, done(frames) is true (default: a
    GOAWAY came) or `seconds` pass: [(type, flags, stream, payload)];
    result["closed"] says whether it closed."""
    if done is None:
        done = lambda frames: any(f[0] == GOAWAY for f in frames)
    sock.settimeout(seconds)
    data, frames = b"", []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            if result is not None:
                result["closed"] = True
            break
        data += chunk
        while len(data) >= 9:
            length = int.from_bytes(data[:3], "big")
            if len(data) < 9 + length:
                break
            frames.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF,
                           data[9:9 + length]))
            data = data[9 + length:]
        if done(frames):
            break
    return frames


def goaway_code(frames):
    for kind, _, _, payload in frames:
        if kind == GOAWAY:
            return int.from_bytes(payload[4:8], "big")
    return None


def read_streams(sock, streams, seconds=20):
    """Reads frames until every stream in `streams` has ended (END_STREAM):
    {stream: (HEADERS payload, DATA bytes)}; fails on a GOAWAY or a close first."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    heads, bodies, ended, buffer = {}, {s: [] for s in streams}, set(), b""
    while ended != set(streams) and time.monotonic() < deadline:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise AssertionError("closed with streams %s open" % sorted(set(streams) - ended))
        buffer += chunk
        at = 0
        while len(buffer) - at >= 9:
            length = int.from_bytes(buffer[at:at + 3], "big")
            if len(buffer) - at < 9 + length:
                break
            kind, flags = buffer[at + 3], buffer[at + 4]
            stream = int.from_bytes(buffer[at + 5:at + 9], "big") & 0x7FFFFFFF
            payload = buffer[at + 9:at + 9 + length]
            at += 9 + length
            if kind == GOAWAY:
                raise AssertionError("GOAWAY %r" % payload)
            if stream not in bodies:
                continue  # a stream the caller reset
            if kind == HEADERS:
                heads[stream] = payload
            elif kind == DATA:
                bodies[stream].append(payload)
            if kind in (HEADERS, DATA) and flags & END_STREAM:
                ended.add(stream)
        buffer = buffer[at:]
    return {s: (heads.get(s), b"".join(bodies[s])) for s in streams}


# Our SETTINGS with a 16 MiB stream window, and the connection window opened as
# wide, so that flow control never holds a response back.
WIDE_OPEN = frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 1 << 24)) + \
    frame(8, 0, 0, struct.pack(">I", (1 << 24) - 65535))  # WINDOW_UPDATE


def curl(*args):
    done = subprocess.run([CURL, "-s", "-S", "--max-time", "20"] + list(args),
                          capture_output=True, timeout=30)
    return done


@unittest.skipUnless(CURL and OPENSSL, "needs curl and openssl")
class Http2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.tmp = harness.temp_dir(name="http2")
        cls.cert = os.path.join(cls.tmp, "cert.pem")
        cls.key = os.path.join(cls.tmp, "key.pem")
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", cls.key, "-out",
                        cls.cert, "-days", "2", "-subj", "/CN=localhost"],
                       check=True, capture_output=True, timeout=60)
        cls.fpm = phpfpm.PhpFpm(children=4) if phpfpm.find_php_fpm() else None
        tls_port = phpfpm.free_port()
        args = ["--listen", "https://127.0.0.1:%d" % tls_port, "--tls-cert", cls.cert,
                "--tls-key", cls.key, "--status-path", "/_lepus/status",
                "--header-timeout", "2s"]
        if cls.fpm:
            args += ["--fastcgi", cls.fpm.address]
        try:
            cls.server = harness.Lepus(args)
        except Exception:
            if cls.fpm:
                cls.fpm.cleanup()
            raise
        cls.tls_port = tls_port
        cls.big = os.urandom(700 * 1024)
        # Past the in-memory limit (128 KiB) a file goes out from its fd: read into
        # the output (pread), or on h2c with --h2c-sendfile on, by sendfile after a
        # frame header lepus wrote (a second server, same files).
        cls.files = {"mib.bin": os.urandom(1 << 20), "k100.bin": os.urandom(100 * 1024),
                     "k200.bin": os.urandom(200 * 1024)}
        cls.sendfile_server = harness.Lepus(["--h2c-sendfile", "on"])
        for server in (cls.server, cls.sendfile_server):
            for name, content in cls.files.items():
                server.write(name, content)
            server.write("big.bin", cls.big)
        cls.server.write("index.html", "<p>hello over h2</p>\n")
        cls.sendfile_server.write("index.html", "<p>hello over h2</p>\n")
        cls.server.write("post.php", "<?php echo strlen(file_get_contents('php://input')), ' ',"
                                     " md5(file_get_contents('php://input')), ' ',"
                                     " $_SERVER['REQUEST_METHOD'];\n")
        cls.server.write("slow.php", "<?php for ($i = 0; $i < 3; $i++) { echo \"part $i\\n\";"
                                     " flush(); usleep(100000); }\n")
        for i in range(60):
            cls.server.write("assets/a%d.css" % i, "a%d { color: red }\n" % i * 20)

    @classmethod
    def tearDownClass(cls):
        try:
            cls.sendfile_server.stop(harness.LepusTestCase._Checker())
            cls.server.stop(harness.LepusTestCase._Checker())
        finally:
            if cls.fpm:
                cls.fpm.cleanup()
            harness.remove_temp_dir(cls.tmp)

    def h2c(self, *args):
        return curl("--http2-prior-knowledge", *args)

    def h2(self, *args):
        return curl("--http2", "-k", *args)

    def plain(self, path):
        return "http://127.0.0.1:%d%s" % (self.server.port, path)

    def secure(self, path):
        return "https://127.0.0.1:%d%s" % (self.tls_port, path)

    def test_static_files_on_both_listeners(self):
        for get, url in ((self.h2c, self.plain), (self.h2, self.secure)):
            with self.subTest(url=url("/")):
                done = get("-w", "\n%{http_version} %{http_code}", url("/"))
                self.assertEqual(done.stdout, b"<p>hello over h2</p>\n\n2 200", done.stderr)
                done = get(url("/big.bin"))
                self.assertEqual(hashlib.sha256(done.stdout).digest(),
                                 hashlib.sha256(self.big).digest())
                done = get("-r", "1000-1999", "-w", "%{http_code}", url("/big.bin"))
                self.assertEqual(done.stdout, self.big[1000:2000] + b"206")
                etag = [line for line in get("-I", url("/big.bin")).stdout.decode().splitlines()
                        if line.lower().startswith("etag:")][0].split(":", 1)[1].strip()
                done = get("-H", "If-None-Match: " + etag, "-w", "%{http_code}", url("/big.bin"))
                self.assertEqual(done.stdout, b"304")
                done = get("-w", "%{http_code}", url("/missing"))
                self.assertTrue(done.stdout.endswith(b"404"))
        # HTTP/1.1 still works on both.
        done = curl("--http1.1", "-w", "%{http_version}", self.plain("/"))
        self.assertTrue(done.stdout.endswith(b"1.1"))
        done = curl("--http1.1", "-k", "-w", "%{http_version}", self.secure("/"))
        self.assertTrue(done.stdout.endswith(b"1.1"))
        lines = self.server.access_lines()
        deadline = time.monotonic() + 5
        while not any('"GET /big.bin HTTP/2.0" 206 1000' in l for l in lines) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
            lines = self.server.access_lines()
        self.assertTrue(any('"GET /big.bin HTTP/2.0" 206 1000' in l for l in lines), lines[-5:])

    @unittest.skipUnless(NGHTTP, "needs nghttp (nghttp2-client)")
    def test_many_streams_on_one_connection(self):
        before = self.status()
        urls = [self.secure("/assets/a%d.css" % i) for i in range(60)]
        done = subprocess.run([NGHTTP, "-n", "-s", "-m", "1"] + urls, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        # One line per stream in nghttp's summary, all 200 on one connection.
        self.assertEqual(done.stdout.count(" 200 "), 60, done.stdout[-2000:])
        after = self.status()
        self.assertEqual(after["streams_total"] - before["streams_total"], 60)

    @unittest.skipUnless(NGHTTP, "needs nghttp (nghttp2-client)")
    def test_response_heads_of_many_files_mixed_on_one_connection(self):
        """Issue 38: lepus's own HPACK encoder and its cache of response heads
        (a head whose fields repeat is copied as bytes): 40 requests for four
        files in a shuffled order on each of two connections (TLS and h2c) must
        each come with its own file's content-type, etag and length."""
        files = {"mix.css": ("body{}\n", "text/css"), "mix.js": ("let x = 1;\n", "text/javascript"),
                 "mix.txt": ("plain\n", "text/plain"), "mix.svg": ("<svg></svg>\n", "image/svg+xml")}
        for name, (body, _) in files.items():
            self.server.write(name, body)
        names = sorted(files) * 10
        random.Random(38).shuffle(names)
        for url in (self.secure, self.plain):
            # Distinct queries: nghttp asks for each URI once.
            urls = [url("/%s?%d" % (name, i)) for i, name in enumerate(names)]
            done = subprocess.run([NGHTTP, "-nv"] + urls, capture_output=True, text=True,
                                  timeout=60)
            self.assertEqual(done.returncode, 0, done.stderr)
            paths, heads = {}, {}
            stream = None
            for line in done.stdout.splitlines():
                sent = re.search(r"send HEADERS frame <.*stream_id=(\d+)>", line)
                if sent:
                    stream = int(sent.group(1))
                elif stream and line.strip().startswith(":path: "):
                    paths[stream] = line.strip()[len(":path: /"):].split("?")[0]
                    stream = None
                got = re.search(r"recv \(stream_id=(\d+)\) ([a-z:-]+): (.*)$", line)
                if got:
                    heads.setdefault(int(got.group(1)), {})[got.group(2)] = got.group(3)
            self.assertEqual(len(paths), len(names), done.stdout[-2000:])
            etags = {}
            for stream, name in paths.items():
                body, content_type = files[name]
                head = heads.get(stream, {})
                self.assertEqual(head.get(":status"), "200", (name, head))
                self.assertTrue(head.get("content-type", "").startswith(content_type),
                                (name, head))
                self.assertEqual(head.get("content-length"), str(len(body)), (name, head))
                etags.setdefault(name, set()).add(head.get("etag"))
            # One etag per file, four different ones (the sizes differ).
            self.assertEqual([len(tags) for tags in etags.values()], [1] * 4, etags)
            self.assertEqual(len(set().union(*etags.values())), 4, etags)

    def test_the_date_goes_into_the_hpack_table_and_then_by_index(self):
        """The date of a response is entered in the connection's HPACK table
        (RFC 7541 §6.2.1), so the next responses of the same second name it by
        index instead of sending its 29 characters again. Three requests in one
        write: blocks 2 and 3 carry the file's last-modified (a date of 2001,
        literal) but at least one of them no other date as text (a second may
        tick between two answers, not between both pairs)."""
        path = self.server.write("dated.txt", "dated\n")
        os.utime(path, (978307200, 978307200))
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as sock:
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0) + b"".join(
                frame(HEADERS, END_HEADERS | END_STREAM, stream, request_block(b"/dated.txt"))
                for stream in (1, 3, 5)))
            answers = read_streams(sock, [1, 3, 5])
        dates = [answers[stream][0].count(b" GMT") for stream in (1, 3, 5)]
        self.assertTrue(all(b"2001 00:00:00 GMT" in answers[s][0] for s in (3, 5)), answers)
        self.assertEqual(min(dates[1:]), 1, dates)

    def status(self):
        done = curl(self.plain("/_lepus/status"))
        reactors = json.loads(done.stdout)["reactors"]
        return {key: sum(r["http2"][key] for r in reactors)
                for key in ("connections", "streams", "streams_total", "connections_total")}

    @unittest.skipUnless(shutil.which("chromium"), "needs chromium")
    def test_chromium_loads_a_page_of_50_assets_over_one_h2_connection(self):
        images = "".join('<img src="/assets/i%d.svg" width="8" height="8">' % i for i in range(50))
        self.server.write("page.html", "<!doctype html><title>fifty</title><body>%s</body>" % images)
        for i in range(50):
            self.server.write("assets/i%d.svg" % i, '<svg xmlns="http://www.w3.org/2000/svg" '
                              'width="8" height="8"><rect width="8" height="8" fill="#%06x"/></svg>'
                              % (i * 5000))
        before = self.status()
        profile = harness.temp_dir(self, "chromium-h2")
        done = subprocess.run(
            [shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-quic", "--ignore-certificate-errors", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--user-data-dir=" + profile, "--virtual-time-budget=5000", "--dump-dom",
             self.secure("/page.html")], capture_output=True, text=True, timeout=120)
        self.assertIn("<title>fifty</title>", done.stdout, done.stderr[-2000:])
        wanted = {"/page.html"} | {"/assets/i%d.svg" % i for i in range(50)}
        deadline = time.monotonic() + 10
        seen = set()
        while time.monotonic() < deadline and seen != wanted:
            text = "\n".join(self.server.access_lines())
            seen = {path for path in wanted if '"GET %s HTTP/2.0" 200' % path in text}
            time.sleep(0.1)
        self.assertEqual(wanted - seen, set())
        after = self.status()
        # The page and its 50 assets (and Chromium's favicon) on one HTTP/2 connection.
        self.assertEqual(after["connections_total"] - before["connections_total"], 1)
        self.assertGreaterEqual(after["streams_total"] - before["streams_total"], 51)

    def test_php_post_body_and_streamed_page(self):
        if not self.fpm:
            self.skipTest("php-fpm not installed")
        body = os.urandom(300 * 1024)
        path = os.path.join(self.tmp, "body.bin")
        with open(path, "wb") as f:
            f.write(body)
        for get, url in ((self.h2c, self.plain), (self.h2, self.secure)):
            done = get("--data-binary", "@" + path, url("/post.php"))
            self.assertEqual(done.stdout.decode(),
                             "%d %s POST" % (len(body), hashlib.md5(body).hexdigest()), done.stderr)
            done = get(url("/slow.php"))
            self.assertEqual(done.stdout, b"part 0\npart 1\npart 2\n")

    def raw_h2c(self, server=None):
        sock = socket.create_connection(("127.0.0.1", (server or self.server).port), timeout=10)
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        return sock

    def raw_h2c_sendfile(self):
        return self.raw_h2c(self.sendfile_server)

    def tls_h2(self):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.set_alpn_protocols(["h2"])
        sock = context.wrap_socket(
            socket.create_connection(("127.0.0.1", self.tls_port), timeout=10))
        self.assertEqual(sock.selected_alpn_protocol(), "h2")
        return sock

    def check_concurrent_streams(self, sock, scheme, wanted):
        """Sends every request of `wanted` ({stream: (path, extra fields, status
        byte, body)}) at once and checks each stream's status and every byte."""
        requests = b""
        for stream, (path, extra, _, _) in wanted.items():
            block = hpack([(b":method", b"GET"), (b":scheme", scheme), (b":path", path),
                           (b":authority", b"localhost")] + list(extra))
            requests += frame(HEADERS, END_HEADERS | END_STREAM, stream, block)
        sock.sendall((PREFACE if scheme == b"https" else b"") + WIDE_OPEN + requests)
        got = read_streams(sock, list(wanted))
        for stream, (path, _, status, body) in wanted.items():
            head, data = got[stream]
            # nghttp2 sends :status first, from HPACK's static table: 0x88 is
            # ":status: 200", 0x8a ":status: 206" (RFC 7541 Appendix A).
            self.assertEqual(head[0], status, (stream, path))
            self.assertEqual(len(data), len(body), (stream, path))
            self.assertTrue(data == body, (stream, path))

    def test_large_files_on_concurrent_streams(self):
        """Files sent from their fd (1 MiB, 200 KiB, 700 KiB, a range of 1 MiB)
        and one from memory (100 KiB) on six streams at once: every byte where
        it belongs, on h2c (pread, and sendfile with --h2c-sendfile on) and h2 (TLS)."""
        mib, k100, k200 = self.files["mib.bin"], self.files["k100.bin"], self.files["k200.bin"]
        wanted = {1: (b"/mib.bin", (), 0x88, mib),
                  3: (b"/k100.bin", (), 0x88, k100),
                  5: (b"/mib.bin", [(b"range", b"bytes=1000-600999")], 0x8a, mib[1000:601000]),
                  7: (b"/k200.bin", (), 0x88, k200),
                  9: (b"/big.bin", (), 0x88, self.big),
                  11: (b"/mib.bin", [(b"range", b"bytes=1048000-")], 0x8a, mib[1048000:])}
        for connect, scheme in ((self.raw_h2c, b"http"), (self.raw_h2c_sendfile, b"http"),
                                (self.tls_h2, b"https")):
            with self.subTest(scheme=scheme, connect=connect.__name__), connect() as sock:
                self.check_concurrent_streams(sock, scheme, wanted)

    def test_bodies_from_memory_on_concurrent_streams(self):
        """A file the cache holds whole (100 KiB, under the 128 KiB limit), its
        frames left in the cache's memory until written, on five streams at once,
        with a range of it, a small file and a generated page (a 404, copied into
        the output): every byte where it belongs, on h2c and h2 (TLS)."""
        k100 = self.files["k100.bin"]
        page = curl("--http1.1", self.plain("/no-such-file")).stdout
        self.assertIn(b"404", page)
        wanted = {1: (b"/k100.bin", (), 0x88, k100),
                  3: (b"/k100.bin", [(b"range", b"bytes=1000-60999")], 0x8a, k100[1000:61000]),
                  5: (b"/k100.bin", (), 0x88, k100),
                  7: (b"/no-such-file", (), 0x8d, page),  # 0x8d: ":status: 404"
                  9: (b"/k100.bin", (), 0x88, k100),
                  11: (b"/index.html", (), 0x88, b"<p>hello over h2</p>\n"),
                  13: (b"/k100.bin", [(b"range", b"bytes=102000-")], 0x8a, k100[102000:]),
                  15: (b"/k100.bin", (), 0x88, k100),
                  17: (b"/k100.bin", (), 0x88, k100)}
        for connect, scheme in ((self.raw_h2c, b"http"), (self.tls_h2, b"https")):
            with self.subTest(scheme=scheme), connect() as sock:
                self.check_concurrent_streams(sock, scheme, wanted)
        # The same through curl, one stream a connection.
        for get, url in ((self.h2c, self.plain), (self.h2, self.secure)):
            with self.subTest(url=url("/k100.bin")):
                done = get(url("/k100.bin"))
                self.assertTrue(done.stdout == k100, done.stderr)
                done = get("-w", "%{http_code}", url("/no-such-file"))
                self.assertEqual(done.stdout, page + b"404")

    def test_a_stream_reset_while_its_file_is_queued(self):
        """The client reads little, so frames of an 8 MiB file wait in lepus's
        output when it resets the stream, and the file has been replaced on disk:
        the next request for it drops the old cache entry, so only the frames
        already begun keep the old file open. They are finished from it, and the
        new file's bytes come exactly."""

        def replace(path, content):  # a new inode, as a deploy does
            with open(path + ".new", "wb") as f:
                f.write(content)
            os.replace(path + ".new", path)

        # h2c and h2 read the file into the output; with --h2c-sendfile on the
        # queued frames are segments that must hold the old file themselves.
        for server, port, tls in ((self.server, self.server.port, False),
                                  (self.sendfile_server, self.sendfile_server.port, False),
                                  (self.server, self.tls_port, True)):
            path = os.path.join(server.root, "reset.bin")
            replace(path, os.urandom(8 << 20))
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
            raw.settimeout(10)
            raw.connect(("127.0.0.1", port))
            if tls:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                context.set_alpn_protocols(["h2"])
                raw = context.wrap_socket(raw)
            with self.subTest(port=port, tls=tls), raw as sock:
                sock.sendall(PREFACE + WIDE_OPEN + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                         request_block(b"/reset.bin")))
                time.sleep(0.3)  # lepus fills the socket and blocks mid-file
                # Shorter than what went out already: frames sent from a closed
                # (or reused) fd would end early and close the connection.
                new = os.urandom(10 * 1024)
                replace(path, new)
                time.sleep(1.2)  # past the file cache's revalidation interval (1 s)
                sock.sendall(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)) +  # CANCEL
                             frame(HEADERS, END_HEADERS | END_STREAM, 3,
                                   request_block(b"/reset.bin")))
                got = read_streams(sock, [3])
                self.assertTrue(got[3][1] == new)
                # The connection is still sound: one more request on it.
                sock.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 5, request_block(b"/")))
                self.assertEqual(read_streams(sock, [5])[5][1], b"<p>hello over h2</p>\n")

    def test_a_file_that_shrinks_mid_response_ends_the_connection(self):
        """Frames of a file already announced cannot be taken back: when the file
        shrinks under a queued sendfile (--h2c-sendfile on), the connection closes,
        with one line in the error log, and lepus goes on serving."""
        server = harness.Lepus(["--h2c-sendfile", "on"])
        self.addCleanup(server.stop, self)
        path = server.write("shrink.bin", os.urandom(16 << 20))
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # it barely reads
        sock.settimeout(10)
        with sock:
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(PREFACE + WIDE_OPEN + frame(HEADERS, END_HEADERS | END_STREAM, 1,
                                                     request_block(b"/shrink.bin")))
            time.sleep(0.5)  # lepus has sent what the sockets hold and waits
            os.truncate(path, 1 << 20)
            result = {}
            frames = read_frames(sock, seconds=10, result=result)
        self.assertTrue(result.get("closed"))
        self.assertLess(sum(len(f[3]) for f in frames if f[0] == DATA), 16 << 20)
        deadline = time.monotonic() + 5
        while "sendfile for an HTTP/2 response" not in server.error_log_text() and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(server.error_log_text().count("sendfile for an HTTP/2 response"), 1,
                         server.error_log_text())
        server.write("after.txt", "still here\n")
        done = curl("--http2-prior-knowledge", "http://127.0.0.1:%d/after.txt" % server.port)
        self.assertEqual(done.stdout, b"still here\n")

    def test_urgent_streams_go_first(self):
        """RFC 9218: of two large responses asked for at once, the one with
        priority u=0 is sent whole before the u=7 one gets past its first frames."""
        self.server.write("urgent.css", os.urandom(256 * 1024))
        self.server.write("later.bin", os.urandom(256 * 1024))
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as sock:
            # Windows of 16 MiB, so that flow control does not do the ordering.
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 1 << 24)) +
                         frame(8, 0, 0, struct.pack(">I", (1 << 24) - 65535)) +  # WINDOW_UPDATE
                         frame(HEADERS, END_HEADERS | END_STREAM, 1,
                               request_block(b"/later.bin", [(b"priority", b"u=7")])) +
                         frame(HEADERS, END_HEADERS | END_STREAM, 3,
                               request_block(b"/urgent.css", [(b"priority", b"u=0")])))
            frames, data = [], 0
            sock.settimeout(10)
            buffer = b""
            while data < 2 * 256 * 1024:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                    length = int.from_bytes(buffer[:3], "big")
                    kind, stream = buffer[3], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                    if kind == DATA:
                        frames.append(stream)
                        data += length
                    buffer = buffer[9 + length:]
        last_urgent = max(i for i, stream in enumerate(frames) if stream == 3)
        later_before = sum(1 for stream in frames[:last_urgent] if stream == 1)
        # At most what was already on its way when the urgent request arrived.
        self.assertLessEqual(later_before, 4, frames[:40])

    def test_a_stream_its_reader_does_not_drain_stalls_only_itself(self):
        if not self.fpm:
            self.skipTest("php-fpm not installed")
        self.server.write("flood.php", "<?php $line = str_repeat('x', 1023) . \"\\n\";"
                                       " for ($i = 0; $i < 4096; $i++) echo $line;\n")
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as sock:
            # The connection's window is opened wide; stream 1's stays at 64 KiB.
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                         frame(8, 0, 0, struct.pack(">I", (1 << 30))) +
                         frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block(b"/flood.php")))
            time.sleep(0.5)  # php-fpm is producing 4 MiB nobody reads
            sock.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block(b"/index.html")))
            frames = read_frames(sock, seconds=3)
        flood = sum(len(f[3]) for f in frames if f[0] == DATA and f[2] == 1)
        page = b"".join(f[3] for f in frames if f[0] == DATA and f[2] == 3)
        self.assertEqual(page, b"<p>hello over h2</p>\n")
        self.assertLessEqual(flood, 65535)  # no more than its window

    def test_rapid_reset_is_answered_with_goaway(self):
        # A few cancelled streams are normal (a browser leaving a page)...
        with self.raw_h2c() as sock:
            burst = b""
            for i in range(50):
                burst += frame(HEADERS, END_HEADERS | END_STREAM, 1 + 2 * i, request_block())
                burst += frame(RST_STREAM, 0, 1 + 2 * i, struct.pack(">I", 8))
            sock.sendall(burst + frame(HEADERS, END_HEADERS | END_STREAM, 101, request_block()))
            frames = read_frames(sock, seconds=2)
        self.assertIsNone(goaway_code(frames))
        self.assertTrue(any(f[0] == HEADERS and f[2] == 101 for f in frames))
        # ... thousands of them are the attack: GOAWAY with an error (nghttp2's
        # rate limit sends INTERNAL_ERROR), and the connection closes.
        with self.raw_h2c() as sock:
            burst = b""
            for i in range(1500):
                stream = 1 + 2 * i
                burst += frame(HEADERS, END_HEADERS | END_STREAM, stream, request_block())
                burst += frame(RST_STREAM, 0, stream, struct.pack(">I", 8))  # CANCEL
            try:
                sock.sendall(burst)
            except (BrokenPipeError, ConnectionResetError):
                pass
            result = {}
            frames = read_frames(sock, seconds=10, result=result)
            if not result:
                read_frames(sock, seconds=5, result=result)
        self.assertIn(goaway_code(frames), (0x2, 0xB))  # INTERNAL_ERROR or ENHANCE_YOUR_CALM
        self.assertTrue(result.get("closed"))

    def test_data_after_the_clients_own_reset_in_the_same_write_is_stream_closed(self):
        # RFC 9113 §5.1: DATA on a stream the client reset is a STREAM_CLOSED
        # connection error. lepus checks DATA headers before nghttp2 sees them,
        # handing nghttp2 the bytes in runs: the check must come after the
        # frames before it in the same read (the HEADERS that opened the
        # stream, the RST_STREAM that closed it) were handed over.
        with self.raw_h2c() as sock:
            sock.sendall(frame(HEADERS, END_HEADERS, 1, request_block()) +
                         frame(RST_STREAM, 0, 1, struct.pack(">I", 8)) +
                         frame(DATA, END_STREAM, 1, b"x"))
            frames = read_frames(sock, seconds=5)
        self.assertEqual(goaway_code(frames), 0x5, frames)  # STREAM_CLOSED
        # The same frames on streams of their own, all in one write, are fine.
        with self.raw_h2c() as sock:
            sock.sendall(frame(HEADERS, END_HEADERS, 1, request_block()) +
                         frame(DATA, END_STREAM, 1, b"x") +
                         frame(HEADERS, END_HEADERS, 3, request_block()) +
                         frame(RST_STREAM, 0, 3, struct.pack(">I", 8)) +
                         frame(HEADERS, END_HEADERS | END_STREAM, 5, request_block()))
            frames = read_frames(sock, seconds=3, done=lambda got: sum(
                f[0] == HEADERS and f[2] in (1, 5) for f in got) == 2)
        self.assertIsNone(goaway_code(frames), frames)
        self.assertEqual({f[2] for f in frames if f[0] == HEADERS} & {1, 5}, {1, 5})

    def test_a_connection_idle_past_its_frame_buffer_trim_answers_again(self):
        # After a second without activity the connection gives its nghttp2
        # frame buffer's pages back (Http2Engine::on_deadline); the next
        # frames are packed into fresh pages, the HPACK state is untouched.
        with self.raw_h2c() as sock:
            sock.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block()))
            first = read_streams(sock, [1])[1]
            time.sleep(2.5)  # the trim is due 1 s after the last activity
            sock.sendall(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block()) +
                         frame(HEADERS, END_HEADERS | END_STREAM, 5, request_block()))
            again = read_streams(sock, [3, 5])
        self.assertEqual(first[1], b"<p>hello over h2</p>\n")
        for head, body in again.values():
            self.assertTrue(head)
            self.assertEqual(body, first[1])

    def test_continuation_flood_is_cut_off(self):
        with self.raw_h2c() as sock:
            block = request_block()
            flood = frame(HEADERS, 0, 1, block)
            filler = hpack([(b"x-filler", b"y" * 100)])
            for _ in range(200):
                flood += frame(CONTINUATION, 0, 1, filler)
            try:
                sock.sendall(flood)
            except (BrokenPipeError, ConnectionResetError):
                pass
            result = {}
            frames = read_frames(sock, seconds=10, result=result)
            if not result:  # a GOAWAY came first: the close follows
                read_frames(sock, seconds=10, result=result, done=lambda _: False)
        # Closed after a few CONTINUATION frames (GOAWAY ENHANCE_YOUR_CALM
        # first, if any), the request never answered.
        self.assertIn(goaway_code(frames), (None, 0xB))
        self.assertTrue(result.get("closed"), frames)
        self.assertFalse(any(f[0] == HEADERS for f in frames))

    def test_oversized_header_list_gets_431(self):
        with self.raw_h2c() as sock:
            big = [(b"x-big-%d" % i, b"v" * 4000) for i in range(20)]  # 80 KB > 64 KiB
            block = request_block(extra=big)
            first, rest = block[:16000], block[16000:]
            data = frame(HEADERS, END_STREAM, 1, first)
            while rest:
                piece, rest = rest[:16000], rest[16000:]
                data += frame(CONTINUATION, 0 if rest else END_HEADERS, 1, piece)
            sock.sendall(data)
            frames = read_frames(sock, seconds=3)
        headers = [f for f in frames if f[0] == HEADERS and f[2] == 1]
        self.assertTrue(headers, frames)
        # ":status: 431" is not in the static table: a literal with the name ":status" (index 8).
        self.assertIn(b"431", headers[0][3])

    def test_ping_flood_from_a_client_that_does_not_read_is_cut_off(self):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # it barely reads
        with sock:
            sock.connect(("127.0.0.1", self.server.port))
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
            sock.settimeout(10)
            try:
                sock.sendall(frame(PING, 0, 0, b"12345678") * 20000)
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass
            result = {}
            frames = read_frames(sock, seconds=10, result=result)
            if not result:  # a GOAWAY came first: the close follows
                read_frames(sock, seconds=10, result=result, done=lambda _: False)
        self.assertIn(goaway_code(frames), (None, 0xB))
        # The queue of PING ACKs is bounded: the connection is closed long
        # before 20000 of them are owed.
        self.assertTrue(result.get("closed"))
        self.assertLess(sum(1 for f in frames if f[0] == PING), 20000)

    def test_silent_client_after_the_preface_is_closed_at_the_header_deadline(self):
        with self.raw_h2c() as sock:
            frames = read_frames(sock, seconds=15)
        self.assertEqual(frames[0][0], SETTINGS)
        self.assertIsNotNone(goaway_code(frames))  # then closed (the loop ended before 15 s)

    def test_a_peer_that_never_opens_its_window_is_closed_at_the_send_timeout(self):
        server = harness.Lepus(["--send-timeout", "1s"])
        self.addCleanup(server.stop, self)
        server.write("big.bin", os.urandom(200 * 1024))
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            # SETTINGS_INITIAL_WINDOW_SIZE 0: no DATA may come until WINDOW_UPDATE.
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)) +
                         frame(HEADERS, END_HEADERS | END_STREAM, 1, request_block(b"/big.bin")))
            result = {}
            frames = read_frames(sock, seconds=15, result=result)
        self.assertTrue(any(f[0] == HEADERS and f[2] == 1 for f in frames))  # the head went out
        self.assertFalse(any(f[0] == DATA for f in frames))
        self.assertTrue(result.get("closed") or goaway_code(frames) is not None)

    def test_sigterm_lets_a_stream_in_flight_finish(self):
        if not self.fpm:
            self.skipTest("php-fpm not installed")
        server = harness.Lepus(["--fastcgi", self.fpm.address, "--status-path", "/_s"])
        server.write("slow.php", "<?php usleep(1500000); echo 'finished';\n")
        process = subprocess.Popen([CURL, "-s", "--http2-prior-knowledge", "--max-time", "20",
                                    "http://127.0.0.1:%d/slow.php" % server.port],
                                   stdout=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the stream is open
            status = json.loads(curl("http://127.0.0.1:%d/_s" % server.port).stdout)
            if sum(r["http2"]["streams"] for r in status["reactors"]) == 1:
                break
            time.sleep(0.02)
        server.proc.send_signal(15)
        out, _ = process.communicate(timeout=30)
        self.assertEqual(out, b"finished")
        self.assertEqual(server.proc.wait(timeout=30), 0)
        server.stop(self)

    def test_turned_off(self):
        tls_port = phpfpm.free_port()
        server = harness.Lepus(["--h2c", "off", "--http2", "off",
                                "--listen", "https://127.0.0.1:%d" % tls_port,
                                "--tls-cert", self.cert, "--tls-key", self.key])
        self.addCleanup(server.stop, self)
        server.write("index.html", "x\n")
        # The preface is then an HTTP/1.1 request with an unknown version.
        response = server.request(PREFACE)
        self.assertEqual(response.status, 505)
        # ALPN offers only http/1.1.
        done = curl("--http2", "-k", "-w", "%{http_version}",
                    "https://127.0.0.1:%d/" % tls_port)
        self.assertEqual(done.stdout, b"x\n1.1")
        done = curl("--http2-prior-knowledge", "http://127.0.0.1:%d/" % server.port)
        self.assertNotEqual(done.returncode, 0)

    @unittest.skipUnless(H2SPEC, "h2spec not installed (scripts/install-h2spec)")
    def test_h2spec_conformance(self):
        for args, allowed in ((["-t", "-k", "-p", str(self.tls_port)], set()),
                              # On a port shared with HTTP/1.1, bytes that are not the
                              # preface are an HTTP/1.1 request: 400 (docs/RELIABILITY.md);
                              # an h2c:// listener has no such exception (H2cOnlyListener).
                              (["-p", str(self.server.port)], {"http2/3.5/2"})):
            with self.subTest(args=args):
                report = os.path.join(self.tmp, "h2spec.xml")
                done = subprocess.run([H2SPEC, "-h", "127.0.0.1", "-o", "3", "-j", report] + args,
                                      capture_output=True, text=True, timeout=600)
                summary = done.stdout.strip().splitlines()[-1]
                failed = {l.strip() for l in done.stdout.splitlines() if l.strip().startswith("×")}
                self.assertIn("passed", summary)
                if not allowed:
                    self.assertEqual(done.returncode, 0, done.stdout[-3000:])
                else:
                    self.assertLessEqual(len(failed), len(allowed), done.stdout[-3000:])
                    self.assertIn("Sends invalid connection preface", "\n".join(failed) or
                                  "Sends invalid connection preface")


def read_until_close(sock, limit=1 << 16):
    """What the server writes before it closes the connection (bounded)."""
    data = b""
    while len(data) < limit:
        try:
            chunk = sock.recv(limit)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def frames_of(data):
    """The (type, flags, stream, payload) frames in `data`, whole ones only."""
    out = []
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        if len(data) < 9 + length:
            break
        out.append((data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF,
                    data[9:9 + length]))
        data = data[9 + length:]
    return out


@unittest.skipUnless(CURL, "needs curl")
class H2cOnlyListener(unittest.TestCase):
    """--listen h2c://ADDR:PORT (nginx's `listen 80 http2;`): a plain port that
    speaks HTTP/2 with prior knowledge only (RFC 9113 §3.3). Whatever does not
    start with the client preface, an HTTP/1.1 request too, is a connection
    error (GOAWAY PROTOCOL_ERROR, §3.4), never an HTTP/1.1 answer."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.server = harness.Lepus(["--status-path", "/_lepus/status"],
                                   listen="h2c://127.0.0.1:0", protocol="h1")
        cls.server.write("index.html", "<p>h2c only</p>\n")
        # h2spec's §6.9.2 case 3 needs a body past its window, else it skips the case.
        cls.server.write("large.html", "x" * 100000)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(harness.LepusTestCase._Checker())

    def url(self, path="/"):
        return "http://127.0.0.1:%d%s" % (self.server.port, path)

    def test_the_start_line_names_the_listener_h2c(self):
        self.assertIn("(h2c: HTTP/2 with prior knowledge only)", self.server.first_line)

    def test_prior_knowledge_clients_are_served(self):
        done = curl("--http2-prior-knowledge", "-w", "\n%{http_version} %{http_code}", self.url())
        self.assertEqual(done.stdout, b"<p>h2c only</p>\n\n2 200", done.stderr)
        status = curl("--http2-prior-knowledge", self.url("/_lepus/status"))
        self.assertIn(b"requests", status.stdout, status.stderr)
        if NGHTTP:
            done = subprocess.run([NGHTTP, "-n", "-s", self.url()], capture_output=True,
                                  text=True, timeout=30)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertRegex(done.stdout, r"\s200\s+16\s+/\n")
        if shutil.which("h2load"):
            done = subprocess.run([shutil.which("h2load"), "-n", "40", "-c", "2", "-m", "4",
                                   self.url()], capture_output=True, text=True, timeout=60)
            self.assertIn("40 succeeded, 0 failed", done.stdout, done.stdout + done.stderr)
            self.assertIn("status codes: 40 2xx", done.stdout)
        self.assertTrue(any('"GET / HTTP/2.0" 200' in line for line in wait_lines(
            self.server.access_lines, lambda lines: any("HTTP/2.0" in l for l in lines))))

    def test_an_http1_request_gets_goaway_not_an_http1_answer(self):
        for raw in (b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                    b"INVALID CONNECTION PREFACE\r\n\r\n",
                    PREFACE[:10] + b"X" * 14):
            with self.subTest(raw=raw), self.server.connect() as s:
                s.sendall(raw)
                data = read_until_close(s)
                self.assertFalse(data.startswith(b"HTTP/"), data)
                # RFC 9113 §3.4: a connection error, PROTOCOL_ERROR (§7, code 1).
                goaways = [payload for kind, _, _, payload in frames_of(data) if kind == GOAWAY]
                self.assertEqual([g[4:8] for g in goaways], [b"\x00\x00\x00\x01"], data)

    @unittest.skipUnless(H2SPEC, "h2spec not installed (scripts/install-h2spec)")
    def test_h2spec_passes_without_exception(self):
        done = subprocess.run([H2SPEC, "-h", "127.0.0.1", "-p", str(self.server.port), "-o", "3",
                               "-P", "/large.html"], capture_output=True, text=True, timeout=600)
        self.assertEqual(done.returncode, 0, done.stdout[-3000:])
        # Every case passed: none failed, none skipped (http2/3.5/2 included).
        self.assertRegex(done.stdout.strip().splitlines()[-1],
                         r"^(\d+) tests, \1 passed, 0 skipped, 0 failed$")

    def test_proxy_protocol_header_before_the_preface(self):
        server = harness.Lepus(["--proxy-protocol"], listen="h2c://127.0.0.1:0", protocol="h1")
        self.addCleanup(server.stop, self)
        server.write("index.html", "behind a proxy\n")
        done = curl("--haproxy-protocol", "--http2-prior-knowledge", "-w", "%{http_version}",
                    "http://127.0.0.1:%d/" % server.port)
        self.assertEqual(done.stdout, b"behind a proxy\n2", done.stderr)

    def test_h2c_off_with_an_h2c_listener_is_refused(self):
        tmp = harness.temp_dir(name="h2c-off")
        self.addCleanup(harness.remove_temp_dir, tmp)
        config = os.path.join(tmp, "lepus.toml")
        with open(config, "w") as f:
            f.write('listen = ["h2c://127.0.0.1:%d"]\nh2c = false\n' % phpfpm.free_port())
        for args in (["--listen", "h2c://127.0.0.1:%d" % phpfpm.free_port(), "--h2c", "off"],
                     ["--config", config]):
            with self.subTest(args=args):
                done = subprocess.run([harness.BINARY, self.server.root] + args,
                                      capture_output=True, text=True, timeout=30)
                self.assertEqual(done.returncode, 2, done.stderr)
                lines = done.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, done.stderr)
                self.assertIn("h2c://", lines[0])
                self.assertRegex(lines[0], r"HTTP/2 only, and (--h2c|'h2c') off")


def wait_lines(read, ready, seconds=10):
    """read() once ready(lines) holds (the access log has a writer thread), or at the end."""
    deadline = time.monotonic() + seconds
    while True:
        lines = read()
        if ready(lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


if __name__ == "__main__":
    harness.main()
