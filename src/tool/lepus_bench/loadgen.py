"""Load generators: runs ab, wrk and slowhttptest as child processes (their
own CPU comes from wait4's rusage), parses what they print, and holds idle
keepalive connections or probes a server from inside this process.
"""
import http.client
import json
import os
import re
import selectors
import socket
import ssl
import subprocess
import tempfile
import threading
import time

from .servers import find_program

WRK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates",
                          "wrk_report.lua")


class Generated:
    """What one generator run printed, plus its wall and CPU time."""

    def __init__(self, returncode, output, wall, cpu):
        self.returncode = returncode
        self.output = output
        self.wall = wall
        self.cpu = cpu  # user+system seconds of the generator (and its threads)


def run_generator(cmd, cpus=None, timeout=None):
    """Runs a generator to completion; stdout+stderr captured via a file so
    that wait4() (not Popen.wait) reaps it and returns its rusage."""
    if cpus:
        cmd = [find_program("taskset") or "taskset", "-c", cpus] + cmd
    with tempfile.TemporaryFile() as output:
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        timer = None
        if timeout:
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise
        finally:
            if timer:
                timer.cancel()
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read().decode(errors="replace")
    return Generated(proc.returncode, text, wall, usage.ru_utime + usage.ru_stime)


def wrk_command(url, connections, seconds, threads=1, headers=()):
    """wrk with our Lua done() hook that prints one parseable JSON line; each
    header ("Name: value") goes on every request."""
    cmd = [find_program("wrk"), "-t%d" % threads, "-c%d" % connections, "-d%ds" % seconds,
           "--latency", "--timeout", "10s", "-s", WRK_SCRIPT]
    for header in headers:
        cmd += ["-H", header]
    return cmd + [url]


def h2load_command(url, connections, streams, seconds, headers=()):
    """h2load (nghttp2-client): HTTP/2, `streams` concurrent streams per
    connection, for `seconds` (-D), one thread."""
    cmd = [find_program("h2load"), "-t1", "-c%d" % connections, "-m%d" % streams,
           "-D%d" % seconds]
    for header in headers:
        cmd += ["-H", header]
    return cmd + [url]


def h3load_command(url, connections, streams, seconds, headers=(), requests=None):
    """bench/h3load (scripts/install-h3load): HTTP/3 with h2load's flags,
    `streams` requests in flight per QUIC connection, for `seconds` (-D) or
    `requests` (-n). It prints wrk's LEPUS_BENCH report (parse_wrk)."""
    # Go's flag package takes "-c 100", not h2load's "-c100".
    cmd = [find_program("h3load"), "-c", str(connections), "-m", str(streams)]
    cmd += ["-n", str(requests)] if requests else ["-D", str(seconds)]
    for header in headers:
        cmd += ["-H", header]
    return cmd + [url]


def parse_h2load(generated):
    """Metrics from h2load's summary."""
    text = generated.output
    finished = re.search(r"^finished in ([\d.]+)(m?s), ([\d.]+) req/s, ([\d.]+)([KMG]?B)/s", text,
                         re.M)
    counts = re.search(r"^requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, "
                       r"(\d+) failed, (\d+) errored", text, re.M)
    if not finished or not counts:
        raise RuntimeError("h2load printed no summary: " + _tail(text))
    seconds = float(finished.group(1)) / (1000 if finished.group(2) == "ms" else 1)
    scale = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}[finished.group(5)]
    statuses = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    non2xx = sum(int(statuses.group(i)) for i in (2, 3, 4)) if statuses else 0
    return {"requests": int(counts.group(2)), "rps": float(finished.group(3)),
            "mbps": float(finished.group(4)) * scale / 1e6, "p50_ms": 0.0, "p90_ms": 0.0,
            "p99_ms": 0.0, "max_ms": 0.0,
            "failed": int(counts.group(4)) + int(counts.group(5)), "non2xx": non2xx,
            "seconds": seconds}


