"""docs/MIGRATING.md against the real binary (issue 37), as manpage_test.py
does for the flags: every config key the guide writes as `key = ...` is one
this test knows how to use, and a config using each of them passes `lepus -t`.
A key the guide names that lepus does not have fails here, and so does a key
added to the guide without a line below."""
import os
import pwd
import re
import subprocess
import unittest

import harness
from harness import BINARY

GUIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                     "MIGRATING.md")

# Each key the guide names, as a top-level line or a [[site]] line using it
# ({d}: a scratch folder with www/, files/ and the files they need).
TOP = {
    "listen": 'listen = ["127.0.0.1:0", "https://127.0.0.1:0"]',
    "http2": "http2 = true",
    "include": 'include = ["{d}/sites.d/*.toml"]',
    "fastcgi": 'fastcgi = "127.0.0.1:9000"',  # a site's: { address, ext } (the same reader)
    "fastcgi_params": 'fastcgi_params = {{ APP_ENV = "prod" }}',
    "tls_cert": 'tls_cert = "{cert}"',
    "tls_key": 'tls_key = "{key}"',
    "tls_protocols": 'tls_protocols = "TLSv1.2 TLSv1.3"',
    "tls_ciphers": 'tls_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256"',
    "access_log": 'access_log = "{d}/access.log"',
    "access_log_format": "access_log_format = '$remote_addr \"$request\" $status $request_time'",
    "error_log": 'error_log = "{d}/error.log"',
    "log_level": 'log_level = "warn"',
    "max_body_size": 'max_body_size = "10m"',
    "keepalive_timeout": 'keepalive_timeout = "75s"',
    "real_ip_from": 'real_ip_from = ["10.0.0.0/8"]',
    "proxy_protocol": "proxy_protocol = false",
    "status_allow": 'status_allow = ["127.0.0.0/8"]',
    "max_connections": "max_connections = 1000",
    "threads": "threads = 2",
    "pid_file": 'pid_file = "{d}/lepus.pid"',
    "user": 'user = "{user}"',  # whoever runs the test: no switch to check
}
SITE = {
    "server_names": 'server_names = ["example.test", "*.example.test"]',
    "default": "default = true",
    "root": 'root = "{d}/www"',
    "index": 'index = ["index.php", "index.html"]',
    "try_files": 'try_files = ["$uri", "$uri/", "/index.php?$query_string"]',
    "spa": None,  # one of try_files and spa per site: checked in a second site
    "locations": 'locations = [{{ path = "/files/", root = "{d}/files", handler = "static" }}, '
                 '{{ path = "/robots.txt", exact = true, root = "{d}/files" }}, '
                 '{{ path = "/php/", root = "{d}/files", handler = "fastcgi" }}, '
                 # A location's own keys (the site's readers, the same syntax).
                 '{{ path = "/api/", proxy = {{ address = "127.0.0.1:3000" }} }}, '
                 '{{ path = "/p/", handler = "proxy", proxy = "127.0.0.1:3001" }}, '
                 '{{ path = "/assets/", headers = [{{ name = "X-A", value = "1" }}], '
                 'auth = {{ off = true }}, access = {{ allow = ["10.0.0.0/8"] }}, '
                 'limits = {{ rate = "10r/m", burst = 5 }}, conn_limit = 2, '
                 'try_files = ["$uri", "/index.html"] }}, '
                 '{{ path = "/admin/", auth = {{ realm = "Staff", htpasswd = "{d}/htpasswd" }} }}]',
    "https_redirect": "https_redirect = true",
    "redirects": 'redirects = [{{ from = "/old", to = "/new", status = 301 }}, '
                 '{{ from = "/o/", to = "/n/", prefix = true }}, '
                 "{{ pattern = '^/blog/(\\d+)/(.*)$', to = \"/posts/$1/$2\", status = 302 }}, "
                 "{{ pattern = '^/app/(.*)$', to = \"/index.php?route=$1\", rewrite = true }}]",
    "proxy": 'proxy = {{ address = ["127.0.0.1:3000", "127.0.0.1:3001"], paths = ["/api/"], '
             'host = "app.internal" }}',
    "headers": 'headers = [{{ match = "*.css", name = "Cache-Control", value = "max-age=3600" }}]',
    "compress": "compress = true",
    "auth": 'auth = [{{ paths = ["/admin/"], realm = "Staff", htpasswd = "{d}/htpasswd" }}, '
            '{{ paths = ["/admin/open/"], off = true }}]',
    "access": 'access = [{{ paths = ["/admin/"], allow = ["10.0.0.0/8"], '
              'deny = ["0.0.0.0/0", "::/0"] }}]',
    "limits": 'limits = [{{ paths = ["/wp-login.php"], rate = "10r/m", burst = 5, nodelay = true }}]',
    "conn_limit": "conn_limit = 20",
    "tls": 'tls = {{ cert = "{cert}", key = "{key}" }}',
    "error_page.404": 'error_page.404 = "/404.html"',
    "x_accel": 'x_accel = "/protected/={d}/files"',
    "autoindex": "autoindex = true",
    "symlinks": 'symlinks = "owner"',
}
# Keys of a table the guide writes on their own (`handler = "fastcgi"`): the
# line of the key they belong to must use them.
SUBKEYS = {"exact": "locations", "handler": "locations", "host": "proxy", "prefix": "redirects",
           "pattern": "redirects", "rewrite": "redirects", "ext": "fastcgi"}


