#!/usr/bin/env python3
"""An HTTP/3 test client (issue 39) for the e2e tests: one request on a new
QUIC connection, through Python's aioquic (scripts/install-h3-clients installs
the pinned version), returning the status, the headers and the body;
ngtcp2_fetch() does the same through Debian's ngtcp2 client (gtlsclient).

    h3_fetch("https://127.0.0.1:8443/x", "GET", ["Accept-Encoding: gzip"], None)

Certificates are not verified (the tests' certificates are self-signed). A
"Host: x" header becomes the :authority pseudo-header (RFC 9114 §4.3.1), as
curl does over HTTP/2; the TLS server name stays the URL's host, as curl's.
Also a command line, for a client that must run in another network namespace
(test/e2e/lossy_net.py):

    python3 h3client.py [-X METHOD] [-H 'Name: value']... [-o FILE] URL

prints the status line, the headers, and the body's length and SHA-256.
"""
import argparse
import asyncio
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

try:
    from aioquic.asyncio.client import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import ConnectionTerminated, StreamReset
    import ssl
    AIOQUIC = True
except ImportError:  # the callers skip with MISSING_REASON
    AIOQUIC = False

MISSING_REASON = ("Python aioquic is not installed (scripts/install-h3-clients installs the "
                  "pinned version): the HTTP/3 tests are skipped")


class H3Response:
    """What came back: .status (int), .headers (a list of (name, value) str
    pairs, names lower case, in order), .trailers (the same, or []), .body
    (bytes)."""

    def __init__(self, status, headers, trailers, body):
        self.status, self.headers, self.trailers, self.body = status, headers, trailers, body

    def header(self, name, default=None):
        """The last value of header `name` (any case), or `default`."""
        found = [value for key, value in self.headers if key == name.lower()]
        return found[-1] if found else default


class H3Error(ConnectionError):
    """The connection failed, the stream was reset, or the answer was malformed."""


