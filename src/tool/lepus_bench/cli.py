"""lepus-bench: fair, repeatable ab and wrk comparisons of lepus against
nginx and apache (lighttpd and h2o on request), side by side.

main() parses the command line, starts every server of a mode at once on its
own loopback port with a generated config, checks each answers correctly, runs
each scenario in short interleaved rounds (rounds.py: every server a turn per
round, in rotating order), and writes CSV, JSON, a Markdown report with the
verdict (ratios.py: the median of the per-round ratios lepus / other server)
and gnuplot charts. Servers are stopped by pid on the way out, also on Ctrl-C
and SIGTERM.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from . import loadgen, ratios, report, rounds, scenarios, servers
from .servers import BenchError

TOOL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("pinned", "unpinned")
# --quick: a first answer in under two minutes (issue 38): the rows a user asks
# about first (keepalive /, HTTPS, HTTP/2, PHP), pinned (per core, the fair
# comparison on two CPUs), lepus against nginx, 3 short rounds, still interleaved.
QUICK_SCENARIOS = ("small", "tls-small", "h2-small", "php")
QUICK_SERVERS = ("lepus", "nginx")
QUICK_MODES = ("pinned",)
QUICK_ROUND_SECONDS = 2
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit status 2."""

    def error(self, message):
        sys.stderr.write("lepus-bench: %s (see --help)\n" % message)
        sys.exit(2)


