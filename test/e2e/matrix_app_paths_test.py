"""What real applications behind lepus found missing (issue 37, docs/apps-runs.md),
over the protocol matrix (h1, h2, h2c: CMakeLists.txt's protocol_e2e), in
front of a real php-fpm:

- a PATH_INFO that ends in "/" (Nextcloud's /remote.php/dav/files/admin/) is
  split into the script and PATH_INFO, as nginx's fastcgi_split_path_info
  ^(.+?\\.php)(/.*)$ does, rather than looked up as a folder (404);
- WebDAV and other extension methods (RFC 9110 §9.1: a method is a token)
  reach a script as REQUEST_METHOD and a proxied backend on its request line;
  the files answer them 405 with Allow where the site has a backend, 501
  where nothing on the server implements them; an invalid method is 400;
- try_files decides "file or folder" from the template ("$uri/" is a
  folder test, "$uri" a file test even for /apps/files/), as nginx;
- try_files takes /script.php/path as found when /script.php is a script
  (nginx's `location ~ \\.php(/|$)`), and the script gets its PATH_INFO.

Needs php-fpm."""
import http.server
import json
import socketserver
import threading
import unittest

import harness
import phpfpm

ENV = ("<?php header('Content-Type: application/json'); echo json_encode(["
       "'method' => $_SERVER['REQUEST_METHOD'], 'script_name' => $_SERVER['SCRIPT_NAME'],"
       " 'path_info' => $_SERVER['PATH_INFO'] ?? null, 'request_uri' => $_SERVER['REQUEST_URI'],"
       " 'depth' => $_SERVER['HTTP_DEPTH'] ?? null,"
       " 'body' => file_get_contents('php://input')]);\n")

PROPFIND_BODY = ('<?xml version="1.0"?><d:propfind xmlns:d="DAV:"><d:prop>'
                 '<d:getlastmodified/></d:prop></d:propfind>')


class PhpPaths(unittest.TestCase):
    """A plain --fastcgi site, no try_files."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.fpm, cls.server = phpfpm.start_site(cls, ["--index", "index.php,index.html"])
        cls.server.write("remote.php", ENV)
        cls.server.write("dir.php/index.html", "a folder named like a script\n")
        cls.server.write("static.txt", "static file\n")

    def fetch(self, path, *headers, **kwargs):
        return self.server.fetch(path, headers=list(headers), **kwargs)

    def script(self, path, method="GET", *headers, **kwargs):
        r = self.fetch(path, *headers, method=method, **kwargs)
        self.assertEqual(r.status, 200, (path, method, r.body))
        return json.loads(r.body)

    def test_path_info_ending_in_a_slash_is_split(self):
        for path, info in (("/remote.php/dav/files/admin/", "/dav/files/admin/"),
                           ("/remote.php/a/", "/a/"), ("/remote.php/", "/"),
                           ("/remote.php/a", "/a")):
            env = self.script(path)
            self.assertEqual((env["script_name"], env["path_info"], env["request_uri"]),
                             ("/remote.php", info, path))

    def test_a_folder_named_like_a_script_stays_a_folder(self):
        r = self.fetch("/dir.php/")
        self.assertEqual((r.status, r.body), (200, b"a folder named like a script\n"))
        self.assertEqual(self.fetch("/missing.php/a/").status, 404)

    def test_webdav_methods_reach_the_script(self):
        env = self.script("/remote.php/dav/files/admin/", "PROPFIND", "Depth: 1",
                          "Content-Type: application/xml", body=PROPFIND_BODY)
        self.assertEqual((env["method"], env["path_info"], env["depth"], env["body"]),
                         ("PROPFIND", "/dav/files/admin/", "1", PROPFIND_BODY))
        for method in ("MKCOL", "PROPPATCH", "COPY", "MOVE", "LOCK", "UNLOCK", "REPORT",
                       "SEARCH", "X-MS-ENUMATTS"):
            env = self.script("/remote.php/dav/files/admin/new", method)
            self.assertEqual(env["method"], method)

    def test_extension_method_on_a_file_is_405_with_allow(self):
        # The site runs scripts, which may take any method: the files
        # recognise PROPFIND and do not allow it (RFC 9110 §15.5.6).
        for path in ("/static.txt", "/dir.php/", "/missing.txt"):
            r = self.fetch(path, method="PROPFIND")
            self.assertEqual(r.status, 405, path)
            self.assertEqual(r.header("allow"), "GET, HEAD, OPTIONS")

    def test_an_invalid_method_is_refused(self):
        if self.server.protocol in ("h2", "h2c"):
            # lepus's own HTTP/2 engine answers a method that is not a token
            # 400 (RFC 9113 §8.1.1 lets a malformed request be answered before
            # the stream error), as HTTP/1.1 does. Never the script.
            self.assertEqual(self.fetch("/remote.php", method="PROP(FIND").status, 400)
            return
        if self.server.protocol == "h3":
            # nghttp3 resets the stream (H3_MESSAGE_ERROR) before lepus sees it.
            with self.assertRaises(ConnectionError):
                self.fetch("/remote.php", method="PROP(FIND")
            return
        for method in (b"PROP(FIND", b"PROP\x01FIND", b"PROP\"FIND", b"PROP\xc3\xa9"):
            r = self.server.request(method + b" /remote.php HTTP/1.1\r\nHost: a\r\n"
                                    b"Connection: close\r\n\r\n")
            self.assertEqual(r.status, 400, method)

    def test_known_methods_keep_their_meaning(self):
        self.assertEqual(self.script("/remote.php/x/", "DELETE")["method"], "DELETE")
        self.assertEqual(self.fetch("/static.txt", method="DELETE").status, 405)
        r = self.fetch("/static.txt", method="HEAD")
        self.assertEqual((r.status, r.body), (200, b""))


class TryFilesPaths(unittest.TestCase):
    """Nextcloud's `try_files $uri /index.php$request_uri` (no "$uri/") and a
    site with the usual `$uri $uri/ /index.php?$query_string`."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.fpm, cls.server = phpfpm.start_site(
            cls, ["--index", "index.php,index.html", "--try-files",
                  "$uri /index.php$uri?$query_string"])
        cls.both = harness.Lepus(["--fastcgi", cls.fpm.address, "--index", "index.php,index.html",
                                  "--try-files", "$uri $uri/ /index.php?$query_string"],
                                 root=cls.server.root)
        cls.addClassCleanup(cls.both.stop, harness.LepusTestCase._Checker())
        for name in ("index.php", "remote.php", "ocs/v2.php"):
            cls.server.write(name, ENV)
        cls.server.write("apps/files/js/app.js", "// app\n")  # a folder with no index
        cls.server.write("docs/index.html", "docs index\n")

    def script(self, server, path, method="GET"):
        r = server.fetch(path, method=method)
        self.assertEqual(r.status, 200, (path, r.body))
        return json.loads(r.body)

    def test_uri_is_a_file_test_even_for_a_folder(self):
        # nginx decides from the template: "$uri" tests a file, so the folder
        # /apps/files/ (which has no index) goes to the fallback.
        env = self.script(self.server, "/apps/files/?dir=/")
        self.assertEqual((env["script_name"], env["path_info"], env["request_uri"]),
                         ("/index.php", "/apps/files/", "/apps/files/?dir=/"))
        env = self.script(self.server, "/apps/files")
        self.assertEqual((env["script_name"], env["path_info"]), ("/index.php", "/apps/files"))
        r = self.server.fetch("/apps/files/js/app.js")
        self.assertEqual((r.status, r.body), (200, b"// app\n"))

    def test_uri_slash_is_still_a_folder_test(self):
        r = self.both.fetch("/docs/")
        self.assertEqual((r.status, r.body), (200, b"docs index\n"))
        r = self.both.fetch("/docs")
        self.assertEqual(r.status, 301)
        env = self.script(self.both, "/no/such/page")
        self.assertEqual(env["script_name"], "/index.php")

    def test_a_script_with_a_path_info_is_found(self):
        # nginx's `location ~ \.php(/|$)` takes these before try_files.
        for server in (self.server, self.both):
            for path, script, info in (
                    ("/remote.php/dav/files/admin/", "/remote.php", "/dav/files/admin/"),
                    ("/remote.php/dav/files/admin/f.txt", "/remote.php", "/dav/files/admin/f.txt"),
                    ("/ocs/v2.php/cloud/capabilities", "/ocs/v2.php", "/cloud/capabilities"),
                    ("/index.php/apps/files/", "/index.php", "/apps/files/")):
                env = self.script(server, path)
                self.assertEqual((env["script_name"], env["path_info"], env["request_uri"]),
                                 (script, info, path))
            env = self.script(server, "/remote.php/dav/files/admin/", "PROPFIND")
            self.assertEqual((env["method"], env["script_name"]), ("PROPFIND", "/remote.php"))
        # A script that does not exist is no script: the fallback takes it.
        env = self.script(self.server, "/missing.php/a")
        self.assertEqual((env["script_name"], env["path_info"]), ("/index.php", "/missing.php/a"))