def guide_keys(text):
    """The keys written as `key = ...` in the guide's inline code, leaving out
    the nginx column of the table (its first cell)."""
    lepus_text = []
    for line in text.splitlines():
        if line.startswith("|"):
            line = "|".join(line.split("|")[2:])
        lepus_text.append(line)
    return set(re.findall(r"`([a-z][a-z0-9_]*(?:\.\d{3})?) = ", "\n".join(lepus_text)))


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class MigrationGuide(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(GUIDE, encoding="utf-8") as f:
            cls.text = f.read()
        cls.keys = guide_keys(cls.text)

    def test_the_guide_is_parsed(self):
        for key in ("listen", "locations", "redirects", "fastcgi_params", "include",
                    "access_log_format", "error_page.404"):
            self.assertIn(key, self.keys)
        self.assertGreater(len(self.keys), 25)

    def test_every_key_of_the_guide_passes_lepus_t(self):
        unknown = sorted(k for k in self.keys
                         if k not in TOP and k not in SITE and k not in SUBKEYS)
        self.assertEqual(unknown, [], "keys named in MIGRATING.md that this test does not use")
        for key in self.keys & set(SUBKEYS):
            parent = SUBKEYS[key]
            self.assertIn(key + " = ", (TOP.get(parent) or "") + (SITE.get(parent) or ""), key)
        d = harness.temp_dir(self, "guide")
        for folder in ("www", "files", "sites.d", "spa"):
            os.makedirs(os.path.join(d, folder))
        with open(os.path.join(d, "htpasswd"), "w") as f:
            # bcrypt of "secret" (htpasswd -B -b -n alice secret)
            f.write("alice:$2y$05$dYqFVV6P7m3Lx5J1T3eB4uFyb9gYw0kq3kQ2pQmZy0.m8v3Qf5b5W\n")
        with open(os.path.join(d, "sites.d", "extra.toml"), "w") as f:
            f.write('[[site]]\nserver_names = ["extra.test"]\nroot = "%s/www"\n' % d)
        cert, key = harness.test_certificate()
        values = {"d": d, "cert": cert, "key": key, "user": pwd.getpwuid(os.getuid()).pw_name}
        top = [TOP[k].format(**values) for k in sorted(self.keys & set(TOP))
               if TOP[k] and k not in SITE]
        site = [SITE[k].format(**values) for k in sorted(self.keys & set(SITE)) if SITE[k]]
        config = "\n".join(top) + "\n\n[[site]]\n" + "\n".join(site) + "\n"
        config += '\n[[site]]\nserver_names = ["spa.test"]\nroot = "%s/spa"\nspa = true\n' % d
        path = os.path.join(d, "lepus.toml")
        with open(path, "w") as f:
            f.write(config)
        result = subprocess.run([BINARY, "-t", "--config", path], capture_output=True, text=True,
                                timeout=30, cwd="/")
        self.assertEqual(result.returncode, 0, result.stderr + "\n" + config)


if __name__ == "__main__":
    harness.main()
