"""lepus-bench end to end: a tiny run of interleaved rounds (2 rounds of 1 s,
two scenarios) of the real lepus binary (LEPUS_BINARY) against itself as
--lepus-before writes the tables, CSV and JSON with positive figures, turns in
rotating order, and per-round ratios lepus / lepus-before near 1; usage errors
are one line with the documented exit status. --io runs lepus once per event
engine as servers of their own (lepus, lepus-uring); the run with io_uring
needs a lepus whose --help lists --io, and a lepus without it must be reported
in one line when asked for uring.

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
from lepus_bench import cli, ratios, rounds, scenarios, servers  # noqa: E402  (the tool's own code)


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

    def rows_by_test(self):
        """results.csv's rows, in lists by their test."""
        by_test = {}
        with open(os.path.join(self.out, "results.csv")) as f:
            for row in csv.DictReader(f):
                by_test.setdefault(row["test"], []).append(row)
        return by_test

    def assert_served_without_errors(self, row):
        self.assertGreater(float(row["rps"]), 0, row)
        self.assertEqual(int(row["failed"]) + int(row["non2xx"]), 0, row)

    @unittest.skipUnless(shutil.which("wrk"), "wrk missing (apt-get install wrk)")
    def test_tiny_rounds_against_lepus_before_write_tables_csv_json_and_ratios(self):
        self.assertTrue(os.access(BINARY, os.X_OK), "set LEPUS_BINARY")
        charts = shutil.which("gnuplot") is not None
        result = run_tool(["--servers", "lepus", "--lepus", BINARY, "--lepus-before", BINARY,
                           "--scenarios", "small,close", "--rounds", "2", "--round-seconds",
                           "1", "--out", self.out, "--port-base", str(free_port_pair())] +
                          ([] if charts else ["--no-charts"]))
        self.assertEqual(result.returncode, 0, result.stderr)
        # Progress on stderr: a warm-up, then the rounds.
        self.assertIn("[pinned] close: warm-up of lepus-before", result.stderr)
        self.assertIn("[unpinned] small: round 2 of 2, lepus", result.stderr)

        with open(os.path.join(self.out, "results.csv")) as f:
            rows = [row for row in csv.DictReader(f)]
        for mode in ("pinned", "unpinned"):
            for test in ("small", "close"):
                turns = {(row["round"], row["server"]): row for row in rows
                         if row["mode"] == mode and row["test"] == test}
                # Every server a turn per round, the order rotating by one each round.
                self.assertEqual({key: row["turn"] for key, row in turns.items()},
                                 {("1", "lepus"): "1", ("1", "lepus-before"): "2",
                                  ("2", "lepus-before"): "1", ("2", "lepus"): "2"})
                for row in turns.values():
                    self.assertGreater(float(row["rps"]), 0)
                    self.assertGreater(float(row["rps_per_core"]), 0)
                    self.assertGreater(float(row["server_cores"]), 0)
                    self.assertEqual(int(row["failed"]) + int(row["non2xx"]), 0)

        with open(os.path.join(self.out, "ratios.csv")) as f:
            ratios = [row for row in csv.DictReader(f)]
        self.assertEqual(sorted((r["mode"], r["test"], r["server"], r["against"], r["rounds"])
                                for r in ratios),
                         [(mode, test, "lepus", "lepus-before", "2")
                          for mode in ("pinned", "unpinned") for test in ("close", "small")])
        for ratio in ratios:
            for name in ("rps", "per_core"):
                low, median, high = (float(ratio[name + suffix])
                                     for suffix in ("_min", "_median", "_max"))
                self.assertLessEqual(low, median)
                self.assertLessEqual(median, high)
                # No bound on the value: tests assert behaviour, never speed (a shared CI
                # machine can run one 1 s turn at a third of the next one's speed). That
                # ratios divide figures of the same round is checked exactly, on synthetic
                # rounds, by test_verdict_divides_figures_of_the_same_round_only below.
                self.assertGreater(low, 0, ratio)

        with open(os.path.join(self.out, "results.json")) as f:
            data = json.load(f)
        self.assertEqual(data["meta"]["servers"], ["lepus", "lepus-before"])
        self.assertEqual((data["meta"]["rounds"], data["meta"]["round_seconds"]), (2, 1))
        self.assertEqual(data["meta"]["lepus_before"], os.path.abspath(BINARY))
        self.assertEqual(len(data["ratios"]), 4)
        medians = [m for m in data["medians"] if m["test"] == "small"]
        self.assertEqual(len(medians), 4)  # two modes, two servers
        self.assertTrue(all(m["rounds"] == 2 and m["rps"] > 0 and m["p99_ms"] >= m["p50_ms"]
                            for m in medians))

        with open(os.path.join(self.out, "results.md")) as f:
            table = f.read()
        self.assertIn("2 interleaved rounds of 1 s per server", table)
        verdict = [l for l in table.splitlines()
                   if l.startswith("| wrk -c100 `Connection: close`, `/` | lepus / lepus-before")]
        self.assertEqual(len(verdict), 2, table)  # pinned and unpinned
        for line in verdict:
            self.assertRegex(line, r"\| \d+\.\d\d \[\d+\.\d\d-\d+\.\d\d\] \| "
                             r"\d+\.\d\d \[\d+\.\d\d-\d+\.\d\d\] \|$")
        self.assertIn("| test | lepus | lepus-before |", table)
        medians = [l for l in table.splitlines()
                   if l.startswith("| wrk -c100 `/` |") and "lepus / " not in l]
        self.assertEqual(len(medians), 2, table)  # pinned and unpinned
        for line in medians:
            self.assertRegex(line, r"\| [\d.]+k? \([\d.]+k?/core\), p99 ")
        self.assertIn("load average", table)
        if charts:
            for name in ("rps", "ratio-per-core"):
                self.assertTrue(os.path.exists(
                    os.path.join(self.out, "bench-pinned-%s.png" % name)), name)

    @unittest.skipUnless(shutil.which("wrk") and shutil.which("ab") and shutil.which("openssl"),
                         "wrk, ab or openssl missing")
    def test_tls_scenarios_use_the_tls_listener_without_errors(self):
        """The TLS scenarios run on each server's HTTPS listener (one certificate
        for all, made with openssl): keepalive wrk and ab's handshake per request
        without a failed response (ab counts a close without close_notify as
        one), and the idle TLS connections held and measured."""
        port = free_port_pair(count=102)  # plain ports p, p+1; TLS ports p+100, p+101
        result = run_tool(["--servers", "lepus", "--lepus", BINARY, "--lepus-before", BINARY,
                           "--scenarios", "tls-small,tls-ab,tls-idle", "--modes", "pinned",
                           "--rounds", "1", "--round-seconds", "1", "--warmup-seconds", "0",
                           "--idle-connections", "40", "--no-charts", "--out", self.out,
                           "--port-base", str(port)])
        self.assertEqual(result.returncode, 0, result.stderr)
        by_test = self.rows_by_test()
        self.assertEqual(sorted(by_test), ["tls ab", "tls idle 0k", "tls small"])
        for test in ("tls ab", "tls small"):
            self.assertEqual(sorted(row["server"] for row in by_test[test]),
                             ["lepus", "lepus-before"])
            for row in by_test[test]:
                self.assert_served_without_errors(row)
        for row in by_test["tls idle 0k"]:
            self.assertEqual(int(row["idle_held"]), 40, row)
            self.assertEqual(int(row["idle_still_open"]), 40, row)

    @unittest.skipUnless(shutil.which("wrk") and shutil.which("h2load") and
                         shutil.which("openssl"), "wrk, h2load or openssl missing")
    def test_compression_and_http2_scenarios_run_without_errors(self):
        """gzip-html and gzip-js ask for gzip/br (lepus answers compressed, fewer
        bytes than the file per response); h2-small runs h2load over ALPN h2, h2c-small
        over the plain port (prior knowledge)."""
        port = free_port_pair(count=102)
        result = run_tool(["--servers", "lepus", "--lepus", BINARY, "--lepus-before", BINARY,
                           "--scenarios", "gzip-html,gzip-js,h2-small,h2c-small,h2-idle", "--modes",
                           "pinned", "--rounds", "1", "--round-seconds", "1", "--warmup-seconds",
                           "0", "--idle-connections", "30", "--no-charts", "--out", self.out,
                           "--port-base", str(port)])
        self.assertEqual(result.returncode, 0, result.stderr)
        by_test = self.rows_by_test()
        self.assertEqual(sorted(by_test), ["gzip html", "gzip js", "h2 idle 0k", "h2 small",
                                          "h2c small"])
        for row in by_test["h2 idle 0k"]:  # held over HTTP/2, all still open
            self.assertEqual((int(row["idle_held"]), int(row["idle_still_open"])), (30, 30), row)
        for test, size in (("gzip html", 100 * 1024), ("gzip js", 300 * 1024), ("h2 small", 0),
                           ("h2c small", 0)):
            self.assertEqual(sorted(row["server"] for row in by_test[test]),
                             ["lepus", "lepus-before"])
            for row in by_test[test]:
                self.assert_served_without_errors(row)
                if size:  # compressed: well under the file's size per response
                    self.assertLess(float(row["mbps"]) * 1e6 / float(row["rps"]), size / 2, row)

    @unittest.skipUnless(servers.find_program("caddy") and servers.find_program("h3load"),
                         "needs caddy and h3load (scripts/install-h3-clients, "
                         "scripts/install-h3load)")
    def test_h3_rows_against_caddy(self):
        """Issue 39: h3load loads Caddy over HTTP/3 beside h2load over HTTP/2, and
        holds idle QUIC connections; a lepus without quic:// sits the h3 rows
        out with a note saying so."""
        port = free_port_pair(count=102)
        result = run_tool(["--servers", "lepus,caddy", "--lepus", BINARY, "--scenarios",
                           "h2-small,h3-small,h3-idle", "--modes", "pinned", "--rounds", "1",
                           "--round-seconds", "1", "--warmup-seconds", "0",
                           "--idle-connections", "30", "--no-charts", "--out", self.out,
                           "--port-base", str(port)])
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(self.out, "results.csv")) as f:
            rows = {(row["test"], row["server"]): row for row in csv.DictReader(f)}
        for test in ("h2 small", "h3 small"):
            row = rows[(test, "caddy")]
            self.assertGreater(float(row["rps"]), 0, row)
            self.assertEqual(int(row["failed"]) + int(row["non2xx"]), 0, row)
        idle = rows[("h3 idle 0k", "caddy")]
        self.assertEqual(int(idle["idle_held"]), 30, idle)
        with open(os.path.join(self.out, "results.md")) as f:
            report = f.read()
        self.assertIn("HTTP/3 (QUIC) connections held", report)
        if servers.lepus_has_quic(BINARY):
            self.assertGreater(float(rows[("h3 small", "lepus")]["rps"]), 0)
        else:
            self.assertNotIn(("h3 small", "lepus"), rows)
            self.assertIn("lepus: h3 scenarios skipped: this lepus has no quic:// listener",
                          report)

    @unittest.skipUnless(shutil.which("wrk") and shutil.which("nginx"),
                         "wrk or nginx (the proxy scenario's backend) missing")
    def test_proxy_scenario_goes_through_lepus_to_the_backend(self):
        # haproxy (when installed) proxies only: it sits out the file scenario.
        haproxy = ["haproxy"] if shutil.which("haproxy") else []
        port = free_port_pair(count=202)  # servers p, p+1, p+2; the backend p+200
        result = run_tool(["--servers", ",".join(["lepus"] + haproxy), "--lepus", BINARY,
                           "--lepus-before", BINARY, "--scenarios", "proxy,small", "--modes",
                           "pinned", "--rounds", "1", "--round-seconds", "1",
                           "--warmup-seconds", "0", "--no-charts", "--out", self.out,
                           "--port-base", str(port)])
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(os.path.join(self.out, "results.csv")) as f:
            rows = [row for row in csv.DictReader(f)]
        expected = [("proxy", "lepus"), ("proxy", "lepus-before"), ("small", "lepus"),
                    ("small", "lepus-before")] + [("proxy", "haproxy")] * len(haproxy)
        self.assertEqual(sorted((row["test"], row["server"]) for row in rows), sorted(expected))
        for row in rows:
            self.assertGreater(float(row["rps"]), 0, row)
            self.assertEqual(int(row["failed"]) + int(row["non2xx"]), 0, row)

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
        result = run_tool(["--rounds", "1", "--round-seconds", "1", "--servers", "lepus",
                           "--scenarios", "small", "--modes", "pinned", "--lepus", wrapper,
                           "--out", results, "--port-base", str(free_port_pair()),
                           "--no-charts"])
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

    def test_rounds_flags_and_lepus_before_in_the_rotation(self):
        def parsed(*argv):
            return cli.parse_args(list(argv))
        defaults = parsed()
        self.assertEqual((defaults.rounds, defaults.round_seconds, defaults.warmup_seconds),
                         (7, 3, 1))
        quick = parsed("--quick")
        # Issue 38: --quick is a first answer in under 2 minutes: four rows, two
        # servers, pinned, short rounds; each still settable by its own flag.
        self.assertEqual((quick.rounds, quick.round_seconds, quick.server_list,
                          quick.mode_list, quick.scenario_list),
                         (3, 2, ["lepus", "nginx"], ["pinned"], list(cli.QUICK_SCENARIOS)))
        self.assertEqual(parsed("--quick", "--servers", "lepus,h2o", "--modes", "unpinned",
                                "--round-seconds", "3", "--scenarios", "4k").scenario_list,
                         ["4k"])
        self.assertEqual((defaults.server_list, defaults.mode_list),
                         (["lepus", "nginx", "apache"], ["pinned", "unpinned"]))
        # All but the h3 rows, whose generator is built here (scripts/install-h3load).
        self.assertEqual(defaults.scenario_list, [s.name for s in scenarios.SCENARIOS
                                                  if not s.h3])
        self.assertEqual(parsed("--runs", "5").rounds, 5)  # the old name of --rounds
        # lepus-before (any executable will do for the parser) follows lepus's engines.
        self.assertEqual(parsed("--servers", "nginx,lepus", "--io", "epoll,uring",
                                "--lepus-before", sys.executable).server_list,
                         ["nginx", "lepus", "lepus-uring", "lepus-before"])
        self.assertEqual([rounds.rotation(["a", "b", "c"], i) for i in range(4)],
                         [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]])

    def test_verdict_divides_figures_of_the_same_round_only(self):
        # Figures that change a lot from round to round (the machine's speed phases),
        # with lepus twice h2o's req/s and 1.5x its per core in every round: only
        # ratios taken within a round give exactly 2 and 1.5.
        rows = []
        for round_number, speed in ((1, 1.0), (2, 3.0), (3, 0.5)):
            for server, rps, cores in (("lepus", 2000.0, 0.5), ("h2o", 1000.0, 0.375)):
                rows.append(dict(mode="pinned", test="small", server=server,
                                 round=round_number, rps=rps * speed, server_cores=cores))
        rows.append(dict(mode="pinned", test="small", server="h2o", round=4, rps=1.0,
                         server_cores=0.5))  # lepus has no figure in round 4: no ratio
        rows.append(dict(mode="pinned", test="10m", server="lepus", round=1, rps=100.0,
                         mbps=3000.0, server_cores=1.0))
        rows.append(dict(mode="pinned", test="10m", server="h2o", round=1, rps=100.0,
                         mbps=1000.0, server_cores=1.0))
        rows.append(dict(mode="pinned", test="small", server="nginx", round=1,
                         error="wrk exited with 1"))
        verdict = {(v["test"], v["against"]): v for v in
                   ratios.verdict(rows, ["lepus", "nginx", "h2o"])}
        self.assertEqual(set(verdict), {("small", "h2o"), ("10m", "h2o")})
        small = verdict[("small", "h2o")]
        self.assertEqual(small["rounds"], 3)
        for name, expected in (("rps", 2.0), ("per_core", 1.5)):
            for suffix in ("_median", "_min", "_max"):
                self.assertAlmostEqual(small[name + suffix], expected)
        self.assertAlmostEqual(verdict[("10m", "h2o")]["rps_median"], 3.0)  # GB/s, not req/s

    def test_usage_errors_are_one_line_and_exit_2(self):
        missing = os.path.join(self.out, "no-such-lepus")
        for argv, message in ((["--io", "kqueue"], "unknown io engine 'kqueue'"),
                              (["--io", ""], "no io engine given"),
                              (["--servers", "nginx", "--io", "uring"],
                               "lepus is not in --servers"),
                              (["--lepus-before", missing],
                               "--lepus-before %s: no such executable" % missing),
                              (["--servers", "nginx", "--lepus-before", sys.executable],
                               "lepus is not in --servers"),
                              (["--rounds", "0"], "--rounds must be at least 1"),
                              (["--runs", "0"], "--rounds must be at least 1"),
                              (["--round-seconds", "0"], "--round-seconds must be at least 1"),
                              (["--warmup-seconds", "-1"], "--warmup-seconds must be 0")):
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
        result = run_tool(["--rounds", "1", "--round-seconds", "1", "--servers", "lepus",
                           "--io", "epoll,uring",
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
        result = run_tool(["--rounds", "1", "--round-seconds", "1", "--servers", "lepus",
                           "--io", "epoll,uring",
                           "--scenarios", "small", "--modes", "pinned", "--lepus", BINARY,
                           "--out", self.out, "--port-base", str(free_port_pair()),
                           "--no-charts"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("small: round 1 of 1, lepus-uring", result.stderr)
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
    def test_quick_prints_the_verdict_and_what_the_full_run_adds(self):
        self.assertTrue(os.access(BINARY, os.X_OK), "set LEPUS_BINARY")
        result = run_tool(["--quick", "--servers", "lepus", "--lepus-before", BINARY,
                           "--scenarios", "small", "--rounds", "1", "--round-seconds", "1",
                           "--lepus", BINARY, "--out", self.out,
                           "--port-base", str(free_port_pair()), "--no-charts"])
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("### Verdict: median of the per-round ratios [min-max]", result.stdout)
        self.assertRegex(result.stdout, r"\| wrk -c100 `/` \| lepus / lepus-before \| "
                         r"[0-9.]+ \[[0-9.]+-[0-9.]+\] \|")
        self.assertRegex(result.stdout, r"The full run \(without --quick, about \d+ minutes\) "
                         r"adds: .*the unpinned mode.*slowloris")

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
