#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer drivers into test/fuzz/corpus/<target>/.

Each seed is FuzzInput's two control bytes (split mode and options, split
parameter; see fuzz_input.h) followed by a real input: requests as browsers,
curl and ab send them, chunked bodies, request paths, Range headers, FastCGI
streams as php-fpm writes them, CGI response heads. Files are named after their
content, so running this again rewrites the same files; inputs that the fuzzer
found interesting (and crashes, once fixed) are added beside them by scripts/fuzz
and committed as they are.
"""
import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# (mode byte, parameter byte): whole, byte by byte, two pieces, random pieces.
SPLITS = [(0, 0), (1, 0), (2, 100), (3, 7)]


def write(target, payload, splits=SPLITS, options=0):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    for mode, parameter in splits:
        data = bytes([mode | (options << 2), parameter]) + payload
        name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)


def crlf(*lines):
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def requests():
    browser = crlf("GET /index.html HTTP/1.1", "Host: localhost:8080",
                   "User-Agent: Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0",
                   "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
                   "Accept-Language: en-US,en;q=0.5", "Accept-Encoding: gzip, deflate, br",
                   "Connection: keep-alive", "If-None-Match: \"65a1-1f\"",
                   "If-Modified-Since: Sat, 20 Jan 2024 10:00:00 GMT")
    seeds = [
        browser,
        crlf("GET / HTTP/1.1", "Host: localhost", "User-Agent: curl/7.88.1", "Accept: */*"),
        crlf("GET /big.bin HTTP/1.0", "Host: 127.0.0.1", "User-Agent: ApacheBench/2.3",
             "Accept: */*", "Connection: keep-alive"),
        crlf("HEAD /a%20b.txt?x=1&y=%41 HTTP/1.1", "Host: example.com", "Range: bytes=0-99,-5"),
        crlf("OPTIONS * HTTP/1.1", "Host: x"),
        crlf("GET http://example.com:80/p?q HTTP/1.1", "Host: other"),
        crlf("CONNECT example.com:443 HTTP/1.1", "Host: example.com:443"),
        crlf("POST /form HTTP/1.1", "Host: x", "Content-Type: application/x-www-form-urlencoded",
             "Content-Length: 7") + b"a=1&b=2",
        crlf("POST /upload HTTP/1.1", "Host: x", "Transfer-Encoding: chunked",
             "Expect: 100-continue") + b"5\r\nhello\r\n0\r\n\r\n",
        crlf("GET /1 HTTP/1.1", "Host: x") + crlf("GET /2 HTTP/1.1", "Host: x") +
        crlf("GET /3 HTTP/1.1", "Host: x", "Connection: close"),
        b"GET / HTTP/1.1\nHost: x\n\n",
        b"\r\n\r\nGET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
        # Requests that must fail, one per status.
        crlf("GET / HTTP/1.1", "Host: x", "Content-Length: 5", "Transfer-Encoding: chunked"),
        crlf("GET / HTTP/1.1", "Host: a", "Host: b"),
        crlf("GET / HTTP/1.1", "Host: x", " folded"),
        crlf("GET / HTTP/2.0", "Host: x"),
        crlf("BREW /pot HTTP/1.1", "Host: x"),
        crlf("GET / HTTP/1.1", "Host: x", "Transfer-Encoding: gzip"),
        crlf("GET /" + "a" * 100 + " HTTP/1.1", "Host: x"),
        crlf("GET / HTTP/1.1", "Host: x", "Bad Name: y"),
        crlf("GET / HTTP/1.1", "Host: x", "Content-Length: 1, 2"),
        b"GET / HTTP/1.1\r\nHost: x\rX: y\r\n\r\n",
        b"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        # Issue 14: chunked with parameters (400), raw browser characters (accepted),
        # a '"' in the path, control and high bytes in the query (400), HTTP/1.2 (read
        # as 1.1) and HTTP/3.0 (505).
        crlf("POST / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked;x=y") +
        b"5\r\nhello\r\n0\r\n\r\n",
        crlf("POST / HTTP/1.1", "Host: x", "Transfer-Encoding: gzip, chunked ; q=1"),
        crlf("GET /a|b^c{d}e\\f`g?q={\"a\":1}|^` HTTP/1.1", "Host: x"),
        crlf("GET /a\"b HTTP/1.1", "Host: x"),
        b"GET /a?x=\x1b\xff HTTP/1.1\r\nHost: x\r\n\r\n",
        crlf("GET / HTTP/1.2", "Host: x") + crlf("GET / HTTP/1.9", "Host: x"),
        crlf("GET / HTTP/3.0", "Host: x"),
    ]
    for seed in seeds:
        write("request_parser", seed)
    # Small limits (option bit 0) reach 414 and 431 within a short input.
    write("request_parser", crlf("GET / HTTP/1.1", "Host: x", "A: 1", "B: 2", "C: 3", "D: 4"),
          splits=[(0, 0), (1, 0)], options=1)
    write("request_parser", crlf("GET /" + "b" * 70 + " HTTP/1.1", "Host: x"),
          splits=[(0, 0)], options=1)


def chunked():
    seeds = [
        b"5\r\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b"A;name=value;q=\"x y\"\r\n0123456789\r\n0\r\n\r\n",
        b"3 ;ext\r\nabc\r\n0\r\nTrailer-One: 1\r\nTrailer-Two: two\r\n\r\n",
        b"0\r\n\r\nGET / HTTP/1.1\r\n",
        b"000010\r\n0123456789abcdef\r\n0\r\n\r\n",
        b"fffffffffffffffff\r\n",
        b"5\nhello\n0\n\n",
        b"5\r\nhelloX\r\n",
        b"1\r\na\r\n" * 20 + b"0\r\n\r\n",
    ]
    for seed in seeds:
        write("chunked_decoder", seed)
    # A 64-byte cap (options: bit 0 on, multiplier 1).
    write("chunked_decoder", b"40\r\n" + b"x" * 64 + b"\r\n1\r\ny\r\n0\r\n\r\n",
          splits=[(0, 0), (3, 9)], options=1 | (1 << 1))


def paths():
    seeds = [b"/", b"/index.html", b"/a/b/c/", b"/a/./b/../c", b"/a//b///c", b"/../etc/passwd",
             b"/a/%2e%2e/%2e%2e/x", b"/%2F%2f", b"/space%20name.txt", b"/%00", b"/a%", b"/%zz",
             b"/.git/config", b"/a/..", b"/a/.", b"/%25252e", b"relative", b"/\xc3\xa9t\xc3\xa9",
             b"/a/b/../../..", b"/.well-known/x"]
    for seed in seeds:
        write("path", seed, splits=[(0, 0)])


def ranges():
    headers = [b"bytes=0-0", b"bytes=0-", b"bytes=-1", b"bytes=-0", b"bytes=5-2",
               b"bytes=0-99,200-299", b"BYTES=1-2", b"bytes= 1-2 , ,3-4", b"bytes=99999999999-",
               b"bytes=18446744073709551616-", b"items=0-1", b"bytes=", b"bytes=-",
               b"bytes=10-20", b"bytes=0-18446744073709551615"]
    for header in headers:
        # File sizes 0, 1, 10 and 31 (options bits 1..5), and a 64-bit size (bit 0).
        for size in (0, 1, 10, 31):
            write("range", header, splits=[(0, 0)], options=size << 1)
        write("range", struct.pack("<Q", 1 << 40) + header, splits=[(0, 0)], options=1)


def fcgi_record(kind, request_id, content, padding=None):
    if padding is None:
        padding = (8 - len(content) % 8) % 8
    return struct.pack(">BBHHBx", 1, kind, request_id, len(content), padding) + content + \
        b"\0" * padding


def name_value(name, value):
    def length(n):
        return bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
    return length(len(name)) + length(len(value)) + name + value


def fastcgi():
    params = b"".join(name_value(n, v) for n, v in [
        (b"SCRIPT_FILENAME", b"/srv/www/index.php"), (b"REQUEST_METHOD", b"GET"),
        (b"QUERY_STRING", b"a=1"), (b"HTTP_USER_AGENT", b"x" * 200)])
    stdout = b"Content-Type: text/html; charset=UTF-8\r\n\r\n<h1>hello</h1>"
    responder = (fcgi_record(6, 1, stdout) + fcgi_record(7, 1, b"PHP Notice: x") +
                 fcgi_record(7, 1, b"") + fcgi_record(6, 1, b"") +
                 fcgi_record(3, 1, struct.pack(">IB3x", 0, 0)))
    client = (fcgi_record(1, 1, struct.pack(">HB5x", 1, 1)) + fcgi_record(4, 1, params) +
              fcgi_record(4, 1, b"") + fcgi_record(5, 1, b"a=1&b=2") + fcgi_record(5, 1, b""))
    seeds = [
        responder, client,
        fcgi_record(6, 1, b"x" * 4000),
        fcgi_record(9, 0, name_value(b"FCGI_MAX_CONNS", b"") + name_value(b"FCGI_MPXS_CONNS", b"")),
        fcgi_record(11, 0, bytes([42]) + b"\0" * 7),
        fcgi_record(42, 7, b"unknown type"),
        fcgi_record(6, 1, b"abc", padding=255),
        b"\x02\x06\x00\x01\x00\x00\x00\x00",
        fcgi_record(4, 1, b"\x80\x00\x00\x05\x01abc"),
        fcgi_record(3, 1, struct.pack(">IB3x", 255, 2)),
    ]
    for seed in seeds:
        write("fastcgi_record", seed)


def cgi():
    seeds = [
        b"Content-Type: text/html; charset=UTF-8\r\n\r\n<h1>hello</h1>",
        b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nnope",
        b"Location: /elsewhere\r\n\r\n",
        b"Status: 201\nX-Powered-By: PHP/8.2\nContent-Length: 2\n\nok",
        b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nCache-Control: no-cache\r\n\r\n",
        b"Status: 99 Low\r\n\r\n",
        b"Status: 200 OK\r\nStatus: 500\r\n\r\n",
        b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
        b"Bad Header\r\n\r\n",
        b"X: a\x01b\r\n\r\n",
        b": empty name\r\n\r\n",
        b"X-Long: " + b"v" * 3000 + b"\r\n\r\n",
        # Issue 14: a 1xx (interim) or out-of-range Status is an error, never a response.
        b"Status: 100 Continue\r\nContent-type: text/html; charset=UTF-8\r\n\r\nbody",
        b"Status: 101 Switching Protocols\r\nContent-type: text/html\r\n\r\nbody",
        b"Status: 103\r\nLink: </a.css>; rel=preload\r\n\r\n",
        b"Status: 600 Beyond\r\n\r\n",
        b"Status: 599\r\n\r\n",
    ]
    for seed in seeds:
        write("cgi_response", seed)


def basic_auth():
    # Authorization values (options bit 0 clear), as browsers and curl send them.
    for value in (b"Basic Ym9iOnNlY3JldA==", b"basic YWxpY2U6d29uZGVybGFuZA", b"Basic Ym9i",
                  b"Bearer abc.def", b"Basic !!!", b"Basic Y2Fyb2w6cMOkc3N3w7ZyZA==",
                  b"Basic Ym9iOgo="):
        write("basic_auth", value, splits=[(0, 0)])
    # htpasswd files (bit 0 set): what htpasswd -B writes, comments, refused kinds.
    bcrypt = b"$2y$05$MlQTcidIuh7Wp3BiHalrAOxKO.OpgFYOKvlUV95uJhl2xnzm4KerC"
    for text in (b"# users\nbob:" + bcrypt + b"\r\namy:" + bcrypt + b"\n\n",
                 b"a:$6$saltsalt$8RWsOfwR6M6PpnoeQiEiWzNTPo1f0HjVYjDnLZhGx16aBFRkeqiHAzfXP/"
                 b"LgrOWMBMXqiU2pLrXsSOHNUyUm91\n",
                 b"bob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n",
                 b"bob:$apr1$lZL6V/ci$eIMz/iKDkbtys/uU7LEK00\n",
                 b"bob:abJnggxhB/yWI\nno colon\n", b":" + bcrypt + b"\n"):
        write("basic_auth", text, splits=[(0, 0)], options=1)


def hpack_integer(first, prefix_bits, value):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(0x80 | (value & 0x7f))
        value >>= 7
    return bytes(out + [value])


def hpack_literal(name, value, first=0x40, prefix_bits=6, name_index=0):
    """A field without Huffman (RFC 7541 §6.2): by name index, or with the name."""
    out = hpack_integer(first, prefix_bits, name_index)
    if name_index == 0:
        out += hpack_integer(0, 7, len(name)) + name
    return out + hpack_integer(0, 7, len(value)) + value


def hpack_blocks(*blocks):
    return b"".join(bytes([len(b)]) + b for b in blocks)


def hpack():
    # Options (see hpack_fuzz.cc): low three bits our table size (0: 4096,
    # 3: 256), then the encoder's table size and its Huffman choice.
    h = bytes.fromhex
    c3 = hpack_blocks(h("828684410f7777772e6578616d706c652e636f6d"),
                      h("828684be58086e6f2d6361636865"),
                      h("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
    c4 = hpack_blocks(h("828684418cf1e3c2e5f23a6ba0ab90f4ff"), h("828684be5886a8eb10649cbf"),
                      h("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"))
    c6 = hpack_blocks(h("3fe101488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a6"
                        "2d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"),
                      h("4883640effc1c0bf"),
                      h("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7"
                        "821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed"
                        "4ee5b1063d5007"))
    # A browser's request: static names with incremental indexing, then the
    # same request again as indices into the dynamic table.
    browser = (b"\x82\x87" + hpack_literal(b"", b"/index.html", name_index=4) +
               hpack_literal(b"", b"localhost:8443", name_index=1) +
               hpack_literal(b"", b"Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0", name_index=58) +
               hpack_literal(b"", b"text/html,*/*;q=0.8", name_index=19) +
               hpack_literal(b"", b"gzip, deflate, br", name_index=16) +
               hpack_literal(b"sec-fetch-mode", b"navigate") +
               hpack_literal(b"cookie", b"session=abc123", first=0x10, prefix_bits=4))
    again = bytes([0x82, 0x87, 0xc3, 0xc2, 0xc1, 0xc0, 0xbf, 0xbe]) + \
        hpack_literal(b"", b"session=abc123", first=0x10, prefix_bits=4, name_index=32)
    for options, payload in ((0, c3), (0, c4), (3, c6), (0, hpack_blocks(browser, again)),
                             (1 | 8, hpack_blocks(browser, again)), (2 | 16 | 32, c6),
                             (0, hpack_blocks(h("20") + browser, h("3fe11f82"))),
                             (0, hpack_blocks(h("ff8080808000"))), (0, hpack_blocks(h("4082 1fff 0161".replace(" ", "")))),
                             (0, hpack_blocks(h("82 20".replace(" ", ""))))):
        write("hpack", payload, splits=[(0, 0)], options=options)


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + \
        struct.pack(">I", stream) + payload


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def http2_frames():
    """A client's byte stream (options bit 0: no preface expected)."""
    get = bytes.fromhex("828684") + hpack_literal(b"", b"localhost", first=0x40, name_index=1)
    settings = h2_frame(4, 0, 0, struct.pack(">HIHI", 3, 100, 4, 1 << 20))
    browser = (H2_PREFACE + settings + h2_frame(8, 0, 0, struct.pack(">I", 15663105)) +
               h2_frame(1, 0x25, 1, struct.pack(">IB", 0, 200) + get) +
               h2_frame(4, 1, 0) + h2_frame(6, 0, 0, b"12345678"))
    post = (H2_PREFACE + settings +
            h2_frame(1, 0x08, 3, b"\x02" + get + b"pp") + h2_frame(9, 0x04, 3, b"") +
            h2_frame(0, 0x08, 3, b"\x03body" + b"\0" * 3) + h2_frame(0, 0x01, 3, b"end") +
            h2_frame(2, 0, 5, struct.pack(">IB", 3, 16)) + h2_frame(3, 0, 3, struct.pack(">I", 8)) +
            h2_frame(0x42, 0, 0, b"unknown") + h2_frame(7, 0, 0, struct.pack(">II", 3, 0)))
    flood = H2_PREFACE + settings + h2_frame(1, 0, 1, get) + h2_frame(9, 0, 1, b"x") * 10
    for payload in (browser, post, flood):
        write("http2_frames", payload)
    write("http2_frames", post[len(H2_PREFACE):], splits=[(0, 0), (3, 9)], options=1)


def main():
    http2_frames()
    hpack()
    basic_auth()
    requests()
    chunked()
    paths()
    ranges()
    fastcgi()
    cgi()
    for target in sorted(os.listdir(os.path.join(HERE, "corpus"))):
        count = len(os.listdir(os.path.join(HERE, "corpus", target)))
        print("%-16s %d files" % (target, count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
