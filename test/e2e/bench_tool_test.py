"""lepus-bench end to end: a --quick run of one scenario against the real
lepus binary (LEPUS_BINARY) writes a table, CSV and JSON with a positive RPS,
and usage errors are one line with the documented exit status. --io runs lepus
once per event engine as servers of their own (lepus, lepus-uring); the run with
io_uring needs a lepus whose --help lists --io, and a lepus without it must be
reported in one line when asked for uring.

Needs only wrk (and gnuplot for the chart check): no nginx or apache.
"""
import csv
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import unittest

import harness
from harness import BINARY

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "src", "tool", "lepus-bench")
sys.path.insert(0, os.path.dirname(TOOL))
from lepus_bench import cli, servers  # noqa: E402  (the tool's own parser)


def lepus_has_io():
    return bool(BINARY) and os.access(BINARY, os.X_OK) and servers.lepus_has_flag(BINARY, "--io")


def free_port_pair(count=3):
    """A port p with p, p+1, ... p+count-1 free (lepus-bench uses port-base,
    port-base+1, ... one per server)."""
    # Below the ephemeral range (32768-60999 by default): after the load tests
    # tens of thousands of client sockets in TIME_WAIT hold ports up there.
    for _ in range(200):
        port = random.randrange(20000, 32000)
        try:
            for offset in range(0, count):
                servers.check_port_free(port + offset)  # as lepus-bench checks (SO_REUSEADDR)
        except servers.BenchError:
            continue
        return port
    raise RuntimeError("no free port")