def parse_wrk(generated):
    """Metrics from a wrk run: rps, mbps, latency in ms, errors."""
    match = re.search(r"^LEPUS_BENCH (\{.*\})$", generated.output, re.M)
    if not match:
        raise RuntimeError("wrk printed no report: " + _tail(generated.output))
    data = json.loads(match.group(1))
    seconds = data["duration_us"] / 1e6
    errors = data["connect_errors"] + data["read_errors"] + data["write_errors"] + \
        data["timeouts"]
    return {"requests": data["requests"], "rps": data["requests"] / seconds,
            "mbps": data["bytes"] / seconds / 1e6, "p50_ms": data["p50_us"] / 1000,
            "p90_ms": data["p90_us"] / 1000, "p99_ms": data["p99_us"] / 1000,
            "max_ms": data["max_us"] / 1000, "failed": errors,
            "non2xx": data["status_errors"], "seconds": seconds}


# ab -t alone stops at 50,000 requests (its stats array is sized by -n), which a
# keepalive run passes in a fraction of a second: -n is raised to this many per
# second of -t so that the time limit is what ends the run. ab touches only the
# entries it fills (32 bytes each), so the large calloc costs no real memory.
AB_REQUESTS_PER_SECOND_BOUND = 500000


def ab_command(url, concurrency, seconds=None, requests=None, keepalive=False,
               tolerate_errors=False):
    """ab (HTTP/1.0) for `seconds` (-t) or for a number of requests (-n), with
    -k for keepalive and -r to go on after socket errors."""
    cmd = [find_program("ab"), "-q"]
    if seconds is not None:
        # -t before -n: ab's -t resets the request count, a later -n sets it again.
        cmd += ["-t", str(seconds), "-n", str(seconds * AB_REQUESTS_PER_SECOND_BOUND)]
    else:
        cmd += ["-n", str(requests)]
    cmd += ["-c", str(concurrency), "-s", "30"]
    if keepalive:
        cmd.append("-k")
    if tolerate_errors:
        cmd.append("-r")
    return cmd + [url]


def parse_ab(generated):
    """Metrics from ab's report (its percentiles are whole milliseconds)."""
    text = generated.output

    def number(pattern, default=None):
        match = re.search(pattern, text, re.M)
        if match:
            return float(match.group(1))
        if default is None:
            raise RuntimeError("ab printed no %r: %s" % (pattern, _tail(text)))
        return default
    seconds = number(r"^Time taken for tests:\s+([\d.]+)")
    complete = number(r"^Complete requests:\s+(\d+)")
    total_bytes = number(r"^Total transferred:\s+(\d+)", 0.0)
    return {"requests": int(complete), "rps": number(r"^Requests per second:\s+([\d.]+)"),
            "mbps": total_bytes / seconds / 1e6 if seconds else 0.0,
            "p50_ms": number(r"^\s+50%\s+(\d+)", 0.0), "p90_ms": number(r"^\s+90%\s+(\d+)", 0.0),
            "p99_ms": number(r"^\s+99%\s+(\d+)", 0.0),
            "max_ms": number(r"^\s+100%\s+(\d+)", 0.0),
            "failed": int(number(r"^Failed requests:\s+(\d+)", 0.0)),
            "non2xx": int(number(r"^Non-2xx responses:\s+(\d+)", 0.0)), "seconds": seconds}


def _tail(text, lines=3):
    return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"


class IdleConnections:
    """Holds N keepalive connections open, each after one answered request,
    so they are idle keepalive connections in the server (not half-open).
    With tls=True each is a TLS connection, handshaken one after another."""

    def __init__(self, port, count, batch=250, timeout=10, tls=False, h2=False):
        self.sockets = []
        request = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
        if tls or h2:
            self._open_tls(port, count, _H2_REQUEST if h2 else request, timeout, h2)
            return
        for first in range(0, count, batch):
            opened = []
            for _ in range(min(batch, count - first)):
                try:
                    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                    s.sendall(request)
                    opened.append(s)
                except OSError:
                    break
            answered = self._read_responses(opened, timeout)
            self.sockets.extend(answered)
            if len(answered) < len(opened) or len(opened) < min(batch, count - first):
                break  # the server refused or dropped some: it holds no more

    def _open_tls(self, port, count, request, timeout, h2=False):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # lepus-bench's own self-signed certificate
        if h2:
            context.set_alpn_protocols(["h2"])
        complete = _h2_response_complete if h2 else _response_complete
        for _ in range(count):
            try:
                raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                s = context.wrap_socket(raw, server_hostname="localhost")
                if h2 and s.selected_alpn_protocol() != "h2":
                    raise OSError("no h2")
                s.sendall(request)
                data = b""
                while not complete(data):
                    chunk = s.recv(65536)
                    if not chunk:
                        raise OSError("closed")
                    data += chunk
            except OSError:
                break  # the server holds no more
            self.sockets.append(s)

    def still_open(self):
        """How many of the held connections the server has not closed."""
        selector = selectors.DefaultSelector()
        for s in self.sockets:
            selector.register(s, selectors.EVENT_READ)
        closed = len(selector.select(timeout=0))  # readable = EOF or reset here
        selector.close()
        return len(self.sockets) - closed

    @staticmethod
    def _read_responses(sockets, timeout):
        """Reads one response head+body per socket; keeps those that answered."""
        selector = selectors.DefaultSelector()
        pending = {}
        for s in sockets:
            s.setblocking(False)
            selector.register(s, selectors.EVENT_READ)
            pending[s] = b""
        answered = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.5):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(s)
                    del pending[s]
                    s.close()
                    continue
                pending[s] += data
                if _response_complete(pending[s]):
                    selector.unregister(s)
                    del pending[s]
                    answered.append(s)
        for s in pending:
            selector.unregister(s)
            s.close()
        selector.close()
        return answered

    def close(self):
        for s in self.sockets:
            s.close()
        self.sockets = []


