"""The scenarios: each loads one server once and returns one or more rows of
metrics (test name -> dict). A row always carries the server's CPU (from
/proc), the generator's own CPU (from wait4) and whether the generator, not
the server, was the bottleneck.
"""
import re
import threading
import time

from . import loadgen, procstat

GENERATOR_BOUND = 0.90  # generator CPU, in cores, at which it is the bottleneck


class Params:
    """Durations and request counts: full runs follow ANCHORS.md, --quick is short."""

    def __init__(self, quick, idle_connections):
        self.quick = quick
        self.seconds = 3 if quick else 10
        self.ab_requests = 20000 if quick else 100000
        self.ab_big_requests = 1000000
        self.ab_k_requests = 50000 if quick else 200000
        self.php_ab_requests = 3000 if quick else 20000
        self.idle_connections = idle_connections
        self.slowloris_connections = 500 if quick else 1000
        self.slowloris_seconds = 10 if quick else 60


class Context:
    """Where the generator runs, and the durations."""

    def __init__(self, params, client_cpus):
        self.params = params
        self.client_cpus = client_cpus


def measure(ctx, server, cmd, parse, timeout=None):
    """Runs one generator against a server and adds CPU, RSS and the
    bottleneck flag to what the generator reported."""
    pids = [server.pid]
    backend = [server.fpm.process.pid] if server.fpm else []
    before, backend_before = procstat.cpu_sample(pids), procstat.cpu_sample(backend)
    generated = loadgen.run_generator(cmd, ctx.client_cpus, timeout)
    after, backend_after = procstat.cpu_sample(pids), procstat.cpu_sample(backend)
    if generated.returncode != 0 and "LEPUS_BENCH" not in generated.output:
        raise RuntimeError("%s exited with %s: %s" % (
            cmd[0].rsplit("/", 1)[-1], generated.returncode, loadgen._tail(generated.output)))
    metrics = parse(generated)
    server_cores = procstat.cpu_seconds_between(before, after) / generated.wall
    client_cores = generated.cpu / generated.wall
    metrics.update({
        "server_cores": server_cores,
        "rps_per_core": metrics["rps"] / server_cores if server_cores > 0.01 else 0.0,
        "backend_cores": procstat.cpu_seconds_between(backend_before, backend_after) /
        generated.wall,
        "client_cores": client_cores, "generator_bound": client_cores >= GENERATOR_BOUND,
        "server_rss_mb": procstat.rss_bytes(pids) / 1e6})
    return metrics


def url(server, path="/"):
    return "http://127.0.0.1:%d%s" % (server.port, path)


def wrk(ctx, server, path, connections):
    p = ctx.params
    return measure(ctx, server, loadgen.wrk_command(url(server, path), connections, p.seconds),
                   loadgen.parse_wrk, timeout=p.seconds + 60)


def ab(ctx, server, path, requests, concurrency, keepalive=False, tolerate=False):
    cmd = loadgen.ab_command(url(server, path), requests, concurrency, keepalive, tolerate)
    return measure(ctx, server, cmd, loadgen.parse_ab, timeout=600)


