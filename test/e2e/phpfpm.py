"""Starts a real php-fpm with its own generated configuration, for FastCGI tests.

    with PhpFpm(children=4, tcp=False) as fpm:           # pm = static
    with PhpFpm(children=5, pm="dynamic", start_servers=2,
                min_spare=1, max_spare=3) as fpm:        # Debian's www.conf
        fpm.address   # "unix:/tmp/.../php.sock" or "127.0.0.1:PORT"
        fpm.restart()
    # stop() on exit: SIGQUIT (graceful), then SIGKILL if it does not go.

    fpm, server = start_site(cls_or_test, ["--try-files", "..."], children=4)

start_site() is the set-up most FastCGI tests share: a php-fpm, a lepus in
front of it (`--fastcgi ADDRESS`, or args made from the address by a function
for a config file that names it), and their stops registered as
cleanups of the test or class (lepus first, with the sanitizer and exit-code
check of harness.Lepus.stop, then php-fpm).

Everything lives in a fresh temporary directory: the config, the pid file, the
error log (workers' output is caught into it: catch_workers_output). As root,
php-fpm refuses to start without -R (--allow-to-run-as-root). The binary comes
from $PHP_FPM, else the first of php-fpm8.2 / php-fpm found on PATH or in
/usr/sbin; find_php_fpm() returns None when there is none (Debian: apt-get
install php-fpm).
"""
import os
import shutil
import signal
import socket
import subprocess
import time

import harness

PHP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "php")


def find_php_fpm():
    candidates = [os.environ.get("PHP_FPM", "")]
    for name in ("php-fpm8.2", "php-fpm"):
        candidates.append(shutil.which(name) or "")
        candidates.append(os.path.join("/usr/sbin", name))
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def can_connect(address):
    try:
        if address.startswith("unix:"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target = address[5:]
        else:
            host, port = address.rsplit(":", 1)
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (host, int(port))
        with s:
            s.settimeout(1)
            s.connect(target)
        return True
    except OSError:
        return False


class PhpFpm:
    """One running php-fpm master with a pool of `children` workers: static by
    default, or pm = "dynamic" (start_servers, min_spare and max_spare children)
    or "ondemand"."""

    def __init__(self, children=4, tcp=False, binary=None, pm="static", start_servers=2,
                 min_spare=1, max_spare=3):
        self.binary = binary or find_php_fpm()
        if not self.binary:
            raise RuntimeError("php-fpm not found (apt-get install php-fpm, or set PHP_FPM)")
        self.children = children
        self.tmp = harness.temp_dir(name="phpfpm")
        self.config = os.path.join(self.tmp, "php-fpm.conf")
        self.error_log = os.path.join(self.tmp, "php-fpm.log")
        self.pid_file = os.path.join(self.tmp, "php-fpm.pid")
        if tcp:
            self.address = "127.0.0.1:%d" % free_port()
            listen = self.address
        else:
            listen = os.path.join(self.tmp, "php.sock")
            self.address = "unix:" + listen
        with open(self.config, "w") as f:
            f.write("\n".join([
                "[global]",
                "pid = %s" % self.pid_file,
                "error_log = %s" % self.error_log,
                "daemonize = no",
                "",
                "[lepus-test]",
                "listen = %s" % listen,
                "listen.mode = 0666",
                "pm = %s" % pm,
                "pm.max_children = %d" % children,
            ] + ([
                "pm.start_servers = %d" % start_servers,
                "pm.min_spare_servers = %d" % min_spare,
                "pm.max_spare_servers = %d" % max_spare,
            ] if pm == "dynamic" else []) + [
                "clear_env = no",
                "catch_workers_output = yes",
                "decorate_workers_output = no",
                "",
            ]))
        self.proc = None
        self.start()

    def start(self):
        cmd = [self.binary, "--nodaemonize", "--fpm-config", self.config]
        if os.geteuid() == 0:
            cmd.append("--allow-to-run-as-root")
        self.output = open(os.path.join(self.tmp, "stdout.txt"), "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while not can_connect(self.address):
            if self.proc.poll() is not None:
                raise RuntimeError("php-fpm exited with %s: %s" % (self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("php-fpm did not listen on %s: %s" % (self.address, self.log()))
            time.sleep(0.05)

    def stop(self):
        """Stops php-fpm gracefully (SIGQUIT), then forcibly; returns its exit code."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.output.close()
        return proc.returncode

    def restart(self):
        self.stop()
        self.start()

    def log(self):
        text = ""
        for name in ("php-fpm.log", "stdout.txt"):
            path = os.path.join(self.tmp, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f.read()
        return text

    def cleanup(self):
        self.stop()
        harness.remove_temp_dir(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()


def start_site(owner, args=(), children=4, tcp=False, fastcgi=True, **lepus_kwargs):
    """Starts a php-fpm and a harness.Lepus in front of it; returns (fpm, server).
    `owner` is a TestCase class (from setUpClass: addClassCleanup) or a TestCase
    (addCleanup). `args` may be a function of the php-fpm address, for a config
    file that names it; fastcgi=False then leaves out `--fastcgi ADDRESS`. The
    cleanups stop lepus (failing on a sanitizer report or a bad exit code), then
    php-fpm, even when the other fails or lepus did not start."""
    if not find_php_fpm():
        raise AssertionError("php-fpm is needed (apt-get install php-fpm, or set PHP_FPM)")
    add_cleanup = owner.addClassCleanup if isinstance(owner, type) else owner.addCleanup
    fpm = PhpFpm(children=children, tcp=tcp)
    add_cleanup(fpm.cleanup)  # runs last: cleanups are last in, first out
    if callable(args):
        args = args(fpm.address)
    args = (["--fastcgi", fpm.address] if fastcgi else []) + list(args)
    server = harness.Lepus(args, **lepus_kwargs)
    checker = owner if not isinstance(owner, type) else harness.LepusTestCase._Checker()
    add_cleanup(server.stop, checker)
    return fpm, server