def _h2_frame(kind, flags, stream, payload=b""):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + \
        payload


def _hpack_literal(name, value):
    # Literal field without indexing, new name; short strings only (RFC 7541 §6.2.2).
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


# An HTTP/2 client's first flight for GET / over TLS: the preface, empty
# SETTINGS, the SETTINGS ACK a server's own SETTINGS will want, and the request.
_H2_REQUEST = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _h2_frame(4, 0, 0) + _h2_frame(4, 1, 0) +
               _h2_frame(1, 0x5, 1, b"".join(_hpack_literal(n, v) for n, v in (
                   (b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/"),
                   (b":authority", b"localhost")))))


def _h2_response_complete(data):
    """True once a frame of stream 1 carries END_STREAM (the whole answer)."""
    data = data[24:] if data.startswith(b"PRI") else data
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        if len(data) < 9 + length:
            return False
        kind, flags, stream = data[3], data[4], int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
        if stream == 1 and kind in (0, 1) and flags & 0x1:
            return True
        data = data[9 + length:]
    return False


def _response_complete(data):
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0:
        return False
    match = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", data[:head_end])
    length = int(match.group(1)) if match else 0
    return len(data) >= head_end + 4 + length


class Probe(threading.Thread):
    """A new-connection GET / every interval; counts the probes that failed,
    so a slowloris run reports how many seconds the server stopped serving."""

    def __init__(self, port, interval=0.5, timeout=2.0):
        super().__init__(daemon=True)
        self.port = port
        self.interval = interval
        self.timeout = timeout
        self.sent = 0
        self.failed = 0
        self.results = []  # (monotonic start, answered 200)
        self.finished = None
        self._stop_event = threading.Event()

    def run(self):
        while not self._stop_event.is_set():
            started = time.monotonic()
            ok = self._probe_once()
            self.results.append((started, ok))
            self.sent += 1
            self.failed += 0 if ok else 1
            self._stop_event.wait(max(0.0, self.interval - (time.monotonic() - started)))
        self.finished = time.monotonic()

    def _probe_once(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout) as s:
                s.settimeout(self.timeout)
                s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            return data.startswith(b"HTTP/1.1 200") or data.startswith(b"HTTP/1.0 200")
        except OSError:
            return False

    def outage_seconds(self):
        """Time from each failed probe to the next probe (a failed probe may
        itself take the whole timeout), summed."""
        total = 0.0
        ends = [start for start, _ in self.results[1:]] + [self.finished or time.monotonic()]
        for (start, ok), end in zip(self.results, ends):
            if not ok:
                total += end - start
        return total

    def stop(self):
        self._stop_event.set()
        self.join(timeout=self.timeout + 1)


def http_get(port, path, timeout=10):
    """One request on a new connection: (status, body) using the stdlib client;
    (None, error text) when the server did not answer HTTP."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Host": "localhost"})
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as error:
        return None, str(error).encode()
    finally:
        connection.close()


def https_get(port, path, timeout=10):
    """http_get over TLS, without checking lepus-bench's self-signed certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context)
    try:
        connection.request("GET", path, headers={"Host": "localhost"})
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as error:
        return None, str(error).encode()
    finally:
        connection.close()
