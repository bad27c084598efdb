"""WordPress from Debian's packages (`wordpress`, its default theme
`wordpress-theme-twentytwentythree`, `mariadb-server`, `php-mysql`) through
lepus + php-fpm over https, as its users meet it: HTTP/2 to headless Chromium
and to curl (issue 31: over https every page was Debian's 404, because PHP got
no HTTP_HOST from an HTTP/2 request, and Debian's wp-config.php picks the
blog's configuration by that host).

Nothing of the host's WordPress is used or touched: /usr/share/wordpress and
/var/lib/wordpress/wp-content are copied to a scratch folder, the copy's
wp-config.php is Debian's with its configuration folder (/etc/wordpress) moved
there too, and the site's root is what docs/APPLICATIONS.md tells a user to
make: links to the package's files, and wp-content linked to the content
folder (what Debian's Apache configuration does with an Alias). The database
is a mariadbd of the test's own (data and socket in the scratch folder, no
network). WordPress is installed through its own form, over HTTP/2.

What lepus needs: `--symlinks follow` (for the root's links, and Debian's own:
wp-includes/js/underscore.min.js and friends link to /usr/share/javascript, the
theme to /usr/share/wordpress/wp-content) and
`--try-files '$uri $uri/ /index.php?$args'` for the pretty permalinks."""
import glob
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import harness
import phpfpm

INSTALL = "/usr/share/wordpress"
CONTENT = "/var/lib/wordpress/wp-content"
THEME = os.path.join(INSTALL, "wp-content", "themes", "twentytwentythree")
UNDERSCORE = "/usr/share/javascript/underscore/underscore.min.js"
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
MARIADB = shutil.which("mariadb") or "/usr/bin/mariadb"
CHROMIUM = shutil.which("chromium")
PACKAGES = "wordpress wordpress-theme-twentytwentythree mariadb-server php-mysql chromium"
TITLE = "Lepus on the Carrot Patch"
USER, PASSWORD = "lepus", "carrot-and-stick"
DB_PASSWORD = "burrow"


def missing_packages():
    """What is missing of what the test drives: the test fails naming it (scripts/setup
    --test installs these; a skip would pass a machine that cannot run it)."""
    needed = [os.path.join(INSTALL, "wp-settings.php"), CONTENT, THEME, UNDERSCORE,
              MARIADBD, INSTALL_DB, MARIADB]
    missing = [path for path in needed if not os.path.exists(path)]
    if not CHROMIUM:
        missing.append("chromium")
    if not phpfpm.find_php_fpm():
        missing.append("php-fpm")
    elif not glob.glob("/etc/php/*/mods-available/mysqli.ini"):
        missing.append("php's mysqli (php-mysql)")
    return missing


def copy_with_links(source, target):
    """Copies a tree keeping its symbolic links, each pointing where it pointed in
    `source` (Debian's relative links out of the package stay links out of the copy)."""
    shutil.copytree(source, target, symlinks=True)
    for folder, dirs, files in os.walk(target):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path) and not os.path.isabs(os.readlink(path)):
                original = os.path.join(source, os.path.relpath(folder, target))
                absolute = os.path.normpath(os.path.join(original, os.readlink(path)))
                os.unlink(path)
                os.symlink(absolute, path)


class MariaDB:
    """A mariadbd of its own in `folder`: fresh data, a Unix socket, no TCP, no
    option files of the host (--no-defaults)."""

    def __init__(self, folder):
        self.folder = folder
        self.socket = os.path.join(folder, "mysqld.sock")
        data = os.path.join(folder, "data")
        self.log = os.path.join(folder, "mariadb.log")
        user = ["--user=root"] if os.geteuid() == 0 else []
        with open(self.log, "w") as log:
            subprocess.run([INSTALL_DB, "--no-defaults", "--datadir=" + data, "--skip-test-db",
                            "--auth-root-authentication-method=normal"] + user,
                           stdout=log, stderr=subprocess.STDOUT, check=True, timeout=60)
        self.proc = subprocess.Popen(
            [MARIADBD, "--no-defaults", "--datadir=" + data, "--socket=" + self.socket,
             "--skip-networking", "--pid-file=" + os.path.join(folder, "mariadb.pid"),
             "--log-error=" + self.log, "--innodb-buffer-pool-size=32M"] + user,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket) or self.sql("SELECT 1").returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("mariadbd did not start: " + self.log_text()[-2000:])
            time.sleep(0.1)

    def sql(self, statements):
        return subprocess.run([MARIADB, "--no-defaults", "--socket=" + self.socket, "-uroot",
                               "-e", statements], capture_output=True, text=True, timeout=30)

    def log_text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Answer:
    def __init__(self, status, headers, body, version):
        self.status, self.headers, self.body, self.version = status, headers, body, version
        self.text = body.decode("utf-8", "replace")


