#!/usr/bin/env python3
"""An HTTP/3 test client (issue 39) for the e2e tests: one request on a new
QUIC connection, through Python's aioquic (scripts/install-h3-clients installs
the pinned version), returning the status, the headers and the body.

    h3_fetch("https://127.0.0.1:8443/x", "GET", ["Accept-Encoding: gzip"], None)

Certificates are not verified (the tests' certificates are self-signed). A
"Host: x" header becomes the :authority pseudo-header (RFC 9114 §4.3.1), as
curl does over HTTP/2. Also a command line, for a client that must run in
another network namespace (test/e2e/lossy_net.py):

    python3 h3client.py [-X METHOD] [-H 'Name: value']... [-o FILE] URL

prints the status line, the headers, and the body's length and SHA-256.
"""
import argparse
import asyncio
import hashlib
import sys
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

    class _Protocol(QuicConnectionProtocol):
        """aioquic's QUIC connection with an HTTP/3 layer on top."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.http = H3Connection(self._quic)
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

        async def request(self, method, authority, path, headers, body):
            stream_id = self._quic.get_next_available_stream_id()
            exchange = self.exchanges[stream_id] = _Exchange(self._loop)
            # RFC 9114 §4.3.1: the pseudo-headers first, then the fields in lower case.
            fields = [(b":method", method.encode()), (b":scheme", b"https"),
                      (b":authority", authority.encode()), (b":path", path.encode())]
            fields += [(name.lower().encode(), value.encode()) for name, value in headers]
            self.http.send_headers(stream_id, fields, end_stream=body is None)
            if body is not None:
                self.http.send_data(stream_id, body, end_stream=True)
            self.transmit()
            await exchange.done
            return exchange


def _split_headers(headers):
    """("Name: value" lines or (name, value) pairs) -> (authority or None, pairs)."""
    authority, pairs = None, []
    for line in headers or ():
        name, value = line if isinstance(line, tuple) else line.split(":", 1)
        name, value = name.strip(), value.strip()
        if name.lower() == "host":
            authority = value
        else:
            pairs.append((name, value))
    return authority, pairs


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
    authority, pairs = _split_headers(headers)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                      verify_mode=ssl.CERT_NONE,
                                      server_name=authority.split(":")[0] if authority else None)
    # Room for a 10 MiB answer without waiting on the client's flow control.
    configuration.max_data = configuration.max_stream_data = 16 << 20
    async with connect(parts.hostname, parts.port or 443, configuration=configuration,
                       create_protocol=_Protocol, wait_connected=True) as client:
        exchange = await asyncio.wait_for(
            client.request(method, authority or parts.netloc, path, pairs, body), timeout)
        return _response(exchange, method)


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
        return await asyncio.wait_for(_fetch(url, method, headers, body, timeout), timeout + 5)
    try:
        return asyncio.run(bounded())
    except asyncio.TimeoutError as error:
        raise TimeoutError("h3_fetch %s %s: no answer in %s s" % (method, url, timeout)) from error


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