class StaticOnly(unittest.TestCase):
    """No backend on the server: nothing implements PROPFIND (RFC 9110 §15.6.2)."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.server = harness.Lepus()
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())
        cls.server.write("static.txt", "static file\n")

    def test_extension_method_is_501(self):
        for method in ("PROPFIND", "MKCOL"):
            r = self.server.fetch("/static.txt", method=method)
            self.assertEqual(r.status, 501, method)
        self.assertEqual(self.server.fetch("/static.txt", method="PUT").status, 405)
        self.assertEqual(self.server.fetch("/static.txt").body, b"static file\n")


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.dumps({"method": self.command, "path": self.path,
                           "body": self.rfile.read(length).decode()}).encode()
        self.send_response(207 if self.command == "PROPFIND" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PROPFIND = do_MKCOL = do_REPORT = answer


class Proxied(unittest.TestCase):
    """--proxy: the method is on the backend's request line as the client sent it."""

    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        cls.backend = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
        cls.backend.daemon_threads = True
        threading.Thread(target=cls.backend.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.backend.server_close)
        cls.addClassCleanup(cls.backend.shutdown)
        cls.server = harness.Lepus(
            ["--proxy", "http://127.0.0.1:%d" % cls.backend.server_address[1]])
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())

    def test_extension_methods_reach_the_backend(self):
        r = self.server.fetch("/dav/a/", method="PROPFIND", headers=["Depth: 0"],
                              body=PROPFIND_BODY)
        self.assertEqual(r.status, 207, r.body)
        self.assertEqual(json.loads(r.body), {"method": "PROPFIND", "path": "/dav/a/",
                                              "body": PROPFIND_BODY})
        for method in ("MKCOL", "REPORT"):
            r = self.server.fetch("/dav/b", method=method)
            self.assertEqual((r.status, json.loads(r.body)["method"]), (200, method))


if __name__ == "__main__":
    unittest.main()
