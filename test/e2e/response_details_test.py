"""Response details found behind a real WordPress site (issue 31, item 5), over
HTTP/1.1, HTTP/2 over TLS and h2c (the protocol matrix, see matrix_test.py):

- an empty or short script response (a redirect) is not compressed: a gzip
  stream of an empty body is 20 bytes, more than the body;
- a script that answers 304 when If-None-Match equals its own strong ETag
  (WordPress's feed) does so for a client that sends back the weak form lepus
  gave it when it compressed the response;
- a multi-range request gets 206 multipart/byteranges, and an abusive one
  (overlapping or too many ranges) gets the file once, never more.

Needs php-fpm (the suite installs it; without it the script rows fail).
"""
import gzip
import unittest

import harness
import phpfpm

DATA = bytes((i * 7 + i // 256) % 256 for i in range(5000))

FEED = """<?php
$etag = '"feed-42"';
header('Content-Type: application/rss+xml; charset=UTF-8');
header('ETag: ' . $etag);
// WordPress (wp-includes/class-wp.php): a plain string comparison.
$client = $_SERVER['HTTP_IF_NONE_MATCH'] ?? '';
header('X-Seen-If-None-Match: ' . $client);
if ($client === $etag) { http_response_code(304); exit; }
echo str_repeat("<item><title>lepus</title></item>\\n", 100);
"""


def parse_multipart(content_type, body):
    """[(content-range, part content-type, bytes)] of a multipart/byteranges body."""
    kind, _, params = content_type.partition(";")
    assert kind.strip() == "multipart/byteranges", content_type
    boundary = params.strip()
    assert boundary.startswith("boundary="), content_type
    delimiter = b"--" + boundary[len("boundary="):].strip('"').encode()
    pieces = body.split(delimiter)
    assert pieces[-1] in (b"--\r\n", b"--"), pieces[-1]
    assert pieces[0] in (b"", b"\r\n"), pieces[0]
    parts = []
    for piece in pieces[1:-1]:
        assert piece.startswith(b"\r\n") and piece.endswith(b"\r\n"), piece[:80]
        head, _, data = piece[2:-2].partition(b"\r\n\r\n")
        fields = {}
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        parts.append((fields.get("content-range"), fields.get("content-type"), data))
    return parts


class ResponseDetails(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fpm, cls.server = phpfpm.start_site(cls, ["--compress", "on"], children=2)
        cls.server.write("data.txt", DATA)
        cls.server.write("redirect.php", "<?php header('Location: /elsewhere', true, 301);\n")
        cls.server.write("short.php", "<?php echo 'a short page';\n")
        cls.server.write("long.php", "<?php echo str_repeat('a longer page. ', 100);\n")
        cls.server.write("feed.php", FEED)

    def fetch(self, *args, **kwargs):
        return self.server.fetch(*args, **kwargs)

    # --- (a) no compression of empty or short bodies ---------------------------
    def test_an_empty_redirect_is_not_compressed(self):
        response = self.fetch("/redirect.php", headers=["Accept-Encoding: gzip, br, zstd"])
        self.assertEqual(response.status, 301)
        self.assertEqual(response.header("location"), "/elsewhere")
        self.assertIsNone(response.header("content-encoding"))
        self.assertEqual(response.body, b"")

    def test_a_short_page_is_not_compressed(self):
        response = self.fetch("/short.php", headers=["Accept-Encoding: gzip"])
        self.assertEqual(response.status, 200)
        self.assertIsNone(response.header("content-encoding"))
        self.assertEqual(response.body, b"a short page")

    def test_a_longer_page_still_is(self):
        response = self.fetch("/long.php", headers=["Accept-Encoding: gzip"])
        self.assertEqual(response.status, 200)
        self.assertEqual(response.header("content-encoding"), "gzip")
        self.assertEqual(gzip.decompress(response.body), b"a longer page. " * 100)

    # --- (b) the weak ETag lepus made goes back to the script strong -----------
    def test_a_script_answers_304_to_the_weak_etag_lepus_gave(self):
        first = self.fetch("/feed.php", headers=["Accept-Encoding: gzip"])
        self.assertEqual(first.status, 200)
        self.assertEqual(first.header("content-encoding"), "gzip")
        self.assertEqual(first.header("etag"), 'W/"feed-42"')
        again = self.fetch("/feed.php", headers=["Accept-Encoding: gzip",
                                                 "If-None-Match: " + first.header("etag")])
        self.assertEqual(again.status, 304, again.headers)
        self.assertEqual(again.body, b"")

    def test_other_etags_reach_the_script_as_sent(self):
        response = self.fetch("/feed.php", headers=["If-None-Match: \"other\", \"feed-4\""])
        self.assertEqual(response.status, 200)
        self.assertEqual(response.header("x-seen-if-none-match"), '"other", "feed-4"')

    # --- (c) several ranges -----------------------------------------------------
    def test_two_ranges_are_a_multipart_answer(self):
        response = self.fetch("/data.txt", headers=["Range: bytes=0-9, 4000-4099, -5"])
        self.assertEqual(response.status, 206, response.headers)
        self.assertIsNone(response.header("content-range"))
        parts = parse_multipart(response.header("content-type"), response.body)
        self.assertEqual(len(response.body), int(response.header("content-length")))
        self.assertEqual(parts, [
            ("bytes 0-9/5000", "text/plain; charset=utf-8", DATA[0:10]),
            ("bytes 4000-4099/5000", "text/plain; charset=utf-8", DATA[4000:4100]),
            ("bytes 4995-4999/5000", "text/plain; charset=utf-8", DATA[4995:]),
        ])

    def test_one_satisfiable_range_of_several_is_a_plain_206(self):
        response = self.fetch("/data.txt", headers=["Range: bytes=10-19, 9000-9100"])
        self.assertEqual(response.status, 206)
        self.assertEqual(response.header("content-range"), "bytes 10-19/5000")
        self.assertEqual(response.body, DATA[10:20])

    def test_overlapping_ranges_do_not_amplify(self):
        # Each range is the whole file: the answer would be 20 times the file.
        response = self.fetch("/data.txt", headers=["Range: bytes=" + ",".join(["0-"] * 12)])
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, DATA)

    def test_too_many_ranges_are_ignored(self):
        spec = ",".join("%d-%d" % (i * 10, i * 10) for i in range(40))
        response = self.fetch("/data.txt", headers=["Range: bytes=" + spec])
        self.assertEqual(response.status, 200)
        self.assertEqual(response.body, DATA)

    def test_a_multipart_answer_keeps_the_conditionals(self):
        first = self.fetch("/data.txt")
        response = self.fetch("/data.txt", headers=["Range: bytes=0-1,3-4",
                                                    "If-Range: " + first.header("etag")])
        self.assertEqual(response.status, 206)
        self.assertEqual(response.header("etag"), first.header("etag"))
        stale = self.fetch("/data.txt", headers=["Range: bytes=0-1,3-4", 'If-Range: "old"'])
        self.assertEqual(stale.status, 200)
        self.assertEqual(stale.body, DATA)


if __name__ == "__main__":
    harness.main()
