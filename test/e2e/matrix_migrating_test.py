"""Migrating from nginx (issue 37) in the protocol matrix: what an nginx
config does that lepus now does too, every request through
harness.Lepus.fetch() over HTTP/1.1, HTTP/2 over TLS and h2c, in front of a
real php-fpm.

fastcgi_params (nginx's fastcgi_param): the global table and a site's own on
top of it, seen by PHP in $_SERVER (SERVER_SOFTWARE = "nginx" is what
WordPress asks before it offers pretty permalinks).

migrating_config_test.py keeps what is not about requests (includes, -t,
reload, the guide's keys). Needs php-fpm."""
import json
import os
import shutil
import textwrap
import unittest

import harness
import phpfpm

HERE = os.path.dirname(os.path.abspath(__file__))


class MatrixMigrating(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binary()
        cls.dir = harness.temp_dir(cls, name="matrix-migrating")
        for site in ("wp", "plain"):
            os.makedirs(os.path.join(cls.dir, site))
            shutil.copy(os.path.join(HERE, "php", "env.php"), os.path.join(cls.dir, site))
        config = os.path.join(cls.dir, "lepus.toml")

        def write_config(address):
            with open(config, "w") as f:
                f.write(textwrap.dedent("""\
                    fastcgi = "{fpm}"
                    fastcgi_params = {{ APP_ENV = "prod", APP_REGION = "eu" }}

                    [[site]]
                    server_names = ["wp.test"]
                    root = "{d}/wp"
                    fastcgi_params = {{ SERVER_SOFTWARE = "nginx", APP_ENV = "staging", HTTP_HOST = "canonical.test" }}

                    [[site]]
                    server_names = ["plain.test"]
                    root = "{d}/plain"
                    """).format(d=cls.dir, fpm=address))
            return ["--config", config]
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=4, fastcgi=False)

    def fetch(self, host, path, *headers, **kwargs):
        return self.server.fetch(path, headers=["Host: " + host] + list(headers), **kwargs)

    def env(self, host, path="/env.php"):
        response = self.fetch(host, path)
        self.assertEqual(response.status, 200, response.body)
        return json.loads(response.body)

    # --- fastcgi_params -------------------------------------------------------

    def test_a_site_overrides_server_software_and_the_global_parameters(self):
        env = self.env("wp.test")
        self.assertEqual(env["SERVER_SOFTWARE"], "nginx")
        self.assertEqual(env["APP_ENV"], "staging")  # the site's wins over the global
        self.assertEqual(env["APP_REGION"], "eu")    # the global one is kept
        self.assertEqual(env["HTTP_HOST"], "canonical.test")
        self.assertEqual(env["SCRIPT_NAME"], "/env.php")  # the others are untouched

    def test_a_site_without_its_own_gets_the_global_parameters(self):
        env = self.env("plain.test")
        self.assertTrue(env["SERVER_SOFTWARE"].startswith("lepus/"), env["SERVER_SOFTWARE"])
        self.assertEqual(env["APP_ENV"], "prod")
        self.assertEqual(env["APP_REGION"], "eu")
        self.assertEqual(env["HTTP_HOST"], "plain.test")


if __name__ == "__main__":
    harness.main()
