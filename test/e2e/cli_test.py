"""Command line end to end (issue 7): every flag is validated before lepus
serves anything. A bad value gives exactly one line on stderr, naming the flag
or the value, and exit code 2; a port already in use gives one line naming the
port and exit code 1; --help and --version exit 0. The real binary, run with a
time limit: a flag that is wrongly accepted shows up as a server that starts."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import harness
from harness import BINARY, Lepus, is_closed, read_response


def run(*args, timeout=10):
    """Runs lepus with args; returns (exit code, stdout, stderr). A lepus that
    starts serving instead of refusing its command line is killed and reported
    with exit code None."""
    try:
        done = subprocess.run([BINARY] + list(args), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out, ""
    return done.returncode, done.stdout, done.stderr


class CommandLine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = harness.temp_dir(cls, "cli")
        cls.root = os.path.join(cls.tmp, "www")
        os.mkdir(cls.root)
        cls.file = os.path.join(cls.tmp, "file.txt")
        with open(cls.file, "w") as f:
            f.write("not a directory\n")

    def assert_usage_error(self, args, *needles):
        """lepus ROOT args... must exit 2 with one stderr line holding every needle."""
        code, out, err = run(self.root, "--listen", "127.0.0.1:0", *args, timeout=5)
        self.assertIsNotNone(code, "lepus accepted %r and started serving: %r" % (args, out))
        self.assertEqual(code, 2, "exit code for %r; stderr: %r" % (args, err))
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, "one line on stderr for %r, got %r" % (args, err))
        self.assertTrue(lines[0].startswith("lepus: "), lines[0])
        for needle in needles:
            self.assertIn(needle, lines[0], "for %r" % (args,))
        self.assertEqual(out, "", "nothing on stdout for %r" % (args,))

    # --- sizes ---------------------------------------------------------------
    def test_sizes_must_be_positive_numbers_with_known_units(self):
        for value in ("0", "-5", "0k", "10q", "1.5m", "1m5", "k", "", "99999999999999999999g"):
            with self.subTest(value=value):
                self.assert_usage_error(["--max-body-size", value], "--max-body-size")

    # --- durations -----------------------------------------------------------
    def test_durations_must_be_numbers_with_known_units(self):
        for flag in ("--keepalive-timeout", "--header-timeout", "--body-timeout",
                     "--send-timeout", "--shutdown-timeout"):
            for value in ("-1s", "5x", "1.5s", "s", "10 s"):
                with self.subTest(flag=flag, value=value):
                    self.assert_usage_error([flag, value], flag, value)

    def test_zero_header_and_keepalive_timeouts_are_refused(self):
        for flag in ("--keepalive-timeout", "--header-timeout"):
            with self.subTest(flag=flag):
                self.assert_usage_error([flag, "0"], "greater than zero")

    def test_zero_body_and_send_timeouts_are_refused(self):
        # With 0 every body read or stalled write would time out at once.
        for flag in ("--body-timeout", "--send-timeout"):
            with self.subTest(flag=flag):
                self.assert_usage_error([flag, "0"], "greater than zero")

    # --- numbers and choices -------------------------------------------------
    def test_counts_out_of_range(self):
        for flag, value in (("--threads", "0"), ("--threads", "-1"), ("--threads", "1025"),
                            ("--threads", "abc"), ("--backlog", "0"),
                            ("--max-connections", "0"), ("--keepalive-requests", "0")):
            with self.subTest(flag=flag, value=value):
                self.assert_usage_error([flag, value], flag, value)

    def test_choices(self):
        for flag, value in (("--log-level", "loud"), ("--dotfiles", "maybe"),
                            ("--accept", "sideways"), ("--pin", "maybe")):
            with self.subTest(flag=flag):
                self.assert_usage_error([flag, value], flag, value)

    def test_notsent_lowat_takes_off_or_a_size_up_to_a_gigabyte(self):
        for value in ("0", "2g", "lots", "-4k", "on"):
            with self.subTest(value=value):
                self.assert_usage_error(["--notsent-lowat", value], "--notsent-lowat")
        config = os.path.join(self.tmp, "lowat-true.toml")
        with open(config, "w") as f:
            f.write("notsent_lowat = true\n")  # a switch where a size is wanted
        self.assert_usage_error(["--config", config], "notsent")

    def test_empty_log_path(self):
        self.assert_usage_error(["--access-log", ""], "log paths")

    def test_unknown_flags(self):
        for flag in ("--bogus", "-x", "--listen-on"):
            with self.subTest(flag=flag):
                self.assert_usage_error([flag], flag)

    def test_flag_missing_its_value(self):
        self.assert_usage_error(["--index"], "--index")

    @unittest.skipUnless(shutil.which("unshare") and os.geteuid() == 0, "needs unshare --net")
    def test_flag_missing_its_value_before_another_flag(self):
        # Observed: "--index --listen 127.0.0.1:0" starts lepus on the default
        # 0.0.0.0:8080; run in a private network namespace so that it binds nothing real.
        done = subprocess.run(["unshare", "--net", "sh", "-c",
                               "ip link set lo up 2>/dev/null; exec timeout 3 \"$0\" \"$@\"",
                               BINARY, self.root, "--index", "--listen", "127.0.0.1:0"],
                              capture_output=True, text=True, timeout=20)
        self.assertEqual(done.returncode, 2, "lepus started instead: %r" % done.stdout)

    def test_huge_durations_are_refused_or_honoured(self):
        # 2^64-1 ms parses, then the deadline wraps around and every keepalive
        # connection is closed at once. Either refuse it or keep the connection.
        code, out, err = run(self.root, "--listen", "127.0.0.1:0",
                             "--keepalive-timeout", "18446744073709551615ms", timeout=1)
        if code is not None:
            self.assertEqual(code, 2, err)
            return
        server = Lepus(["--keepalive-timeout", "18446744073709551615ms"], access_log=False)
        try:
            server.write("index.html", "hello")
            with server.connect() as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_response(s).status, 200)
                self.assertFalse(is_closed(s, timeout=2), "keepalive connection closed at once")
        finally:
            server.stop(self)

    # --- listen addresses ----------------------------------------------------
    def test_listen_addresses(self):
        for value in ("127.0.0.1:70000", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:",
                      "99999", "foo", "300.1.1.1:80", "[::1", "[::1]:", "localhost:80x",
                      "1.2.3:80"):
            with self.subTest(value=value):
                self.assert_usage_error(["--listen", value], "--listen", value)

    # --- FastCGI -----------------------------------------------------------------
    def test_fastcgi_flags(self):
        if "--fastcgi" not in run("--help")[1]:
            self.skipTest("this lepus has no FastCGI support")
        for flag, value in (("--fastcgi", "nothing"), ("--fastcgi", "unix:"),
                            ("--fastcgi", "127.0.0.1:99999"), ("--fastcgi-ext", "php"),
                            ("--fastcgi-ext", "./x"), ("--fastcgi-pool", "0"),
                            ("--fastcgi-pool", "70000"), ("--fastcgi-queue", "-1"),
                            ("--fastcgi-timeout", "5y"), ("--fastcgi-queue-timeout", "-1s")):
            with self.subTest(flag=flag, value=value):
                self.assert_usage_error([flag, value], flag, value)
        for flag in ("--fastcgi-timeout", "--fastcgi-queue-timeout", "--fastcgi-idle-timeout"):
            with self.subTest(flag=flag, value="0"):
                self.assert_usage_error([flag, "0"], "greater than zero")

    # --- the document root -----------------------------------------------------
    def test_root_that_is_a_file(self):
        code, out, err = run(self.file, "--listen", "127.0.0.1:0", timeout=5)
        self.assertEqual(code, 2, err)
        self.assertEqual(err, "lepus: root '%s' is not a directory (see lepus --help)\n"
                         % self.file)

    def test_missing_root(self):
        missing = os.path.join(self.tmp, "missing")
        code, out, err = run(missing, "--listen", "127.0.0.1:0", timeout=5)
        self.assertEqual(code, 2, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("'%s' does not exist" % missing, err)

    def test_two_roots(self):
        code, out, err = run(self.root, self.root, "--listen", "127.0.0.1:0", timeout=5)
        self.assertEqual(code, 2, err)
        self.assertEqual(len(err.splitlines()), 1, err)

    # --- the port --------------------------------------------------------------
    def test_port_in_use(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            code, out, err = run(self.root, "--listen", "127.0.0.1:%d" % port, timeout=10)
        self.assertEqual(code, 1, "exit code; stderr %r stdout %r" % (err, out))
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, err)
        self.assertIn("port %d" % port, lines[0])
        self.assertIn("in use", lines[0])

    # --- help and version ------------------------------------------------------
    def test_help(self):
        code, out, err = run("--help")
        self.assertEqual(code, 0, err)
        self.assertIn("Usage:", out)
        for flag in ("--listen", "--threads", "--header-timeout", "--max-body-size",
                     "--access-log"):
            self.assertIn(flag, out)

    def test_version(self):
        for flag in ("--version", "-v"):
            code, out, err = run(flag)
            self.assertEqual(code, 0, err)
            self.assertRegex(out.strip(), r"^lepus \d+\.\d+\.\d+$")

    def test_help_names_the_program_groups_the_options_and_shows_an_example(self):
        code, out, err = run("--help")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"Usage: lepus \[OPTIONS\]")
        self.assertRegex(out, r"(?m)^\s+-t,--test-config\b")
        self.assertRegex(out, r"(?m)^\s+-V\b")
        # Each group heading is followed by its options.
        for group, flag in (("Listening", "--listen"), ("Files", "--index"),
                            ("PHP (FastCGI)", "--fastcgi-pool"), ("Logs", "--access-log"),
                            ("Limits", "--header-timeout"), ("Process", "--user")):
            section = re.search(r"(?ms)^%s:\n(.*?)(?:\n\n|\Z)" % re.escape(group), out)
            self.assertIsNotNone(section, "no %s group in --help:\n%s" % (group, out))
            self.assertIn(flag, section.group(1), group)
        self.assertIn("Example:\n  lepus ", out)

    def test_build_information(self):
        code, out, err = run("-V")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^lepus \d+\.\d+\.\d+$")
        self.assertRegex(out, r"built with (gcc|clang) \d+")
        self.assertRegex(out, r"CLI11 \d+\.\d+")
        self.assertRegex(out, r"toml\+\+ \d+\.\d+\.\d+")
        self.assertRegex(out, r"liburing\.so\.\d")  # as loaded, with its version
        self.assertRegex(out, r"(?m)^tcmalloc: (on|off)")


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
def thread_cpu_lists(pid):
    """Each thread's allowed CPUs (Cpus_allowed_list of /proc/PID/task/*/status)."""
    lists = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    lists.append(line.split(":", 1)[1].strip())
    return lists


