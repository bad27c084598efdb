"""A real PHP application nobody here wrote, from Debian's packages (issue 18):
DokuWiki (package `dokuwiki`) run through lepus + php-fpm and driven by a
scripted browser (cookies, forms with their hidden security tokens): the start
page, a login, a page created and edited, the page viewed at its pretty URL
(try_files with `/doku.php?id=$uri&$args`, as DokuWiki's nginx guide), the
stylesheet and script bundles, a template image behind Debian's symlinks into
/var/lib (needs --symlinks follow) and a media file that DokuWiki hands to
lepus with X-Sendfile (--x-accel).

The installation is copied to a scratch folder with its own configuration and
data (a DOKU_CONF preload), so the system's wiki is never touched.

A matrix test (issue 31): CTest runs it over HTTP/1.1, h2 and h2c. The browser
is harness.Lepus.fetch() with a cookie store and redirects followed here; the
redirects DokuWiki builds must name the scheme the request came in with
(https over TLS: lepus passes HTTPS=on)."""
import hashlib
import html.parser
import os
import shutil
import time
import unittest
import urllib.parse

import harness
import phpfpm

INSTALL = "/usr/share/dokuwiki"
CONF = "/etc/dokuwiki"
DATA = "/var/lib/dokuwiki/data"
USER, PASSWORD = "lepus", "carrot-and-stick"


class Forms(html.parser.HTMLParser):
    """The forms of a page: id -> {action, fields}; text areas count as fields."""

    def __init__(self):
        super().__init__()
        self.forms, self.current, self.textarea = {}, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.current = {"action": attrs.get("action", ""), "fields": {}}
            self.forms[attrs.get("id") or "form%d" % len(self.forms)] = self.current
        elif tag == "input" and self.current is not None and attrs.get("name"):
            if attrs.get("type") not in ("submit", "checkbox") or "checked" in attrs:
                self.current["fields"][attrs["name"]] = attrs.get("value") or ""
        elif tag == "textarea" and self.current is not None:
            self.textarea = attrs.get("name")
            self.current["fields"][self.textarea] = ""

    def handle_data(self, data):
        if self.textarea:
            self.current["fields"][self.textarea] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.current = None
        elif tag == "textarea":
            self.textarea = None


def forms_of(page):
    parser = Forms()
    parser.feed(page)
    return parser.forms


class Headers(dict):
    """Response headers by any spelling of the name; None when absent."""

    def __getitem__(self, name):
        return self.get(name.lower())


@unittest.skipUnless(os.path.isfile(os.path.join(INSTALL, "doku.php")),
                     "DokuWiki not installed (apt-get install dokuwiki)")
