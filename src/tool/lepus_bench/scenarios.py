"""The scenarios: each loads one server for one turn of a round (a few
seconds) and returns one or more rows of metrics (test name -> dict). A row
always carries the server's CPU during its turn (from /proc), the generator's
own CPU (from wait4) and whether the generator, not the server, was the
bottleneck.
"""
import json
import re
import subprocess
import threading
import time

from . import loadgen, procstat

GENERATOR_BOUND = 0.90  # generator CPU, in cores, at which it is the bottleneck


class Params:
    """How long a turn lasts, and the sizes of the idle and slowloris scenarios
    (--quick makes those smaller)."""

    def __init__(self, quick, idle_connections, round_seconds=3, warmup_seconds=1):
        self.quick = quick
        self.round_seconds = round_seconds
        self.warmup_seconds = warmup_seconds
        self.idle_connections = idle_connections
        self.slowloris_connections = 500 if quick else 1000
        self.slowloris_seconds = 10 if quick else 60


class Context:
    """Where the generator runs, and how long this turn lasts (a round's turn,
    or the shorter warm-up)."""

    def __init__(self, params, client_cpus, seconds):
        self.params = params
        self.client_cpus = client_cpus
        self.seconds = seconds


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


def url(server, path="/", tls=False):
    if tls:
        return "https://127.0.0.1:%d%s" % (server.tls_port, path)
    return "http://127.0.0.1:%d%s" % (server.port, path)


def wrk(ctx, server, path, connections, headers=(), tls=False):
    cmd = loadgen.wrk_command(url(server, path, tls), connections, ctx.seconds, headers=headers)
    return measure(ctx, server, cmd, loadgen.parse_wrk, timeout=ctx.seconds + 60)


def h2load(ctx, server, path, connections, streams, headers=(), tls=True):
    """HTTP/2 over the server's TLS listener (ALPN h2), or with tls=False over
    its plain one (h2c with prior knowledge: h2load sends the preface at once)."""
    cmd = loadgen.h2load_command(url(server, path, tls=tls), connections, streams, ctx.seconds,
                                 headers=headers)
    return measure(ctx, server, cmd, loadgen.parse_h2load, timeout=ctx.seconds + 60)


def h3load(ctx, server, path, connections, streams, headers=()):
    """HTTP/3 on the server's QUIC listener (the TLS port's number, UDP)."""
    cmd = loadgen.h3load_command(h3_url(server, path), connections, streams, ctx.seconds,
                                 headers=headers)
    return measure(ctx, server, cmd, loadgen.parse_wrk, timeout=ctx.seconds + 60)


def h3_url(server, path="/"):
    return "https://127.0.0.1:%d%s" % (server.h3_port, path)


def ab(ctx, server, path, concurrency, keepalive=False, tolerate=False, tls=False):
    """ab for this turn's seconds (-t)."""
    cmd = loadgen.ab_command(url(server, path, tls), concurrency, seconds=ctx.seconds,
                             keepalive=keepalive, tolerate_errors=tolerate)
    return measure(ctx, server, cmd, loadgen.parse_ab, timeout=ctx.seconds + 60)


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