class Pinning(unittest.TestCase):
    """--pin: off by default (the kernel places the reactors), on pins reactor i
    to core i; the start-up line says which (issue 15)."""

    def start_line(self, server):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for line in server.error_log_text().splitlines():
                if "lepus started" in line:
                    return line
            time.sleep(0.05)
        self.fail("no start-up line in the error log")

    def test_default_leaves_the_reactors_to_the_kernel(self):
        server = Lepus(["--threads", "2"])
        try:
            self.assertIn("(not pinned)", self.start_line(server))
            everything = thread_cpu_lists(server.proc.pid)
            self.assertEqual(len(set(everything)), 1, everything)  # no thread narrowed
        finally:
            server.stop(self)

    @unittest.skipUnless(os.cpu_count() and os.cpu_count() >= 2, "needs two cores")
    def test_pin_on_pins_reactor_threads_to_cores(self):
        for args in (["--pin", "on"], ["--pin", "on", "--no-pin"]):
            with self.subTest(args=args):
                server = Lepus(["--threads", "2"] + args)
                try:
                    line = self.start_line(server)
                    lists = thread_cpu_lists(server.proc.pid)
                    if "--no-pin" in args:  # the older spelling wins: not pinned
                        self.assertIn("(not pinned)", line)
                        self.assertEqual(len(set(lists)), 1, lists)
                    else:
                        self.assertIn("(pinned to cores, --pin on)", line)
                        self.assertIn("0", lists)
                        self.assertIn("1", lists)
                finally:
                    server.stop(self)