def run_tool(args, timeout=120):
    """Runs lepus-bench; on a timeout it gets SIGTERM first, so that it stops the
    servers it started (they run in sessions of their own)."""
    proc = subprocess.Popen([sys.executable, TOOL] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


class BenchToolTest(unittest.TestCase):
    def setUp(self):
        self.out = harness.temp_dir(self, "bench-test")

    @unittest.skipUnless(shutil.which("wrk"), "wrk missing (apt-get install wrk)")
    def test_quick_small_against_lepus_writes_table_csv_json(self):
        self.assertTrue(os.access(BINARY, os.X_OK), "set LEPUS_BINARY")
        charts = shutil.which("gnuplot") is not None
        result = run_tool(["--quick", "--servers", "lepus", "--scenarios", "small",
                           "--lepus", BINARY, "--out", self.out,
                           "--port-base", str(free_port_pair())] +
                          ([] if charts else ["--no-charts"]))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("small: lepus, run 1 of 1", result.stderr)  # progress on stderr

        with open(os.path.join(self.out, "results.csv")) as f:
            rows = [row for row in csv.DictReader(f)]
        small = [row for row in rows if row["server"] == "lepus" and row["test"] == "small"]
        self.assertEqual({row["mode"] for row in small}, {"pinned", "unpinned"})
        for row in small:
            self.assertGreater(float(row["rps"]), 0)
            self.assertGreater(float(row["rps_per_core"]), 0)
            self.assertGreater(float(row["server_cores"]), 0)
            self.assertEqual(int(row["failed"]) + int(row["non2xx"]), 0)

        with open(os.path.join(self.out, "results.json")) as f:
            data = json.load(f)
        self.assertEqual(data["meta"]["servers"], ["lepus"])
        medians = [m for m in data["medians"] if m["test"] == "small"]
        self.assertEqual(len(medians), 2)
        self.assertTrue(all(m["rps"] > 0 and m["p99_ms"] >= m["p50_ms"] for m in medians))

        with open(os.path.join(self.out, "results.md")) as f:
            table = f.read()
        self.assertIn("| test | lepus |", table)
        line = [l for l in table.splitlines() if l.startswith("| wrk -c100 `/` |")][0]
        self.assertRegex(line, r"\| [\d.]+k? \([\d.]+k?/core\), p99 ")
        self.assertIn("load average", table)
        if charts:
            self.assertTrue(os.path.exists(os.path.join(self.out, "bench-pinned-rps.png")))

    def test_unknown_server_is_one_line_and_exit_2(self):
        result = run_tool(["--quick", "--servers", "lepus,nosuch", "--out", self.out])
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, "")
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("unknown server 'nosuch'", lines[0])
        self.assertEqual(os.listdir(self.out), [])

    @unittest.skipUnless(shutil.which("wrk"), "wrk missing (apt-get install wrk)")
    def test_server_answering_wrong_body_gets_no_figure(self):
        # A "lepus" that serves another document root: same status, other bytes.
        other_root = os.path.join(self.out, "other-root")
        os.makedirs(other_root)
        with open(os.path.join(other_root, "index.html"), "w") as f:
            f.write("not the page lepus-bench wrote\n")
        wrapper = os.path.join(self.out, "wrong-lepus")
        with open(wrapper, "w") as f:
            f.write("#!%s\nimport os, sys\nargs = sys.argv[1:]\n"
                    "if args and not args[0].startswith('-'):\n    args[0] = %r\n"
                    "os.execv(%r, [%r] + args)\n" % (sys.executable, other_root, BINARY, BINARY))
        os.chmod(wrapper, 0o755)
        results = os.path.join(self.out, "results")
        result = run_tool(["--quick", "--servers", "lepus", "--scenarios", "small",
                           "--modes", "pinned", "--lepus", wrapper, "--out", results,
                           "--port-base", str(free_port_pair()), "--no-charts"])
        self.assertEqual(result.returncode, 1, result.stderr)
        last = result.stderr.strip().splitlines()[-1]
        self.assertIn("no server produced a figure", last)
        self.assertIn("GET / answered 200", last)
        self.assertFalse(os.path.exists(os.path.join(results, "results.csv")))

    def test_io_list_makes_one_lepus_per_engine(self):
        def servers_for(*argv):
            return cli.parse_args(list(argv)).server_list
        self.assertEqual(servers_for(), ["lepus", "nginx", "apache"])
        self.assertEqual(servers_for("--io", "epoll"), ["lepus", "nginx", "apache"])
        self.assertEqual(servers_for("--io", "epoll,uring"),
                         ["lepus", "lepus-uring", "nginx", "apache"])
        # In lepus's place in the rotation, in the order given, without repeats.
        self.assertEqual(servers_for("--servers", "nginx,lepus", "--io", "uring,epoll,uring"),
                         ["nginx", "lepus-uring", "lepus"])
        self.assertEqual(servers_for("--servers", "lepus", "--io", "uring"), ["lepus-uring"])
        self.assertEqual([servers.lepus_io(name) for name in ("lepus", "lepus-uring", "nginx")],
                         ["epoll", "uring", None])

    def test_io_usage_errors_are_one_line_and_exit_2(self):
        for argv, message in ((["--io", "kqueue"], "unknown io engine 'kqueue'"),
                              (["--io", ""], "no io engine given"),
                              (["--servers", "nginx", "--io", "uring"],
                               "lepus is not in --servers")):
            with self.subTest(argv=argv):
                result = run_tool(["--quick", "--out", self.out] + argv)
                self.assertEqual(result.returncode, 2, result.stderr)
                lines = result.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, result.stderr)
                self.assertIn(message, lines[0])
                self.assertEqual(os.listdir(self.out), [])

    @unittest.skipUnless(shutil.which("wrk"), "wrk missing (apt-get install wrk)")
    def test_io_uring_without_the_flag_is_reported_in_one_line(self):
        self.assertTrue(os.access(BINARY, os.X_OK), "set LEPUS_BINARY")
        if lepus_has_io():
            self.skipTest("this lepus has --io: test_quick_small_epoll_and_uring covers it")
        result = run_tool(["--quick", "--servers", "lepus", "--io", "epoll,uring",
                           "--scenarios", "small", "--modes", "pinned", "--lepus", BINARY,
                           "--out", self.out, "--port-base", str(free_port_pair()),
                           "--no-charts"])
        self.assertEqual(result.returncode, 1, result.stderr)
        errors = [l for l in result.stderr.splitlines() if not l.startswith("lepus-bench: [")]
        self.assertEqual(len(errors), 1, result.stderr)
        self.assertIn("lepus-uring failed to start (exit 2)", errors[0])
        self.assertIn("this lepus has no --io flag", errors[0])

    @unittest.skipUnless(shutil.which("wrk"), "wrk missing (apt-get install wrk)")
    def test_quick_small_epoll_and_uring(self):
        self.assertTrue(os.access(BINARY, os.X_OK), "set LEPUS_BINARY")
        if not lepus_has_io():
            self.skipTest("this lepus has no --io flag (lepus --help); the io_uring engine "
                          "is not built in yet")
        result = run_tool(["--quick", "--servers", "lepus", "--io", "epoll,uring",
                           "--scenarios", "small", "--modes", "pinned", "--lepus", BINARY,
                           "--out", self.out, "--port-base", str(free_port_pair()),
                           "--no-charts"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("small: lepus-uring, run 1 of 1", result.stderr)
        with open(os.path.join(self.out, "results.csv")) as f:
            rows = [row for row in csv.DictReader(f) if row["test"] == "small"]
        self.assertEqual(sorted(row["server"] for row in rows), ["lepus", "lepus-uring"])
        for row in rows:
            self.assertGreater(float(row["rps"]), 0)
            self.assertEqual(int(row["failed"]) + int(row["non2xx"]), 0)
        with open(os.path.join(self.out, "results.json")) as f:
            data = json.load(f)
        self.assertEqual(data["meta"]["servers"], ["lepus", "lepus-uring"])
        self.assertEqual(data["meta"]["io"], ["epoll", "uring"])
        with open(os.path.join(self.out, "results.md")) as f:
            table = f.read()
        self.assertIn("| test | lepus | lepus-uring |", table)
        self.assertIn("`lepus-uring` = `lepus --io uring`", table)

    @unittest.skipUnless(shutil.which("wrk"), "wrk missing (apt-get install wrk)")
    def test_taken_port_is_refused_in_one_line(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = run_tool(["--quick", "--servers", "lepus", "--scenarios", "small",
                               "--lepus", BINARY, "--out", self.out, "--port-base", str(port),
                               "--no-charts"])
        self.assertEqual(result.returncode, 1)
        errors = [l for l in result.stderr.splitlines() if not l.startswith("lepus-bench: [")]
        self.assertEqual(len(errors), 1, result.stderr)
        self.assertIn("port %d on 127.0.0.1 is taken" % port, errors[0])


if __name__ == "__main__":
    harness.main()