if AIOQUIC:
    class _Exchange:
        """One request stream's answer as it arrives."""

        def __init__(self, loop):
            self.done = loop.create_future()
            self.blocks = []  # header blocks: 1xx ones, the final one, trailers
            self.body = bytearray()

        def finish(self, error=None):
            if not self.done.done():
                if error:
                    self.done.set_exception(error)
                else:
                    self.done.set_result(None)

    class _H3Connection(H3Connection):
        """aioquic's HTTP/3 layer, less its content-length check on the answers
        to HEAD: RFC 9110 §9.3.2 lets them carry the length a GET would have
        had, with no content (aioquic 1.x closes the connection on them)."""

        def __init__(self, quic):
            super().__init__(quic)
            self.head_streams = set()

        def _check_content_length(self, stream):
            if stream.stream_id not in self.head_streams:
                super()._check_content_length(stream)

    class _Protocol(QuicConnectionProtocol):
        """aioquic's QUIC connection with an HTTP/3 layer on top."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.http = _H3Connection(self._quic)
            self.exchanges = {}

        def quic_event_received(self, event):
            if isinstance(event, ConnectionTerminated):
                for exchange in self.exchanges.values():
                    exchange.finish(H3Error("connection closed: error %s %s" % (
                        event.error_code, event.reason_phrase)))
                return
            if isinstance(event, StreamReset) and event.stream_id in self.exchanges:
                self.exchanges[event.stream_id].finish(
                    H3Error("stream reset by the server: error 0x%x" % event.error_code))
                return
            for h3_event in self.http.handle_event(event):
                exchange = self.exchanges.get(getattr(h3_event, "stream_id", None))
                if exchange is None:
                    continue
                if isinstance(h3_event, HeadersReceived):
                    exchange.blocks.append(h3_event.headers)
                elif isinstance(h3_event, DataReceived):
                    exchange.body += h3_event.data
                if getattr(h3_event, "stream_ended", False):
                    exchange.finish()

        async def request(self, method, authority, path, headers, body, declare_length=True):
            stream_id = self._quic.get_next_available_stream_id()
            exchange = self.exchanges[stream_id] = _Exchange(self._loop)
            if method == "HEAD":
                self.http.head_streams.add(stream_id)
            # RFC 9114 §4.3.1: the pseudo-headers first, then the fields in lower case.
            fields = [(b":method", method.encode()), (b":scheme", b"https"),
                      (b":authority", authority.encode()), (b":path", path.encode())]
            fields += [(name.lower().encode(), value.encode()) for name, value in headers]
            # A body's length goes with the head, as curl and browsers send it
            # (RFC 9114 §4.1.2 allows it): a server can refuse a too-large body
            # (413) before any of it arrives.
            if body is not None and declare_length and not any(name.lower() == "content-length"
                                             for name, _ in headers):
                fields.append((b"content-length", str(len(body)).encode()))
            self.http.send_headers(stream_id, fields, end_stream=body is None)
            if body is not None:
                self.http.send_data(stream_id, body, end_stream=True)
            self.transmit()
            await exchange.done
            return exchange


# RFC 9114 §4.2: connection-specific fields are malformed in HTTP/3; curl
# leaves them out of an HTTP/2 or HTTP/3 request, and so does this client
# ("TE: trailers" is the one allowed form).
CONNECTION_SPECIFIC = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
                       "upgrade"}


def _split_headers(headers):
    """("Name: value" lines or (name, value) pairs) -> (authority or None,
    pairs, whether the caller asked for a body of unknown length). The lines
    follow curl's -H syntax: "Name:" with no value sends nothing, "Name;"
    sends the field empty."""
    authority, pairs, chunked = None, [], False
    for line in headers or ():
        if isinstance(line, tuple):
            name, value = line
        elif ":" not in line and line.rstrip().endswith(";"):
            name, value = line.rstrip()[:-1], ""
        else:
            name, value = line.split(":", 1)
            if not value.strip():
                continue
        name, value = name.strip(), value.strip()
        lower = name.lower()
        if lower == "host":
            authority = value
        elif lower in CONNECTION_SPECIFIC:
            # As curl over HTTP/2: a chunked upload is sent with no
            # Content-Length, its end being the stream's end.
            chunked |= lower == "transfer-encoding"
        elif lower == "te" and value.lower() != "trailers":
            continue
        else:
            pairs.append((name, value))
    return authority, pairs, chunked


def _response(exchange, method):
    # RFC 9114 §4.1: zero or more 1xx header blocks, one final block, the
    # body, then at most one trailer block.
    blocks = [[(n.decode("latin-1"), v.decode("latin-1")) for n, v in block]
              for block in exchange.blocks]
    finals = [block for block in blocks if not dict(block).get(":status", "1").startswith("1")]
    if not finals:
        raise H3Error("the stream ended without a final response")
    final = finals[0]
    trailers = finals[1] if len(finals) > 1 else []
    status = int(dict(final)[":status"])
    headers = [(name, value) for name, value in final if not name.startswith(":")]
    return H3Response(status, headers, trailers, bytes(exchange.body) if method != "HEAD" else b"")


async def _fetch(url, method, headers, body, timeout):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https":
        raise ValueError("h3_fetch needs an https:// URL, not %r" % url)
    authority, pairs, chunked = _split_headers(headers)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    # SNI from the URL, as curl does; a Host header changes only :authority.
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                      verify_mode=ssl.CERT_NONE, server_name=parts.hostname)
    # Room for a 10 MiB answer without waiting on the client's flow control.
    configuration.max_data = configuration.max_stream_data = 16 << 20
    async with connect(parts.hostname, parts.port or 443, configuration=configuration,
                       create_protocol=_Protocol, wait_connected=True) as client:
        exchange = await asyncio.wait_for(
            client.request(method, authority or parts.netloc, path, pairs, body,
                           declare_length=not chunked), timeout)
        return _response(exchange, method)


def _quiet_unread_connection_errors(loop, context):
    if not isinstance(context.get("exception"), ConnectionError):
        loop.default_exception_handler(context)


def h3_fetch(url, method="GET", headers=(), body=None, timeout=20):
    """One HTTP/3 request on a new QUIC connection to `url` (https://...).
    `headers`: "Name: value" lines or (name, value) pairs; `body`: bytes, str
    or None. Returns an H3Response; raises H3Error when no answer came, and
    TimeoutError after `timeout` seconds."""
    if not AIOQUIC:
        raise RuntimeError(MISSING_REASON)
    if isinstance(body, str):
        body = body.encode()

    async def bounded():
        # aioquic's connect() leaves its handshake future unread when the
        # connection fails; the error is raised here, so drop asyncio's note.
        asyncio.get_running_loop().set_exception_handler(_quiet_unread_connection_errors)
        return await asyncio.wait_for(_fetch(url, method, headers, body, timeout), timeout + 5)
    try:
        return asyncio.run(bounded())
    except asyncio.TimeoutError as error:
        raise TimeoutError("h3_fetch %s %s: no answer in %s s" % (method, url, timeout)) from error


GTLSCLIENT = shutil.which("gtlsclient")  # Debian's ngtcp2-client, on GnuTLS


def ngtcp2_fetch(url, method="GET", timeout=60):
    """One request with Debian's ngtcp2 client (a second, independent HTTP/3
    stack; it takes no request headers). Returns an H3Response; raises
    H3Error when it failed and RuntimeError when gtlsclient is missing."""
    if not GTLSCLIENT:
        raise RuntimeError("gtlsclient is missing (apt-get install ngtcp2-client)")
    parts = urllib.parse.urlsplit(url)
    with tempfile.TemporaryDirectory(prefix="lepus-ngtcp2-") as scratch:
        done = subprocess.run([GTLSCLIENT, "--exit-on-all-streams-close", "--no-quic-dump",
                               "--download", scratch, "--timeout", "%ds" % timeout,
                               "-m", method, parts.hostname, str(parts.port or 443), url],
                              capture_output=True, text=True, errors="replace",
                              timeout=timeout + 10)
        # --http-dump (on by default) prints "http: stream 0x0 [name: value]".
        fields = re.findall(r"^http: stream 0x0 \[(:?[^:\]]+): ?(.*)\]$",
                            done.stdout + done.stderr, re.M)
        statuses = [value for name, value in fields if name == ":status"]
        if not statuses:
            raise H3Error("gtlsclient got no answer (exit %d): %s" % (
                done.returncode, (done.stdout + done.stderr)[-500:]))
        headers = [(name, value) for name, value in fields if not name.startswith(":")]
        downloaded = os.path.join(scratch, os.path.basename(parts.path) or "index.html")
        body = b""
        if os.path.exists(downloaded):
            with open(downloaded, "rb") as f:
                body = f.read()
        return H3Response(int(statuses[-1]), headers, [], body)


def main(argv):
    parser = argparse.ArgumentParser(description="One HTTP/3 request (aioquic)")
    parser.add_argument("-X", dest="method", default="GET")
    parser.add_argument("-H", dest="headers", action="append", default=[])
    parser.add_argument("-o", dest="output", help="write the body to this file")
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("url")
    args = parser.parse_args(argv)
    try:
        response = h3_fetch(args.url, args.method, args.headers, None, args.timeout)
    except (H3Error, TimeoutError, OSError, RuntimeError) as error:
        print("h3client: %s" % error, file=sys.stderr)
        return 1
    print("HTTP/3 %d" % response.status)
    for name, value in response.headers:
        print("%s: %s" % (name, value))
    print("body-length: %d" % len(response.body))
    print("body-sha256: %s" % hashlib.sha256(response.body).hexdigest())
    if args.output:
        with open(args.output, "wb") as f:
            f.write(response.body)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