def run_tls_idle(ctx, server, h2=False):
    """Memory per idle TLS connection: N connections held after a handshake and
    one answered request each (the TLS issue's target: at or below nginx's);
    with h2, HTTP/2 connections (the HTTP/2 issue's)."""
    rss_before = procstat.rss_bytes([server.pid])
    held = loadgen.IdleConnections(server.tls_port, ctx.params.idle_connections, tls=True,
                                   h2=h2)
    try:
        time.sleep(0.5)
        rss_held = procstat.rss_bytes([server.pid])
        row = {"rps": 0.0, "idle_held": len(held.sockets), "idle_still_open": held.still_open(),
               "rss_per_idle_kib": (rss_held - rss_before) / 1024 / max(1, len(held.sockets)),
               "server_rss_mb": rss_held / 1e6, "server_cores": 0.0, "client_cores": 0.0,
               "generator_bound": False}
    finally:
        held.close()
    return [("%s idle %dk" % ("h2" if h2 else "tls", ctx.params.idle_connections // 1000), row)]


def run_h3_idle(ctx, server):
    """Memory per idle QUIC connection: h3load -idle holds N connections, each
    after one answered request, until its standard input closes."""
    count = min(ctx.params.idle_connections, H3_IDLE_MAX)
    cmd = [loadgen.find_program("h3load"), "-idle", str(count), "-hold", "600",
           h3_url(server, "/")]
    if ctx.client_cpus:
        cmd = [loadgen.find_program("taskset") or "taskset", "-c", ctx.client_cpus] + cmd
    rss_before = procstat.rss_bytes([server.pid])
    holder = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        timer = threading.Timer(120 + count / 50, holder.kill)  # a bound on the set-up
        timer.start()
        line = ""
        for line in holder.stdout:
            if line.startswith("LEPUS_BENCH_IDLE "):
                break
        timer.cancel()
        if not line.startswith("LEPUS_BENCH_IDLE "):
            raise RuntimeError("h3load -idle printed no report (exit %s)" % holder.poll())
        held = json.loads(line.split(" ", 1)[1])
        time.sleep(0.5)
        rss_held = procstat.rss_bytes([server.pid])
        row = {"rps": 0.0, "idle_held": held["held"], "idle_still_open": held["held"],
               "failed": held["failed"],
               "rss_per_idle_kib": (rss_held - rss_before) / 1024 / max(1, held["held"]),
               "server_rss_mb": rss_held / 1e6, "server_cores": 0.0, "client_cores": 0.0,
               "generator_bound": False}
    finally:
        holder.stdin.close()  # h3load closes its connections and exits
        try:
            holder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            holder.kill()
            holder.wait()
    return [("h3 idle %dk" % (count // 1000), row)]


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
            cmd = loadgen.ab_command(url(server, "/"), 10, requests=2000, tolerate_errors=True)
            during = measure(ctx, server, cmd, loadgen.parse_ab, timeout=120)
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
    """A named workload: which programs it needs, its rough duration, how to run
    one turn of it, and how to warm a server up for it."""

    def __init__(self, name, describe, needs, estimate, run, pinned_only=False,
                 php=False, once=False, warm_up=None, tls=False, only=(), proxy=False, h3=False,
                 default=True):
        self.name = name
        self.describe = describe
        self.needs = needs
        self.estimate = estimate  # (Params, seconds of the turn) -> seconds per server
        self.run = run  # (Context, Server) -> [(test name, metrics)]
        self.pinned_only = pinned_only
        self.php = php
        self.tls = tls  # on each server's TLS listener (servers without one sit it out)
        self.once = once  # one round, no warm-up, whatever --rounds says (it is long)
        # The servers it compares (empty: all): compression is set up alike only
        # in lepus and nginx (gzip on, gzip_static on, the same level and types).
        self.only = only
        self.proxy = proxy  # through each server's reverse proxy to one shared backend
        self.h3 = h3  # HTTP/3 on each server's QUIC listener (servers without one sit it out)
        # In the run without --scenarios; the h3 rows are asked for by name, as
        # their generator is built here (scripts/install-h3load), not a package.
        self.default = default
        # (Context, Server) -> None; by default one turn of the scenario itself.
        self.warm_up = warm_up or (lambda ctx, server: self.run(ctx, server))


def _single(test, function):
    return lambda ctx, server: [(test, function(ctx, server))]


def _turn(p, seconds):
    return seconds + 1  # the generator's start and the /proc samples


# wrk -H "Connection: close": every response ends its connection, and wrk opens the
# next one at once. wrk spends less per connection than ab, so the server, not the
# generator, becomes the limit of a connection-churn run (issue 15).
CLOSE_HEADER = "Connection: close"
# h2c with prior knowledge on the port that also speaks HTTP/1.1: nginx 1.22
# cannot (its `listen ... http2` makes a plain port h2c-only), so it sits out.
H2C_SERVERS = ("lepus", "lepus-before", "h2o")
# A browser's Accept-Encoding, less zstd (nginx has no zstd): the compression rows.
ACCEPT_GZIP_BR = "Accept-Encoding: gzip, br"
COMPRESSING = ("lepus", "lepus-before", "nginx")
# Idle QUIC connections held by h3idle: each is a UDP socket and a quic-go
# connection in the generator (tens of KiB), so fewer than the TCP idle rows.
H3_IDLE_MAX = 2000

SCENARIOS = [
    Scenario("ab", "ab -c 100 for a turn, HTTP/1.0, a new connection per request", ["ab"],
             _turn, _single("ab", lambda c, s: ab(c, s, "/", 100))),
    Scenario("ab-big", "ab -c 1000 -r for a turn", ["ab"], _turn,
             _single("ab-big", lambda c, s: ab(c, s, "/", 1000, tolerate=True))),
    Scenario("ab-k", "ab -k -c 100 for a turn (keepalive)", ["ab"], _turn,
             _single("ab-k", lambda c, s: ab(c, s, "/", 100, keepalive=True))),
    Scenario("close", "wrk -t1 -c100 with 'Connection: close' on / (a connection per "
             "request)", ["wrk"], _turn,
             _single("close", lambda c, s: wrk(c, s, "/", 100, headers=[CLOSE_HEADER]))),
    Scenario("small", "wrk -t1 -c100 on / (612 B)", ["wrk"], _turn,
             _single("small", lambda c, s: wrk(c, s, "/", 100))),
    Scenario("4k", "wrk -t1 -c100 on /4k.html", ["wrk"], _turn,
             _single("4k", lambda c, s: wrk(c, s, "/4k.html", 100))),
    Scenario("100k", "wrk -t1 -c100 on /100k.bin", ["wrk"], _turn,
             _single("100k", lambda c, s: wrk(c, s, "/100k.bin", 100))),
    Scenario("c1000", "wrk -t1 -c1000 on /", ["wrk"], lambda p, seconds: seconds + 2,
             _single("c1000", lambda c, s: wrk(c, s, "/", 1000))),
    Scenario("10m", "wrk -t1 -c10 on /10m.bin (GB/s)", ["wrk"], _turn,
             _single("10m", lambda c, s: wrk(c, s, "/10m.bin", 10))),
    Scenario("php", "wrk -c50 and ab -c50 on /hello.php, a turn each (php-fpm, 8 static "
             "children; --quick: wrk only)", ["wrk", "ab", "php-fpm"],
             lambda p, seconds: (1 if p.quick else 2) * seconds + 2,
             lambda c, s: [("php wrk", wrk(c, s, "/hello.php", 50))] + (
                 [] if c.params.quick else [("php ab", ab(c, s, "/hello.php", 50))]),
             php=True),
    Scenario("tls-small", "wrk -t1 -c100 on / over HTTPS (keepalive)", ["wrk"], _turn,
             _single("tls small", lambda c, s: wrk(c, s, "/", 100, tls=True)), tls=True),
    Scenario("tls-4k", "wrk -t1 -c100 on /4k.html over HTTPS", ["wrk"], _turn,
             _single("tls 4k", lambda c, s: wrk(c, s, "/4k.html", 100, tls=True)), tls=True),
    Scenario("tls-100k", "wrk -t1 -c100 on /100k.bin over HTTPS", ["wrk"], _turn,
             _single("tls 100k", lambda c, s: wrk(c, s, "/100k.bin", 100, tls=True)),
             tls=True),
    Scenario("tls-ab", "ab -c 100 over HTTPS for a turn: a full handshake per request", ["ab"],
             _turn, _single("tls ab", lambda c, s: ab(c, s, "/", 100, tls=True)), tls=True),
    Scenario("gzip-html", "wrk -t1 -c100 on a 100 KiB HTML page, Accept-Encoding: gzip, br "
             "(lepus and nginx with gzip on)", ["wrk"], _turn,
             _single("gzip html", lambda c, s: wrk(c, s, "/100k.html", 100,
                                                   headers=[ACCEPT_GZIP_BR])), only=COMPRESSING),
    Scenario("gzip-js", "wrk -t1 -c100 on a 300 KiB script, Accept-Encoding: gzip, br",
             ["wrk"], _turn,
             _single("gzip js", lambda c, s: wrk(c, s, "/300k.js", 100,
                                                 headers=[ACCEPT_GZIP_BR])), only=COMPRESSING),
    Scenario("php-gzip", "wrk -c50 on a 20 KiB PHP page, Accept-Encoding: gzip", ["wrk", "php-fpm"],
             _turn, _single("php gzip", lambda c, s: wrk(c, s, "/page.php", 50,
                                                        headers=["Accept-Encoding: gzip"])),
             php=True, only=COMPRESSING),
    Scenario("proxy", "wrk -t1 -c100 on /proxy/hello: through the server's reverse proxy "
             "(keepalive pool) to one nginx answering from memory", ["wrk", "nginx"], _turn,
             _single("proxy", lambda c, s: wrk(c, s, "/proxy/hello", 100)),
             proxy=True),
    Scenario("h2-small", "h2load -c100 -m10 on / over HTTPS (ALPN h2)", ["h2load"], _turn,
             _single("h2 small", lambda c, s: h2load(c, s, "/", 100, 10)), tls=True),
    Scenario("h2-4k", "h2load -c100 -m10 on /4k.html over HTTPS (ALPN h2)", ["h2load"], _turn,
             _single("h2 4k", lambda c, s: h2load(c, s, "/4k.html", 100, 10)), tls=True),
    Scenario("h2-100k", "h2load -c10 -m1 on /100k.bin over HTTPS (ALPN h2)", ["h2load"], _turn,
             _single("h2 100k", lambda c, s: h2load(c, s, "/100k.bin", 10, 1)), tls=True),
    # Issue 38: many streams on few connections, as a browser's page of assets.
    Scenario("h2-m100", "h2load -c10 -m100 on / over HTTPS (ALPN h2): 100 concurrent streams "
             "per connection", ["h2load"], _turn,
             _single("h2 m100", lambda c, s: h2load(c, s, "/", 10, 100)), tls=True),
    Scenario("h2c-small", "h2load -c100 -m10 on / over plain TCP (h2c, prior knowledge)",
             ["h2load"], _turn,
             _single("h2c small", lambda c, s: h2load(c, s, "/", 100, 10, tls=False)), only=H2C_SERVERS),
    Scenario("h2c-4k", "h2load -c100 -m10 on /4k.html over plain TCP (h2c)", ["h2load"], _turn,
             _single("h2c 4k", lambda c, s: h2load(c, s, "/4k.html", 100, 10, tls=False)), only=H2C_SERVERS),
    Scenario("h2c-100k", "h2load -c10 -m1 on /100k.bin over plain TCP (h2c)", ["h2load"], _turn,
             _single("h2c 100k", lambda c, s: h2load(c, s, "/100k.bin", 10, 1, tls=False)), only=H2C_SERVERS),
    # HTTP/3 (issue 39): the h2 rows' loads through bench/h3load, on the same
    # pages, so h3 and h2 sit on the same page of the report.
    Scenario("h3-small", "h3load -c100 -m10 on / over HTTP/3 (QUIC, the TLS port's number)",
             ["h3load"], _turn, _single("h3 small", lambda c, s: h3load(c, s, "/", 100, 10)),
             tls=True, h3=True, default=False),
    Scenario("h3-4k", "h3load -c100 -m10 on /4k.html over HTTP/3", ["h3load"], _turn,
             _single("h3 4k", lambda c, s: h3load(c, s, "/4k.html", 100, 10)), tls=True, h3=True,
             default=False),
    Scenario("h3-100k", "h3load -c10 -m1 on /100k.bin over HTTP/3", ["h3load"], _turn,
             _single("h3 100k", lambda c, s: h3load(c, s, "/100k.bin", 10, 1)), tls=True,
             h3=True, default=False),
    Scenario("h3-idle", "N idle QUIC connections held (after one request each, at most %d): "
             "memory per connection" % H3_IDLE_MAX, ["h3load"],
             lambda p, seconds: min(p.idle_connections, H3_IDLE_MAX) / 200 + 3, run_h3_idle,
             pinned_only=True, once=True, tls=True, h3=True, default=False),
    Scenario("h2-idle", "N idle HTTP/2 connections held (after one request each): memory per "
             "connection", [], lambda p, seconds: p.idle_connections / 1000 + 3,
             lambda c, s: run_tls_idle(c, s, h2=True), pinned_only=True, once=True, tls=True),
    Scenario("tls-idle", "N idle TLS connections held: memory per connection", [],
             lambda p, seconds: p.idle_connections / 1000 + 3, run_tls_idle, pinned_only=True,
             once=True, tls=True),
    Scenario("idle", "wrk -c50 on / with 0 and with N idle keepalive connections held",
             ["wrk"], lambda p, seconds: 2 * seconds + p.idle_connections / 2500 + 3, run_idle,
             pinned_only=True, warm_up=lambda c, s: wrk(c, s, "/", 50)),
    Scenario("slowloris", "slowhttptest -H (slow headers) with a probe every 0.5 s",
             ["slowhttptest", "ab"], lambda p, seconds: p.slowloris_seconds + 3, run_slowloris,
             pinned_only=True, once=True),
]
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
