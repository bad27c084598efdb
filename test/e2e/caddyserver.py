"""Debian's Caddy 2.6 serving a folder over HTTPS and HTTP/3 on one port: the
HTTP/3 peer the h3 test fixtures are checked against until lepus serves h3
(issue 39; nginx 1.22 and h2o 2.2.5 in Debian 12 do not speak it).

    caddy = caddyserver.Caddy(root)        # unittest.SkipTest without caddy
    caddy.url("/x")                         # https://127.0.0.1:PORT/x
    caddy.stop()
"""
import os
import shutil
import subprocess
import time
import unittest

import harness

CADDY = shutil.which("caddy")
CADDYFILE = """{
\tadmin off
\tauto_https off
\tstorage file_system %(tmp)s/data
\tservers {
\t\tprotocols h1 h2 h3
\t}
}
https://127.0.0.1:%(port)d {
\tbind 127.0.0.1
\ttls %(cert)s %(key)s
\troot * %(root)s
\tfile_server
}
"""


class Caddy:
    """One caddy process on 127.0.0.1:port, TCP (h1, h2) and UDP (h3), with the
    tests' certificate; `preexec` runs in the child before exec (to enter a
    network namespace: lossy_net.LossyNamespace.enter)."""

    def __init__(self, root, preexec=None):
        if not CADDY:
            raise unittest.SkipTest("caddy is missing (apt-get install caddy, or "
                                    "scripts/install-h3-clients)")
        cert, key = harness.test_certificate()
        self.tmp = harness.temp_dir(name="caddy")
        self.port = harness.free_tcp_and_udp_port()
        config = os.path.join(self.tmp, "Caddyfile")
        with open(config, "w") as f:
            f.write(CADDYFILE % {"tmp": self.tmp, "port": self.port, "cert": cert, "key": key,
                                 "root": root})
        self.log_path = os.path.join(self.tmp, "caddy.log")
        env = dict(os.environ, HOME=self.tmp, XDG_DATA_HOME=self.tmp, XDG_CONFIG_HOME=self.tmp)
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([CADDY, "run", "--config", config, "--adapter",
                                          "caddyfile"], stdout=log, stderr=subprocess.STDOUT,
                                         env=env, preexec_fn=preexec)
        deadline = time.monotonic() + 30
        while "serving initial configuration" not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("caddy did not start: " + self.log()[-2000:])
            time.sleep(0.1)

    def url(self, path):
        return "https://127.0.0.1:%d%s" % (self.port, path)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        harness.remove_temp_dir(self.tmp)
