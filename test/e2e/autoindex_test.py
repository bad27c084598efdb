"""Directory listings of --autoindex over real sockets (issue 17): the HTML page
has a doctype and a viewport, its columns line up in characters for UTF-8 names,
long names are cut with "..>" as nginx does; ?format=json answers the JSON of
nginx's `autoindex_format json` with Content-Type application/json, for names
with quotes, control characters and bytes that are not UTF-8."""
import email.utils
import html
import json
import os
import re
import unittest

from harness import LepusTestCase, read_response

MTIME = 1795428000  # Mon, 23 Nov 2026 10:00:00 GMT
LONG_NAME = "\u00e9" * 30 + "-" + "x" * 40 + ".txt"  # 75 characters, 105 bytes


class AutoindexListing(LepusTestCase):
    ARGS = ("--autoindex",)

    @classmethod
    def populate(cls, server):
        files = {
            "list/a.txt": b"12345",
            "list/caf\u00e9.txt": b"xy",
            "list/\u65e5\u672c.txt": b"",
            "list/" + LONG_NAME: b"z" * 7,
            'list/q"uote.txt': b"",
            "list/line\nbreak.txt": b"1",
            "list/.hidden": b"h",
            "list/dir/inner.txt": b"i",
        }
        for name, data in files.items():
            cls.stamp(server.write(name, data))
        not_utf8 = os.path.join(server.root.encode(), b"list", b"\xff.bin")
        with open(not_utf8, "wb") as f:
            f.write(b"abc")
        cls.stamp(not_utf8)
        os.makedirs(os.path.join(server.root, "list", "empty"))
        cls.stamp(os.path.join(server.root, "list", "empty"))
        cls.stamp(os.path.join(server.root, "list", "dir"))

    @staticmethod
    def stamp(path):
        os.utime(path, (MTIME, MTIME))

    def listing_lines(self, body):
        pre = body[body.index("<pre>") + 5:body.index("</pre>")]
        return pre.splitlines()

    def test_html_page_head(self):
        r = self.server.get("/list/")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("Content-Type"), "text/html; charset=utf-8")
        body = r.body.decode("utf-8", errors="replace")  # one name is not UTF-8
        self.assertTrue(body.startswith("<!DOCTYPE html>\n"), body[:80])
        self.assertIn('<meta name="viewport" content="width=device-width, initial-scale=1">', body)
        self.assertIn("<title>Index of /list/</title>", body)
        self.assertNotIn(".hidden", body)

    def test_html_columns_align_in_characters(self):
        body = self.server.get("/list/").body.decode("utf-8", errors="replace")
        lines = self.listing_lines(body)
        self.assertEqual(lines[0], '<a href="../">../</a>')
        self.assertEqual(len(lines), 1 + 9, body)  # ../, two directories, seven files
        for line in lines[1:]:
            text = html.unescape(re.sub(r"<[^>]*>", "", line))
            date = text.index("23-Nov-2026 10:00")
            self.assertEqual(date, 51, "the date starts in column 51: %r" % text)
            self.assertEqual(len(text), 51 + 17 + 21, repr(text))

    def test_html_cuts_long_names_as_nginx(self):
        body = self.server.get("/list/").body.decode("utf-8", errors="replace")
        shown = LONG_NAME[:47] + "..&gt;</a> 23-Nov-2026"
        self.assertIn(">" + shown, body)
        self.assertNotIn(LONG_NAME[:48] + "..", body)

    def test_json_listing(self):
        r = self.server.get("/list/?format=json")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header("Content-Type"), "application/json")
        self.assertEqual(int(r.header("Content-Length")), len(r.body))
        entries = json.loads(r.body.decode("utf-8"))  # strict: invalid UTF-8 would raise
        date = email.utils.formatdate(MTIME, usegmt=True)
        self.assertEqual(entries[:2], [
            {"name": "dir", "type": "directory", "mtime": date},
            {"name": "empty", "type": "directory", "mtime": date},
        ])
        files = {e["name"]: e for e in entries[2:]}
        self.assertEqual(set(files), {"a.txt", "caf\u00e9.txt", "\u65e5\u672c.txt", LONG_NAME,
                                      'q"uote.txt', "line\nbreak.txt", "\ufffd.bin"})
        for name, size in (("a.txt", 5), ("caf\u00e9.txt", 2), (LONG_NAME, 7),
                           ("line\nbreak.txt", 1), ("\ufffd.bin", 3), ('q"uote.txt', 0)):
            self.assertEqual(files[name], {"name": name, "type": "file", "mtime": date,
                                           "size": size})

    def test_json_of_an_empty_directory_and_head(self):
        r = self.server.get("/list/empty/?format=json")
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body), [])
        full = self.server.get("/list/?format=json")
        with self.server.connect() as s:
            s.sendall(b"HEAD /list/?format=json HTTP/1.1\r\nHost: localhost\r\n"
                      b"Connection: close\r\n\r\n")
            head = read_response(s, head_only=True)
            self.assertEqual(s.recv(100), b"", "no body after the head of a HEAD")
        self.assertEqual(head.status, 200)
        self.assertEqual(head.body, b"")
        self.assertEqual(head.header("Content-Length"), str(len(full.body)))
        self.assertEqual(head.header("Content-Type"), "application/json")

    def test_other_queries_give_html(self):
        for query in ("?format=html", "?format=jsonp", "?C=N;O=D"):
            r = self.server.get("/list/" + query)
            self.assertEqual(r.status, 200, query)
            self.assertEqual(r.header("Content-Type"), "text/html; charset=utf-8", query)


if __name__ == "__main__":
    unittest.main(verbosity=2)