def run_idle(ctx, server):
    """wrk -c50 without and then with N idle keepalive connections held open."""
    base = wrk(ctx, server, "/", 50)
    rss_before = procstat.rss_bytes([server.pid])
    held = loadgen.IdleConnections(server.port, ctx.params.idle_connections)
    try:
        time.sleep(0.5)  # let the server settle the accepted connections
        rss_held = procstat.rss_bytes([server.pid])
        loaded = wrk(ctx, server, "/", 50)
        loaded["idle_held"] = len(held.sockets)
        loaded["idle_still_open"] = held.still_open()
        loaded["rss_per_idle_kib"] = (rss_held - rss_before) / 1024 / max(1, len(held.sockets))
    finally:
        held.close()
    base["idle_held"] = 0
    return [("idle 0", base), ("idle %dk" % (ctx.params.idle_connections // 1000), loaded)]


def run_slowloris(ctx, server):
    """slowhttptest (slow headers) for a bounded time while a probe makes a
    new-connection GET / every 0.5 s and ab -c10 runs midway."""
    p = ctx.params
    cmd = [loadgen.find_program("slowhttptest"), "-c", str(p.slowloris_connections), "-H",
           "-i", "10", "-r", "200", "-t", "GET", "-x", "24", "-p", "3",
           "-l", str(p.slowloris_seconds), "-u", url(server, "/")]
    probe = loadgen.Probe(server.port)
    result = {}

    def attack():
        result["generated"] = loadgen.run_generator(cmd, ctx.client_cpus,
                                                    timeout=p.slowloris_seconds + 60)
    attacker = threading.Thread(target=attack, daemon=True)
    before = procstat.cpu_sample([server.pid])
    started = time.monotonic()
    attacker.start()
    probe.start()
    try:
        time.sleep(min(6, p.slowloris_seconds / 2))  # -r 200: all connections open by now
        try:
            during = ab(ctx, server, "/", 2000, 10, tolerate=True)
        except RuntimeError as error:  # e.g. ab's own 30 s timeout: still report the outage
            during = {"rps": 0.0, "failed": 2000, "non2xx": 0, "ab_error": str(error)[-120:]}
    except BaseException:
        probe.stop()  # slowhttptest ends by itself at its -l bound
        raise
    attacker.join()
    probe.stop()
    wall = time.monotonic() - started
    generated = result.get("generated")
    if generated is None:
        raise RuntimeError("slowhttptest did not run")
    # slowhttptest colours its status lines: strip the ANSI escapes first.
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", generated.output)
    connected = _last_number(r"connected:\s+(\d+)", text)
    closed = _last_number(r"closed:\s+(\d+)", text)
    server_cores = procstat.cpu_seconds_between(before, procstat.cpu_sample([server.pid])) / wall
    during.update({"outage_s": probe.outage_seconds(), "probes": probe.sent,
                   "probes_failed": probe.failed, "slow_connected": connected,
                   "slow_closed": closed, "slow_total": p.slowloris_connections,
                   "server_cores": server_cores,
                   "client_cores": generated.cpu / generated.wall})
    during["generator_bound"] = False
    return [("slowloris", during)]


def _last_number(pattern, text):
    numbers = re.findall(pattern, text)
    return int(numbers[-1]) if numbers else None


class Scenario:
    """A named workload: which programs it needs, its rough duration, how to run it."""

    def __init__(self, name, describe, needs, estimate, run, quick=True, pinned_only=False,
                 php=False, once=False):
        self.name = name
        self.describe = describe
        self.needs = needs
        self.estimate = estimate  # Params -> seconds per server per run
        self.run = run  # (Context, Server) -> [(test name, metrics)]
        self.quick = quick
        self.pinned_only = pinned_only
        self.php = php
        self.once = once  # one run even when --runs asks for more (it is long)


def _single(test, function):
    return lambda ctx, server: [(test, function(ctx, server))]


SCENARIOS = [
    Scenario("ab", "ab -n N -c 100, HTTP/1.0, a new connection per request", ["ab"],
             lambda p: p.ab_requests / 15000 + 1,
             _single("ab", lambda c, s: ab(c, s, "/", c.params.ab_requests, 100))),
    Scenario("ab-big", "ab -n 1000000 -c 1000 -r", ["ab"], lambda p: p.ab_big_requests / 20000,
             _single("ab-big", lambda c, s: ab(c, s, "/", c.params.ab_big_requests, 1000,
                                               tolerate=True)), quick=False),
    Scenario("ab-k", "ab -k -n N -c 100 (keepalive)", ["ab"], lambda p: p.ab_k_requests / 40000 + 1,
             _single("ab-k", lambda c, s: ab(c, s, "/", c.params.ab_k_requests, 100,
                                             keepalive=True))),
    Scenario("small", "wrk -t1 -c100 on / (612 B)", ["wrk"], lambda p: p.seconds + 1,
             _single("small", lambda c, s: wrk(c, s, "/", 100))),
    Scenario("4k", "wrk -t1 -c100 on /4k.html", ["wrk"], lambda p: p.seconds + 1,
             _single("4k", lambda c, s: wrk(c, s, "/4k.html", 100))),
    Scenario("100k", "wrk -t1 -c100 on /100k.bin", ["wrk"], lambda p: p.seconds + 1,
             _single("100k", lambda c, s: wrk(c, s, "/100k.bin", 100))),
    Scenario("c1000", "wrk -t1 -c1000 on /", ["wrk"], lambda p: p.seconds + 2,
             _single("c1000", lambda c, s: wrk(c, s, "/", 1000))),
    Scenario("10m", "wrk -t1 -c10 on /10m.bin (MB/s)", ["wrk"], lambda p: p.seconds + 1,
             _single("10m", lambda c, s: wrk(c, s, "/10m.bin", 10))),
    Scenario("php", "wrk -c50 and ab -c50 on /hello.php (php-fpm, 8 static children)",
             ["wrk", "ab", "php-fpm"], lambda p: p.seconds + p.php_ab_requests / 5000 + 2,
             lambda c, s: [("php wrk", wrk(c, s, "/hello.php", 50)),
                           ("php ab", ab(c, s, "/hello.php", c.params.php_ab_requests, 50))],
             php=True),
    Scenario("idle", "wrk -c50 on / with 0 and with N idle keepalive connections held",
             ["wrk"], lambda p: 2 * p.seconds + p.idle_connections / 2500 + 3, run_idle,
             pinned_only=True),
    Scenario("slowloris", "slowhttptest -H (slow headers) with a probe every 0.5 s",
             ["slowhttptest", "ab"], lambda p: p.slowloris_seconds + 3, run_slowloris,
             pinned_only=True, once=True),
]
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