class DokuWiki(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        if not phpfpm.find_php_fpm():
            raise unittest.SkipTest("php-fpm not installed (apt-get install php-fpm)")
        cls.tmp = harness.temp_dir(name="dokuwiki")
        cls.wiki = os.path.join(cls.tmp, "wiki")
        conf = os.path.join(cls.tmp, "conf")
        cls.data = os.path.join(cls.tmp, "data")
        # The code as installed (Debian's lib/tpl and lib/plugins stay links into /var/lib).
        shutil.copytree(INSTALL, cls.wiki, symlinks=True)
        shutil.copytree(CONF, conf, symlinks=False)
        shutil.copytree(DATA, cls.data, symlinks=True)
        with open(os.path.join(cls.wiki, "inc", "preload.php"), "w") as f:
            f.write("<?php\nif (!defined('DOKU_CONF')) define('DOKU_CONF', '%s/');\n" % conf)
        with open(os.path.join(conf, "local.php"), "a") as f:
            f.write("\n$conf['savedir'] = '%s';\n" % cls.data)
            f.write("$conf['userewrite'] = 1;\n")  # pretty URLs, by the server's rewrite
            f.write("$conf['xsendfile'] = 2;\n")   # media through X-Sendfile
            f.write("$conf['useacl'] = 1;\n$conf['superuser'] = '@admin';\n")
        with open(os.path.join(conf, "users.auth.php"), "w") as f:
            f.write("%s:%s:Lepus Tester:lepus@example.org:admin,user\n"
                    % (USER, hashlib.md5(PASSWORD.encode()).hexdigest()))
        with open(os.path.join(conf, "acl.auth.php"), "w") as f:
            f.write("*\t@ALL\t1\n*\t@user\t8\n")
        cls.fpm, cls.server = phpfpm.start_site(cls, [
            "--symlinks", "follow", "--index", "doku.php",
            "--try-files", "$uri $uri/ /doku.php?id=$uri&$args",
            "--x-accel", "/_media/=" + os.path.join(cls.data, "media")],
            children=4, root=cls.wiki)
        # The URL DokuWiki builds from HTTP_HOST and HTTPS.
        cls.base = cls.server.url("")
        cls.cookies = {}

    @classmethod
    def tearDownClass(cls):
        harness.remove_temp_dir(cls.tmp)

    def open(self, path, form=None):
        """A browser's request: the cookies kept, a redirect followed (a POST's
        as a GET, RFC 9110 §15.4.4). Returns (status, Headers, body)."""
        method, body = ("POST", urllib.parse.urlencode(form)) if form is not None else ("GET", None)
        for _ in range(5):
            headers = ["Host: " + urllib.parse.urlsplit(self.base).netloc]
            if body is not None:
                headers.append("Content-Type: application/x-www-form-urlencoded")
            if self.cookies:
                headers.append("Cookie: " + "; ".join("%s=%s" % c for c in self.cookies.items()))
            response = self.server.fetch(path, headers=headers, method=method, body=body)
            self.keep_cookies(response)
            location = response.header("location")
            if response.status not in (301, 302, 303, 307) or not location:
                return response.status, Headers(response.headers), response.body
            if "://" in location:
                self.assertTrue(location.startswith(self.base + "/"), location)
                location = location[len(self.base):]
            path = location
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None
        self.fail("more than 5 redirects from " + path)

    def keep_cookies(self, response):
        for line in response.header_lines:
            name, _, value = line.partition(":")
            if name.strip().lower() != "set-cookie":
                continue
            pair, _, attributes = value.strip().partition(";")
            key, _, cookie = pair.partition("=")
            if cookie == "deleted" or "expires=thu, 01 jan 1970" in attributes.lower() \
                    or "max-age=0" in attributes.lower().replace(" ", ""):
                self.cookies.pop(key, None)
            else:
                self.cookies[key] = cookie

    def page(self, path, form=None):
        status, _, body = self.open(path, form)
        text = body.decode("utf-8", "replace")
        self.assertEqual(status, 200, text[-2000:])
        self.assertNotIn("Fatal error", text)
        return text

    def log_in(self):
        forms = forms_of(self.page("/start?do=login"))
        login = forms["dw__login"]
        fields = dict(login["fields"], u=USER, p=PASSWORD)
        text = self.page("/start?do=login", fields)
        self.assertIn("Log Out", text)  # logged in: the menu offers a logout

    def test_1_start_page_and_its_assets(self):
        text = self.page("/")
        self.assertIn("DokuWiki", text)
        self.assertIn("/lib/exe/css.php", text)
        status, headers, body = self.open("/lib/exe/css.php?t=dokuwiki")
        self.assertEqual(status, 200)
        self.assertIn("text/css", headers["Content-Type"])
        self.assertGreater(len(body), 1000)
        status, headers, body = self.open("/lib/exe/js.php?t=dokuwiki")
        self.assertEqual(status, 200)
        self.assertIn("javascript", headers["Content-Type"])
        # A template image, under Debian's link lib/tpl -> /var/lib/dokuwiki/lib/tpl.
        status, headers, body = self.open("/lib/tpl/dokuwiki/images/logo.png")
        self.assertEqual((status, headers["Content-Type"]), (200, "image/png"))
        self.assertEqual(body[:8], b"\x89PNG\r\n\x1a\n")

    def test_2_log_in_create_edit_and_view_a_page(self):
        self.log_in()
        for version in ("first", "second"):
            # DokuWiki names revisions by the second: two saves need two seconds.
            time.sleep(1.1 if version == "second" else 0)
            edit = self.page("/lepus_test?do=edit")
            form = forms_of(edit)["dw__editform"]
            fields = dict(form["fields"])
            fields["wikitext"] = ("====== Served by lepus ======\n\nThe %s version, "
                                  "**bold** and a [[start|link]].\n" % version)
            fields["summary"] = version
            fields["do[save]"] = "1"
            self.page("/doku.php?id=lepus_test", fields)
            text = self.page("/lepus_test")
            self.assertIn("Served by lepus", text)
            self.assertIn("The %s version" % version, text)
            self.assertIn("<strong>bold</strong>", text)
        with open(os.path.join(self.data, "pages", "lepus_test.txt")) as f:
            self.assertIn("The second version", f.read())
        revisions = self.page("/lepus_test?do=revisions")
        self.assertIn("first", revisions)
        self.assertIn("second", revisions)
        # The pretty URL's query reaches the script (a revisions view is not the page).
        self.assertIn("Old Revisions", revisions)

    def test_3_media_goes_out_by_x_sendfile(self):
        with open(os.path.join(self.data, "media", "wiki", "dokuwiki-128.png"), "rb") as f:
            logo = f.read()
        status, headers, body = self.open("/lib/exe/fetch.php?media=wiki:dokuwiki-128.png")
        self.assertEqual(status, 200, body[:300])
        self.assertEqual(body, logo)
        self.assertEqual(headers["Content-Type"], "image/png")
        self.assertIsNone(headers["X-Sendfile"])
        # DokuWiki's own path to its media is not public.
        status, _, _ = self.open("/_media/wiki/dokuwiki-128.png")
        self.assertEqual(status, 404)


if __name__ == "__main__":
    harness.main()