def parse_args(argv):
    parser = OneLineParser(
        prog="lepus-bench",
        description="Runs ab and wrk against lepus, nginx and apache (lighttpd, h2o on "
        "request) with the same settings, in short interleaved rounds (all servers up at "
        "once; each round gives every server a turn of the same load, in rotating order), "
        "and writes CSV, JSON, Markdown and PNG charts. The verdict is the median over the "
        "rounds of the per-round ratio lepus / other server, with its min-max.",
        epilog="Scenarios: " + "; ".join("%s: %s" % (s.name, s.describe)
                                          for s in scenarios.SCENARIOS))
    parser.add_argument("--servers", default=None,
                        help="comma-separated, from: %s (default %s; --quick: %s)"
                        % (",".join(servers.KNOWN_SERVERS), ",".join(servers.DEFAULT_SERVERS),
                           ",".join(QUICK_SERVERS)))
    parser.add_argument("--io", default=None, metavar="LIST",
                        help="lepus's event engines, comma-separated, from: %s (default %s); "
                        "lepus runs once per engine, as a server of its own (lepus, "
                        "lepus-uring), in the same rounds as the others"
                        % (",".join(servers.IO_BACKENDS), servers.DEFAULT_IO))
    parser.add_argument("--scenarios", default=None,
                        help="comma-separated scenario names (default: all but the h3 ones; "
                        "--quick: %s)"
                        % ",".join(QUICK_SCENARIOS))
    parser.add_argument("--modes", default=None,
                        help="pinned (server on CPU 0, generator on CPU 1, one worker) and/or "
                        "unpinned (two workers) (default both; --quick: pinned)")
    parser.add_argument("--quick", action="store_true",
                        help="a first answer in under 2 minutes: lepus and nginx, pinned, "
                        "scenarios %s, 3 rounds of %d s (each can still be set with its "
                        "flag); prints the verdict and what the full run adds"
                        % (",".join(QUICK_SCENARIOS), QUICK_ROUND_SECONDS))
    parser.add_argument("--rounds", "--runs", type=int, default=None, dest="rounds",
                        help="rounds per scenario: each gives every server one turn "
                        "(default 7, 3 with --quick; --runs is the old name of this flag, "
                        "from before the rounds)")
    parser.add_argument("--round-seconds", type=int, default=None, metavar="S",
                        help="seconds of load in one server's turn (default 3, %d with --quick)"
                        % QUICK_ROUND_SECONDS)
    parser.add_argument("--warmup-seconds", type=int, default=1, metavar="S",
                        help="seconds of the same load per server before a scenario's first "
                        "round, not counted (default 1; 0: none)")
    parser.add_argument("--out", default=None, help="results folder (default "
                        "./bench-results/DATE)")
    parser.add_argument("--lepus", default=None, help="the lepus binary (default: the one "
                        "of the same build tree)")
    parser.add_argument("--lepus-before", default=None, metavar="BINARY",
                        help="another lepus binary (e.g. the build before a change), run with "
                        "the same settings as server 'lepus-before' in the same rounds; the "
                        "verdict also gives lepus / lepus-before")
    parser.add_argument("--port-base", type=int, default=28080,
                        help="first port; servers use consecutive ports")
    parser.add_argument("--idle-connections", type=int, default=10000,
                        help="idle keepalive connections held in the idle scenario")
    parser.add_argument("--access-log", action="store_true",
                        help="access log on for every server (default off for all)")
    parser.add_argument("--no-charts", action="store_true", help="skip the gnuplot charts")
    parser.add_argument("--keep-temp", action="store_true",
                        help="keep the generated configs and server logs")
    parser.add_argument("--redraw", metavar="DIR", default=None,
                        help="only rewrite results.md, ratios.csv and the charts of DIR from "
                        "its results.json")
    parser.add_argument("--micro", action="store_true",
                        help="run the Google Benchmark programs (build/<preset>/bench/*_bench) "
                        "into the results folder; alone, only them")
    args = parser.parse_args(argv)
    if args.servers is None:
        args.servers = ",".join(QUICK_SERVERS if args.quick else servers.DEFAULT_SERVERS)
    if args.modes is None:
        args.modes = ",".join(QUICK_MODES if args.quick else MODES)
    if args.round_seconds is None:
        args.round_seconds = QUICK_ROUND_SECONDS if args.quick else 3
    args.server_list = _split(args.servers, servers.KNOWN_SERVERS, "server")
    if args.io is not None and "lepus" not in args.server_list:
        parser.error("--io chooses lepus's event engines, but lepus is not in --servers")
    args.io_list = _split(servers.DEFAULT_IO if args.io is None else args.io,
                          servers.IO_BACKENDS, "io engine")
    # lepus once per engine, in its place in the rotation: lepus lepus-uring nginx ...
    # lepus-before follows them: lepus lepus-uring lepus-before nginx ...
    before = [servers.LEPUS_BEFORE] if args.lepus_before else []
    args.server_list = [expanded for name in args.server_list
                        for expanded in (([servers.lepus_name(io) for io in args.io_list] +
                                          before) if name == "lepus" else [name])]
    if args.lepus_before is not None:
        if servers.LEPUS_BEFORE not in args.server_list:
            parser.error("--lepus-before measures lepus against another lepus, but lepus is "
                         "not in --servers")
        if not (os.path.isfile(args.lepus_before) and os.access(args.lepus_before, os.X_OK)):
            parser.error("--lepus-before %s: no such executable" % args.lepus_before)
        args.lepus_before = os.path.abspath(args.lepus_before)
    args.mode_list = _split(args.modes, MODES, "mode")
    if args.scenarios is None:
        args.scenario_list = list(QUICK_SCENARIOS) if args.quick else [
            s.name for s in scenarios.SCENARIOS if s.default]
    else:
        args.scenario_list = _split(args.scenarios, scenarios.BY_NAME, "scenario")
    args.only_micro = args.micro and not any(
        a.startswith(("--servers", "--scenarios", "--io", "--lepus-before")) for a in argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 7
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.round_seconds < 1:
        parser.error("--round-seconds must be at least 1")
    if args.warmup_seconds < 0:
        parser.error("--warmup-seconds must be 0 or more")
    return args


def _split(text, known, what):
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in known:
            sys.stderr.write("lepus-bench: unknown %s '%s' (known: %s)\n"
                             % (what, name, ", ".join(known)))
            sys.exit(2)
    if not names:
        sys.stderr.write("lepus-bench: no %s given\n" % what)
        sys.exit(2)
    return list(dict.fromkeys(names))


def find_lepus(explicit):
    """--lepus, else the lepus of this build tree (build/X/src/tool -> ../server/lepus),
    else $LEPUS_BINARY."""
    candidates = [explicit] if explicit else [
        os.path.join(TOOL_DIR, "..", "server", "lepus"), os.environ.get("LEPUS_BINARY", "")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    if explicit:
        raise BenchError("--lepus %s: no such executable" % explicit)
    raise BenchError("no lepus binary found next to this tool; build it or pass --lepus PATH")


class Interrupted(Exception):
    """SIGTERM or SIGINT: stop the servers and leave."""


def _on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


class Progress:
    """Progress on stderr, with a time-left estimate corrected as turns finish."""

    def __init__(self, total_estimate):
        self.remaining = total_estimate
        self.done_estimate = 0.0
        self.started = time.monotonic()

    def show(self, text):
        elapsed = time.monotonic() - self.started
        scale = elapsed / self.done_estimate if self.done_estimate > 5 else 1.0
        left = int(self.remaining * scale)
        sys.stderr.write("lepus-bench: %s (about %dm%02ds left)\n" % (text, left // 60, left % 60))
        sys.stderr.flush()

    def finished(self, estimate):
        self.remaining = max(0.0, self.remaining - estimate)
        self.done_estimate += estimate


def plan(args, modes):
    """[(mode, scenario)] in the order they run."""
    return [(mode, scenarios.BY_NAME[name]) for mode in modes for name in args.scenario_list
            if rounds.applies(scenarios.BY_NAME[name], mode, modes)]


def lepus_binary(args, name, lepus):
    """The binary of a lepus server (lepus-before's own), None for the others."""
    if name == servers.LEPUS_BEFORE:
        return args.lepus_before
    return lepus if servers.lepus_io(name) else None


def check_answers(server, php, notes):
    """Refuses a server whose / or /hello.php is not exactly what we wrote."""
    if server.name in servers.PROXY_ONLY:
        return True  # it serves no files: only its proxy answer is checked
    status, body = loadgen.http_get(server.port, "/")
    if status != 200 or body != servers.INDEX_HTML.encode():
        notes.append("%s: GET / answered %s with %d bytes, not the 200 and index.html "
                     "written: no figures reported for it" % (server.name, status, len(body)))
        return False
    if php and not server.php_note:
        status, body = loadgen.http_get(server.port, "/hello.php")
        if status != 200 or body != servers.HELLO_BODY:
            server.php_note = "GET /hello.php answered %s %r, not 200 %r" % (
                status, body[:60], servers.HELLO_BODY)
    if php and server.php_note:
        notes.append("%s: php scenario skipped: %s" % (server.name, server.php_note))
    return True


def check_proxy_answer(server, backend_port, notes):
    """Sits a server out of the proxy scenario unless GET /proxy/hello comes
    back from the backend through it. Always True."""
    if backend_port and not server.proxy_note:
        status, body = loadgen.http_get(server.port, servers.PROXY_PATH)
        if status != 200 or body != servers.BACKEND_BODY:
            server.proxy_note = "GET %s answered %s %r, not the backend's 200" % (
                servers.PROXY_PATH, status, body[:60])
    if backend_port and server.proxy_note:
        notes.append("%s: proxy scenario skipped: %s" % (server.name, server.proxy_note))
    return True


def check_tls_answer(server, tls, notes):
    """Sits a server out of the TLS scenarios when its TLS listener does not give
    back index.html; says which servers have none. Always True (the plain
    scenarios still run)."""
    if tls and server.tls_port:
        status, body = loadgen.https_get(server.tls_port, "/")
        if status != 200 or body != servers.INDEX_HTML.encode():
            server.tls_note = "GET / over TLS answered %s with %d bytes" % (status, len(body))
            server.tls_port = None
    if tls and server.tls_note:
        notes.append("%s: TLS scenarios skipped: %s" % (server.name, server.tls_note))
    return True


def check_h3_answer(server, h3, notes):
    """Sits a server out of the h3 scenarios unless one request for / over HTTP/3
    (h3load -n1) gets a 200 of index.html's length; says why a server has no
    h3. Always True (the other scenarios still run)."""
    if h3 and server.h3_port:
        generated = loadgen.run_generator(loadgen.h3load_command(
            scenarios.h3_url(server, "/"), 1, 1, 0, requests=1), timeout=30)
        report = re.search(r"^LEPUS_BENCH (\{.*\})$", generated.output, re.M)
        answer = json.loads(report.group(1)) if report else {}
        good = (answer.get("requests"), answer.get("status_errors"), answer.get("bytes")) == \
            (1, 0, len(servers.INDEX_HTML.encode()))
        if not good:
            server.h3_note = "GET / over HTTP/3 did not answer index.html: %s" % (
                loadgen._tail(generated.output, 1))
            server.h3_port = None
    if h3 and server.h3_note:
        notes.append("%s: h3 scenarios skipped: %s" % (server.name, server.h3_note))
    return True


def run_mode(args, mode, params, lepus, root, tmp, jobs, progress, rows, notes):
    """Starts every server of one mode at once (each idles until its turn), runs
    the mode's scenarios in interleaved rounds, stops them all."""
    pinned = mode == "pinned"
    server_cpus, client_cpus = ("0", "1") if pinned else (None, None)
    workers = 1 if pinned else 2
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    needs_php = any(job[1].php for job in jobs)
    tls = servers.TlsSetup(os.path.join(tmp, "tls")) if any(job[1].tls for job in jobs) else None
    h3 = any(job[1].h3 for job in jobs)
    started = []
    try:
        ports = {name: args.port_base + i for i, name in enumerate(args.server_list)}
        for port in ports.values():
            servers.check_port_free(port)
        backend_port = None
        if any(job[1].proxy for job in jobs):
            backend_port = args.port_base + servers.BACKEND_PORT_OFFSET
            servers.check_port_free(backend_port)
            progress.show("[%s] starting the proxy scenario's backend on port %d"
                          % (mode, backend_port))
            started.append(servers.Backend(os.path.join(tmp, mode, "backend"), backend_port,
                                           client_cpus, nofile))
        live = {}
        for name in args.server_list:
            progress.show("[%s] starting %s on port %d" % (mode, name, ports[name]))
            # Each server gets its own php-fpm (same pool settings): a shared pool
            # would let one server's pooled FastCGI connections hold every child.
            fpm = None
            if needs_php:
                fpm = servers.PhpFpm(os.path.join(tmp, mode, name + "-php-fpm"), server_cpus,
                                     nofile)
                started.append(fpm)
            server = servers.Server(
                name, ports[name], root, os.path.join(tmp, mode, name), workers, server_cpus,
                fpm.socket if fpm else None, args.access_log, nofile,
                lepus=lepus_binary(args, name, lepus),
                io=args.io_list[0] if name == servers.LEPUS_BEFORE else None, tls=tls,
                backend_port=backend_port)
            server.fpm = fpm
            started.append(server)
            if check_answers(server, needs_php, notes) and check_tls_answer(server, tls, notes) \
                    and check_proxy_answer(server, backend_port, notes) \
                    and check_h3_answer(server, h3, notes):
                live[name] = server
        turns = rounds.Turns(mode, live, params, client_cpus, progress, rows, notes)
        for _, scenario in jobs:
            planned = rounds.estimate(scenario, params, args.rounds, len(args.server_list))
            done = turns.run_scenario(scenario, args.rounds)
            progress.finished(max(0.0, planned - done))  # servers that sat it out
    finally:
        # A second Ctrl-C must not leave a server half-stopped.
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
        for process in reversed(started):
            process.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_micro(out):
    """Runs build/<preset>/bench/*_bench with a short min time; JSON into out/micro."""
    programs = sorted(glob.glob(os.path.join(TOOL_DIR, "..", "..", "bench", "*_bench")))
    if not programs:
        raise BenchError("no micro-benchmarks next to this tool (build/<preset>/bench/*_bench):"
                         " configure with -DLEPUS_BENCH=ON and build them")
    folder = os.path.join(out, "micro")
    os.makedirs(folder, exist_ok=True)
    for index, program in enumerate(programs, 1):
        name = os.path.basename(program)
        sys.stderr.write("lepus-bench: micro %s (%d of %d)\n" % (name, index, len(programs)))
        with open(os.path.join(folder, name + ".log"), "w") as log:
            result = subprocess.run(
                [program, "--benchmark_min_time=0.1", "--benchmark_out_format=json",
                 "--benchmark_out=" + os.path.join(folder, name + ".json")],
                stdout=log, stderr=subprocess.STDOUT, check=False)
        if result.returncode != 0:
            sys.stderr.write("lepus-bench: %s exited with %d (see %s.log)\n"
                             % (name, result.returncode, name))
    return folder


def required_programs(args):
    names = {"taskset"} if "pinned" in args.mode_list else set()
    for name in args.scenario_list:
        names.update(scenarios.BY_NAME[name].needs)
        if scenarios.BY_NAME[name].tls:
            names.add("openssl")
    for name in args.server_list:
        if name in servers.SERVER_PROGRAMS:
            names.add(servers.SERVER_PROGRAMS[name])
    if not args.no_charts:
        names.add("gnuplot")
    return sorted(names)


def meta_data(args, argv, modes, lepus):
    with open("/proc/cpuinfo") as f:
        models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "host": socket.gethostname(), "cpus": os.cpu_count(),
            "cpu_model": models[0] if models else platform.machine(),
            "kernel": platform.release(), "load_start": "%.2f" % os.getloadavg()[0],
            "load_end": "?", "command": " ".join(["lepus-bench"] + argv),
            "servers": args.server_list, "io": args.io_list, "modes": modes,
            "rounds": args.rounds, "round_seconds": args.round_seconds,
            "warmup_seconds": args.warmup_seconds, "quick": args.quick,
            "access_log": args.access_log, "lepus": lepus, "lepus_before": args.lepus_before,
            "versions": {name: servers.server_version(name, lepus_binary(args, name, lepus))
                         for name in args.server_list}}


def write_results(out, meta, rows, notes, charts, on_terminal=False):
    if meta.get("load_end") in (None, "?"):  # kept as measured on --redraw
        meta["load_end"] = "%.2f" % os.getloadavg()[0]
    table = report.medians(rows)
    verdict = ratios.verdict(rows, meta["servers"])
    notes = list(dict.fromkeys(notes))
    report.write_csv(os.path.join(out, "results.csv"), rows)
    ratios.write_csv(os.path.join(out, "ratios.csv"), verdict)
    report.write_json(os.path.join(out, "results.json"), meta, rows, table, verdict, notes)
    drawn = []
    if charts and table:
        try:
            drawn = report.charts(out, meta, table, verdict)
        except RuntimeError as error:
            notes.append(str(error))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(report.markdown(meta, table, verdict, notes))
    if on_terminal:
        print("\n".join(report.verdict_lines(meta, table, verdict) or
                        ["No verdict: no server to compare lepus with gave a figure."]))
        print(quick_full_run_note(meta))
    return drawn


def quick_full_run_note(meta):
    """What a run without --quick adds to this first answer."""
    left_out = [s.name for s in scenarios.SCENARIOS if s.name not in QUICK_SCENARIOS]
    full = scenarios.Params(False, 10000)
    seconds = sum(rounds.estimate(s, full, 7, len(servers.DEFAULT_SERVERS))
                  for mode in MODES for s in scenarios.SCENARIOS if rounds.applies(s, mode, MODES))
    return ("This was --quick (%s; %d rounds of %d s). The full run (without --quick, about "
            "%d minutes) adds: servers %s, the unpinned mode, 7 rounds of 3 s, PHP with ab, "
            "and the scenarios %s." % (", ".join(meta["servers"]), meta["rounds"],
                                       meta["round_seconds"], round(seconds / 60),
                                       ", ".join(servers.DEFAULT_SERVERS), ", ".join(left_out)))


def redraw(out, charts):
    """Rewrites results.md and the charts from a results.json (after a report change)."""
    try:
        with open(os.path.join(out, "results.json")) as f:
            data = json.load(f)
    except (OSError, ValueError) as error:
        raise BenchError("--redraw %s: %s" % (out, error)) from None
    rows = data["runs"]
    for row in rows:  # results from before the rounds numbered alternated runs
        if "run" in row and "round" not in row:
            row["round"] = row.pop("run")
    write_results(out, data["meta"], rows, data.get("notes", []), charts)
    sys.stderr.write("lepus-bench: redrawn %s\n" % out)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    out = args.out or os.path.join("bench-results",
                                   datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    tmp = None
    try:
        if args.redraw:
            return redraw(args.redraw, not args.no_charts)
        if args.only_micro:
            os.makedirs(out, exist_ok=True)
            print("lepus-bench: micro-benchmarks in %s" % run_micro(out))
            return 0
        wants_lepus = any(servers.lepus_io(name) for name in args.server_list)
        lepus = find_lepus(args.lepus) if wants_lepus else None
        servers.require_programs(required_programs(args))
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # servers inherit it
        modes = list(args.mode_list)
        notes = []
        if "pinned" in modes and (os.cpu_count() or 1) < 2:
            modes.remove("pinned")
            notes.append("one CPU only: no pinned mode")
            if not modes:
                raise BenchError("pinned mode needs two CPUs; use --modes unpinned")
        params = scenarios.Params(args.quick, args.idle_connections, args.round_seconds,
                                  args.warmup_seconds)
        jobs = plan(args, modes)
        os.makedirs(out, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="lepus-bench-")
        root = servers.make_document_root(os.path.join(tmp, "www"))
        meta = meta_data(args, argv, modes, lepus)
        progress = Progress(sum(rounds.estimate(scenario, params, args.rounds,
                                                len(args.server_list))
                                for _, scenario in jobs) + 3 * len(modes))
        rows = []
        try:
            for mode in modes:
                run_mode(args, mode, params, lepus, root, tmp,
                         [job for job in jobs if job[0] == mode], progress, rows, notes)
        finally:
            if rows:
                drawn = write_results(out, meta, rows, notes, not args.no_charts,
                                      on_terminal=args.quick)
                sys.stderr.write("lepus-bench: results in %s (results.md, results.csv, ratios.csv, "
                                 "results.json%s)\n" % (out, ", %d charts" % len(drawn)
                                                        if drawn else ""))
        if args.micro:
            run_micro(out)
        if not any("error" not in row for row in rows):
            raise BenchError("no server produced a figure: " + ("; ".join(notes) or "?"))
        return 0
    except BenchError as error:
        sys.stderr.write("lepus-bench: %s\n" % error)
        return 1
    except Interrupted as signal_name:
        sys.stderr.write("lepus-bench: interrupted (%s); servers stopped\n" % signal_name)
        return 130
    finally:
        if tmp and not args.keep_temp:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp:
            sys.stderr.write("lepus-bench: configs and logs kept in %s\n" % tmp)