class NotSentLowWaterMark(unittest.TestCase):
    """--notsent-lowat (config key notsent_lowat, default 32k) keeps a large
    body from being queued in the kernel all at once: lepus writes again as
    the client reads. Whatever its value, a client that reads slowly through a
    small receive buffer gets two large pipelined files whole, in order."""

    def fetch_two_slowly(self, server):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
            s.settimeout(30)
            s.connect(("127.0.0.1", server.port))
            s.sendall(b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n"
                      b"GET /b.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return harness.read_slowly_to_end(s, 256 * 1024)

    def test_large_files_arrive_whole_with_any_value(self):
        tmp = harness.temp_dir(self, "lowat")
        config = os.path.join(tmp, "lepus.toml")
        with open(config, "w") as f:
            f.write('notsent_lowat = "8k"\n')
        config_off = os.path.join(tmp, "lepus-off.toml")
        with open(config_off, "w") as f:
            f.write('notsent_lowat = false\n')
        a = os.urandom(3 * 1024 * 1024 + 17)
        b = os.urandom(1024 * 1024 + 5)
        for args in ([], ["--notsent-lowat", "4k"], ["--notsent-lowat", "off"],
                     ["--config", config], ["--config", config_off]):
            with self.subTest(args=args):
                server = Lepus(args)
                try:
                    server.write("a.bin", a)
                    server.write("b.bin", b)
                    received = self.fetch_two_slowly(server)
                    head_a, rest = received.split(b"\r\n\r\n", 1)
                    self.assertIn(b"200 OK", head_a)
                    self.assertEqual(rest[:len(a)], a)
                    head_b, body_b = rest[len(a):].split(b"\r\n\r\n", 1)
                    self.assertIn(b"Content-Length: %d" % len(b), head_b)
                    self.assertEqual(body_b, b)
                finally:
                    server.stop(self)


class ListOptions(unittest.TestCase):
    """A list option takes one value per occurrence, or a comma-separated list:
    `cd site-b && lepus --index a.html ../site-a` serves site-a (it served the
    current folder, site-b, when --index took every following word)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="lepus-lists-")
        for name in ("site-a", "site-b"):
            os.mkdir(os.path.join(cls.tmp.name, name))
            for page in ("a.html", "index.html", "index.php"):
                with open(os.path.join(cls.tmp.name, name, page), "w") as f:
                    f.write("%s %s\n" % (name, page))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def serve(self, *args):
        """Starts lepus in site-b with args (ending with ../site-a); returns the
        body of GET / and of the status page, then stops it."""
        cmd = [BINARY, "--listen", "127.0.0.1:0", "--access-log", "off", "--error-log", "-",
               "--status-path", "/_status"] + list(args)
        proc = subprocess.Popen(cmd, cwd=os.path.join(self.tmp.name, "site-b"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            match = re.search(r"serving (\S+) on http://127\.0\.0\.1:(\d+)/", line)
            if not match:
                proc.wait(timeout=10)
                self.fail("did not start: %r %r" % (line, proc.stderr.read()))
            self.assertEqual(match.group(1), "../site-a")
            port = int(match.group(2))
            bodies = []
            for path in ("/", "/_status"):
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                              % path.encode())
                    r = read_response(s)
                    bodies.append((r.status, r.body.decode()))
            return bodies
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()

    def test_index(self):
        for args in (["--index", "a.html"], ["--index", "a.html,index.html"],
                     ["--index", "a.html", "--index", "index.html"]):
            with self.subTest(args=args):
                (status, body), _ = self.serve(*args, "../site-a")
                self.assertEqual((status, body), (200, "site-a a.html\n"))

    def test_fastcgi_ext(self):
        for args in (["--fastcgi-ext", ".php"], ["--fastcgi-ext", ".php,.phtml"]):
            with self.subTest(args=args):
                (status, body), _ = self.serve(*args, "../site-a")
                self.assertEqual((status, body), (200, "site-a index.html\n"))

    def test_status_allow(self):
        for args, allowed in ((["--status-allow", "127.0.0.1/32"], True),
                              (["--status-allow", "10.0.0.0/8,127.0.0.0/8"], True),
                              (["--status-allow", "10.0.0.0/8", "--status-allow", "::1"], False)):
            with self.subTest(args=args):
                (status, body), (status_page, _) = self.serve(*args, "../site-a")
                self.assertEqual((status, body), (200, "site-a index.html\n"))
                self.assertEqual(status_page, 200 if allowed else 403)

    def test_two_positionals_after_a_list_option_are_refused(self):
        # The old reading took "index.html" as a second index; now it is a
        # second root, which is an error, not a silently different site.
        code, out, err = run("--listen", "127.0.0.1:0", "--index", "a.html", "index.html",
                             os.path.join(self.tmp.name, "site-a"), timeout=5)
        self.assertEqual(code, 2, out + err)
        self.assertEqual(len(err.splitlines()), 1, err)


if __name__ == "__main__":
    harness.main()