class WordPressOverHttps(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        missing = missing_packages()
        if missing:
            raise AssertionError("missing: %s (scripts/setup --test installs them: "
                                 "apt-get install %s)" % (", ".join(missing), PACKAGES))
        cls.tmp = harness.temp_dir(name="wordpress")
        try:
            cls.set_up_blog()
        except BaseException:
            cls.tear_down()
            raise

    @classmethod
    def set_up_blog(cls):
        cls.fpm = cls.server = cls.db = None
        cls.db = MariaDB(cls.tmp)
        done = cls.db.sql("CREATE DATABASE wordpress; CREATE USER 'wordpress'@'localhost' "
                          "IDENTIFIED BY '%s'; GRANT ALL ON wordpress.* TO "
                          "'wordpress'@'localhost';" % DB_PASSWORD)
        if done.returncode != 0:
            raise AssertionError("creating the database: " + done.stderr)
        # Stand-ins for /usr/share/wordpress (the package's code, its links
        # included) and /var/lib/wordpress/wp-content (the blog's content, the
        # theme a link back into /usr/share).
        cls.package = os.path.join(cls.tmp, "wordpress")
        copy_with_links(INSTALL, cls.package)
        os.unlink(os.path.join(cls.package, ".htaccess"))  # a link to /etc/wordpress/htaccess
        content = os.path.join(cls.tmp, "wp-content")
        copy_with_links(CONTENT, content)
        # The site's root as docs/APPLICATIONS.md has it: links to the package's
        # files, and /wp-content to the content folder (Debian's Apache Alias).
        cls.root = os.path.join(cls.tmp, "site")
        os.mkdir(cls.root)
        for name in os.listdir(cls.package):
            if name != "wp-content":
                os.symlink(os.path.join(cls.package, name), os.path.join(cls.root, name))
        os.symlink(content, os.path.join(cls.root, "wp-content"))
        # Debian's wp-config.php, reading its configuration from our folder.
        conf = os.path.join(cls.tmp, "etc-wordpress")
        os.mkdir(conf)
        config = os.path.join(cls.package, "wp-config.php")
        with open(config) as f:
            text = f.read()
        if text.count("/etc/wordpress/") < 4:
            raise AssertionError("Debian's wp-config.php changed: " + text[:1000])
        with open(config, "w") as f:
            f.write(text.replace("/etc/wordpress/", conf + "/"))
        # config-HOST.php, as README.Debian says, for the host the blog is reached at.
        with open(os.path.join(conf, "config-127.0.0.1.php"), "w") as f:
            f.write("\n".join([
                "<?php",
                "define('DB_NAME', 'wordpress');",
                "define('DB_USER', 'wordpress');",
                "define('DB_PASSWORD', '%s');" % DB_PASSWORD,
                "define('DB_HOST', 'localhost:%s');" % cls.db.socket,
                "define('WP_CONTENT_DIR', '%s');" % content,
                # The test talks to no one else: no update checks, no cron requests.
                "define('WP_HTTP_BLOCK_EXTERNAL', true);",
                "define('DISABLE_WP_CRON', true);",
                ""]))
        cls.fpm = phpfpm.PhpFpm(children=4)
        cls.server = harness.Lepus(root=cls.root, protocol="h2", args=[
            "--fastcgi", cls.fpm.address, "--symlinks", "follow",
            "--try-files", "$uri $uri/ /index.php?$args"])
        cls.base = "https://127.0.0.1:%d" % cls.server.tls_port
        cls.jar = os.path.join(cls.tmp, "cookies.txt")
        # Installed through its form (install.php, step 2), over HTTP/2.
        answer = cls.curl("/wp-admin/install.php?step=2", form={
            "weblog_title": TITLE, "user_name": USER, "admin_password": PASSWORD,
            "admin_password2": PASSWORD, "pw_weak": "on", "admin_email": "lepus@example.org",
            "blog_public": "0", "Submit": "Install WordPress", "language": ""})
        if answer.status != 200 or "Success!" not in answer.text:
            raise AssertionError("WordPress's installation over HTTP/2 answered %d:\n%s\n%s" % (
                answer.status, answer.text[-3000:], cls.fpm.log()[-2000:]))

    @classmethod
    def tearDownClass(cls):
        cls.tear_down()

    @classmethod
    def tear_down(cls):
        try:
            if getattr(cls, "server", None):
                cls.server.stop(harness.LepusTestCase._Checker())
        finally:
            if getattr(cls, "fpm", None):
                cls.fpm.cleanup()
            if getattr(cls, "db", None):
                cls.db.stop()
            harness.remove_temp_dir(cls.tmp)

    @classmethod
    def curl(cls, path, form=None, headers=(), compressed=False, base=None):
        """One request over HTTP/2 with the session's cookie jar, as a browser would."""
        with tempfile.TemporaryDirectory(prefix="lepus-curl-") as scratch:
            head, body = os.path.join(scratch, "head"), os.path.join(scratch, "body")
            cmd = [harness.CURL, "-s", "-S", "--http2", "-k", "--max-time", "30",
                   "-b", cls.jar, "-c", cls.jar, "-D", head, "-o", body,
                   "-w", "%{http_version}"] + (["--compressed"] if compressed else [])
            for line in headers:
                cmd += ["-H", line]
            if form is not None:
                cmd += ["--data-binary", urllib.parse.urlencode(form)]
            done = subprocess.run(cmd + [(base or cls.base) + path], capture_output=True,
                                  timeout=60)
            if done.returncode != 0:
                raise AssertionError("curl %s: %s" % (path, done.stderr.decode(errors="replace")))
            with open(head, "rb") as f:
                lines = f.read().decode("latin-1").strip().split("\r\n")
            content = b""
            if os.path.exists(body):
                with open(body, "rb") as f:
                    content = f.read()
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        return Answer(int(lines[0].split()[1]), fields, content, done.stdout.decode().strip())

    def chromium(self, path):
        """The DOM headless Chromium builds from `path` over https (HTTP/2 by ALPN);
        every other host resolves to nothing (the theme's and emoji's CDNs)."""
        profile = harness.temp_dir(self, "chromium")
        done = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--ignore-certificate-errors",
             "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             "--user-data-dir=" + profile, "--dump-dom", self.base + path],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr[-2000:])
        return done.stdout

    def assert_chromium_got(self, path, status=200):
        """Chromium's request for `path` is in the access log, over HTTP/2."""
        wanted = '"GET %s HTTP/2.0" %d' % (path, status)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lines = self.server.access_lines()
            if any(wanted in line and "Chrome" in line for line in lines):
                return
            time.sleep(0.1)
        self.fail("no %s from Chromium in the access log:\n%s" % (wanted, "\n".join(lines[-20:])))

    def log_in(self):
        self.curl("/wp-login.php")  # WordPress's test cookie, as a browser gets it first
        answer = self.curl("/wp-login.php", form={
            "log": USER, "pwd": PASSWORD, "wp-submit": "Log In", "testcookie": "1",
            "redirect_to": self.base + "/wp-admin/"})
        self.assertEqual(answer.status, 302, answer.text[-2000:])
        self.assertEqual(answer.headers.get("location"), self.base + "/wp-admin/")
        return answer

    def test_1_front_page_in_chromium(self):
        dom = self.chromium("/")
        self.assert_chromium_got("/")
        self.assertIn("<title>%s</title>" % TITLE, dom)
        self.assertIn("Hello world!", dom)  # the first post, with its link
        self.assertIn('href="%s/?p=1"' % self.base, dom)
        self.assertNotIn("could be found", dom)  # Debian's 404: no config for this host
        # The theme's style sheet, behind Debian's link into /usr/share/wordpress.
        answer = self.curl("/wp-content/themes/twentytwentythree/style.css")
        self.assertEqual(answer.status, 200)
        self.assertTrue(answer.headers.get("content-type", "").startswith("text/css"),
                        answer.headers)
        self.assertEqual(answer.version, "2")

    def test_2_log_in_and_the_admin_scripts(self):
        self.log_in()
        answer = self.curl("/wp-admin/")
        self.assertEqual(answer.status, 200, answer.text[-2000:])
        self.assertEqual(answer.version, "2")
        self.assertIn("Dashboard", answer.text)
        self.assertIn("Howdy, <span class=\"display-name\">%s</span>" % USER, answer.text)
        # Its scripts: underscore is Debian's link into /usr/share/javascript.
        scripts = re.findall(r"src='(%s/wp-includes/js/underscore\.min\.js[^']*)'"
                             % re.escape(self.base), answer.text)
        if not scripts:  # concatenated by load-scripts.php: ask for it as the page would
            scripts = [self.base + "/wp-includes/js/underscore.min.js"]
        answer = self.curl(scripts[0][len(self.base):], compressed=True)
        self.assertEqual(answer.status, 200)
        self.assertEqual(answer.version, "2")
        self.assertIn("javascript", answer.headers.get("content-type", ""))
        with open(UNDERSCORE, "rb") as f:
            underscore = f.read()
        self.assertTrue(answer.body == underscore, answer.body[:200])
        # The admin's concatenated scripts (a PHP that reads those links too).
        answer = self.curl("/wp-admin/load-scripts.php?c=0&load%5Bchunk_0%5D=jquery-core,"
                           "underscore&ver=6.1.9", compressed=True)
        self.assertEqual(answer.status, 200, answer.text[-1000:])
        self.assertIn("javascript", answer.headers.get("content-type", ""))
        self.assertTrue(underscore.strip() in answer.body, answer.body[:200])

    def test_3_pretty_permalinks_through_try_files(self):
        self.log_in()
        form = self.curl("/wp-admin/options-permalink.php")
        self.assertEqual(form.status, 200, form.text[-2000:])
        nonce = re.search(r'name="_wpnonce" value="([0-9a-f]+)"', form.text)
        self.assertIsNotNone(nonce, form.text[-2000:])
        answer = self.curl("/wp-admin/options-permalink.php", form={
            "_wpnonce": nonce.group(1), "_wp_http_referer": "/wp-admin/options-permalink.php",
            "selection": "custom", "permalink_structure": "/%postname%/",
            "category_base": "", "tag_base": "", "submit": "Save Changes"})
        self.assertEqual(answer.status, 302, answer.text[-2000:])
        # The front page links the post by its new name; Chromium follows it.
        dom = self.chromium("/")
        self.assertIn('href="%s/hello-world/"' % self.base, dom)
        dom = self.chromium("/hello-world/")
        self.assert_chromium_got("/hello-world/")
        self.assertIn("Welcome to WordPress. This is your first post.", dom)
        self.assertNotIn("error404", dom)
        # A name that is no post is WordPress's own 404 page, still through index.php.
        answer = self.curl("/no-such-post/")
        self.assertEqual(answer.status, 404)
        self.assertIn("error404", answer.text)

    def test_4_feed_answers_304_to_its_etag_over_compression(self):
        first = self.curl("/?feed=rss2", compressed=True)
        self.assertEqual(first.status, 200, first.text[-1000:])
        self.assertEqual(first.version, "2")
        self.assertIn("<title>%s</title>" % TITLE, first.text)
        etag = first.headers.get("etag")
        self.assertIsNotNone(etag, first.headers)
        # Compressed as it streams: lepus weakens the script's ETag (W/"...").
        self.assertIn(first.headers.get("content-encoding"), ("br", "zstd", "gzip"))
        self.assertTrue(etag.startswith('W/"'), etag)
        again = self.curl("/?feed=rss2", headers=["If-None-Match: " + etag], compressed=True)
        self.assertEqual(again.status, 304, again.text[-1000:])
        self.assertEqual(again.body, b"")

    def test_5_without_symlinks_follow_debians_links_are_refused_plainly(self):
        """The package's folder as the root, with the default --symlinks beneath:
        Debian's links out of it are refused with a 403 and a log line naming
        the option, not handed to index.php (whose answer for a script URL is a
        redirect or WordPress's 404 page)."""
        server = harness.Lepus(root=self.package, protocol="h2", args=[
            "--fastcgi", self.fpm.address, "--try-files", "$uri $uri/ /index.php?$args"])
        try:
            base = "https://127.0.0.1:%d" % server.tls_port
            answer = self.curl("/wp-includes/js/underscore.min.js", base=base)
            self.assertEqual(answer.status, 403, answer.text[-1000:])
            self.assertNotIn("error404", answer.text)
            deadline = time.monotonic() + 5
            while "--symlinks" not in server.error_log_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertIn("underscore.min.js", server.error_log_text())
            self.assertIn("--symlinks follow or owner allows it", server.error_log_text())
            # The scripts themselves are no links: the blog still answers.
            self.assertEqual(self.curl("/?feed=rss2", base=base).status, 200)
        finally:
            server.stop(self)

    def test_6_the_recipe_with_a_location_and_server_software(self):
        """docs/APPLICATIONS.md's config-file recipe (issue 37): the package's
        folder itself as the root (no folder of links), /wp-content/ a location
        with the content folder as its root (Debian's Apache Alias), and
        SERVER_SOFTWARE = "nginx" through fastcgi_params, so that WordPress
        offers its pretty permalinks instead of /index.php/ ones. Started on
        the same https port, so the blog's URLs stay its own."""
        before = self.curl_logged_in("/wp-admin/options-permalink.php")
        self.assertIn("/index.php/", before.text)  # lepus/x.y is no server WordPress knows
        port = self.server.tls_port
        self.server.stop(self)
        type(self).server = None
        content = os.path.join(self.tmp, "wp-content")
        config = os.path.join(self.tmp, "lepus.toml")
        with open(config, "w") as f:
            f.write(RECIPE.format(fpm=self.fpm.address, root=self.package, content=content))
        cert, key = harness.test_certificate()
        type(self).server = harness.Lepus(root=self.package, protocol="h1", args=[
            "--listen", "https://127.0.0.1:%d" % port, "--tls-cert", cert, "--tls-key", key,
            "--config", config])
        after = self.curl_logged_in("/wp-admin/options-permalink.php")
        self.assertEqual(after.status, 200, after.text[-2000:])
        self.assertNotIn("/index.php/", after.text)
        # Uploads and the theme come from the content folder, through the location.
        upload = os.path.join(content, "uploads", "2026", "11", "carrot.png")
        os.makedirs(os.path.dirname(upload), exist_ok=True)
        with open(upload, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n carrot")
        answer = self.curl("/wp-content/uploads/2026/11/carrot.png")
        self.assertEqual((answer.status, answer.body), (200, b"\x89PNG\r\n\x1a\n carrot"))
        self.assertEqual(answer.headers.get("content-type"), "image/png")
        style = self.curl("/wp-content/themes/twentytwentythree/style.css")
        self.assertEqual(style.status, 200)
        self.assertIn(b"Twenty Twenty-Three", style.body)
        # Content's PHP files are not run nor shown there; a missing upload is a 404.
        self.assertEqual(self.curl("/wp-content/index.php").status, 403)
        self.assertEqual(self.curl("/wp-content/uploads/none.png").status, 404)
        # The pretty permalink of test_3 still goes to index.php through try_files.
        dom = self.chromium("/hello-world/")
        self.assertIn("Welcome to WordPress. This is your first post.", dom)

    def curl_logged_in(self, path):
        self.log_in()
        return self.curl(path)


# docs/APPLICATIONS.md's WordPress recipe, with the test's folders.
RECIPE = """\
fastcgi = "{fpm}"

[[site]]
server_names = ["127.0.0.1"]
root = "{root}"
symlinks = "follow"
try_files = ["$uri", "$uri/", "/index.php?$args"]
locations = [{{ path = "/wp-content/", root = "{content}" }}]
fastcgi_params = {{ SERVER_SOFTWARE = "nginx" }}
"""


if __name__ == "__main__":
    harness.main()
