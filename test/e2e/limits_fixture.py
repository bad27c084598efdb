"""The set-up the per-client limit tests share (issue 35): a lepus behind a
trusted proxy (real_ip_from 127.0.0.1), so that one test process plays many
clients by naming them in X-Forwarded-For, as a load balancer in front of
lepus would; its config file in a temp dir of the test class, and php-fpm in
front of which it runs when the site has scripts. Used by limits_test.py,
matrix_limits_test.py and matrix_fail2ban_test.py."""
import os

import harness
import phpfpm

TRUSTED_PROXY = 'real_ip_from = ["127.0.0.1"]\n'


def site_dir(cls, name):
    """Sets cls.dir, a temp dir removed after the class, and cls.root, its www/."""
    harness.require_binary()
    cls.dir = harness.temp_dir(cls, name=name)
    cls.root = os.path.join(cls.dir, "www")


def start_behind_proxy(cls, config, args=(), php=True, **lepus_kwargs):
    """Writes cls.dir/lepus.toml, TRUSTED_PROXY and then config(address) (the
    TOML of the rest: address is php-fpm's, or None without php), and sets
    cls.server to a lepus serving cls.root with it (and cls.fpm to a php-fpm of
    two children with php). Both are stopped by the class's cleanups."""
    path = os.path.join(cls.dir, "lepus.toml")

    def write_config(address=None):
        with open(path, "w") as f:
            f.write(TRUSTED_PROXY + config(address))
        return ["--config", path] + list(args)
    if php:
        cls.fpm, cls.server = phpfpm.start_site(cls, write_config, children=2, fastcgi=False,
                                                root=cls.root, **lepus_kwargs)
    else:
        cls.server = harness.Lepus(write_config(), root=cls.root, **lepus_kwargs)
        cls.addClassCleanup(cls.server.stop, harness.LepusTestCase._Checker())


def forwarded_for(client, *headers):
    """Request headers naming `client` as the trusted proxy would, then `headers`."""
    return ["X-Forwarded-For: " + client] + list(headers)
