"""Results: every turn as CSV and JSON, the verdict (ratios.py) and the
medians as Markdown tables, and PNG bar charts drawn by gnuplot.
"""
import csv
import json
import os
import statistics
import subprocess

from . import ratios
from .servers import find_program, lepus_name

# Columns of results.csv, in order (one line per server, test and round; turn =
# the server's place in that round's order).
CSV_FIELDS = ["mode", "test", "server", "round", "turn", "rps", "rps_per_core", "server_cores",
              "client_cores", "generator_bound", "p50_ms", "p90_ms", "p99_ms", "max_ms",
              "failed", "non2xx", "mbps", "server_rss_mb", "backend_cores", "requests",
              "seconds", "idle_held", "idle_still_open", "rss_per_idle_kib", "outage_s",
              "probes", "probes_failed", "slow_connected", "slow_closed", "slow_total"]
LABELS = {
    "ab": "ab -c100, no keepalive, `/`", "ab-big": "ab -c1000 -r, no keepalive, `/`",
    "ab-k": "ab -k -c100 `/`", "close": "wrk -c100 `Connection: close`, `/`",
    "small": "wrk -c100 `/`", "4k": "wrk -c100 4 KiB",
    "100k": "wrk -c100 100 KiB", "c1000": "wrk -c1000 `/`", "10m": "wrk -c10 10 MiB",
    "php wrk": "wrk -c50 hello.php", "php ab": "ab -c50 hello.php",
    "idle 0": "wrk -c50 `/`, no idle connections", "slowloris": "slowloris (slowhttptest -H)",
    "tls small": "HTTPS wrk -c100 `/`", "tls 4k": "HTTPS wrk -c100 4 KiB",
    "tls 100k": "HTTPS wrk -c100 100 KiB", "tls ab": "HTTPS ab -c100, a handshake per request"}
# Short names under the bars (the tables carry the long ones).
CHART_LABELS = {"ab": "ab", "ab-big": "ab -c1000", "ab-k": "ab -k", "close": "wrk close",
                "small": "wrk /",
                "4k": "wrk 4 KiB", "100k": "wrk 100 KiB", "c1000": "wrk -c1000 /",
                "php wrk": "wrk php", "php ab": "ab php", "idle 0": "wrk -c50 /",
                "tls small": "https /", "tls 4k": "https 4 KiB", "tls 100k": "https 100 KiB",
                "tls ab": "https ab"}
CHART_TESTS_EXCLUDED = ("10m", "slowloris")  # MB/s and seconds: not request rates
# Fields summarised by the largest round, not the median: allocators keep the
# memory the first idle round grew, so later rounds of the same server show ~0.
MAX_FIELDS = ("rss_per_idle_kib",)


# The rows of N connections held idle, memory each: TLS, HTTP/2, HTTP/3 (QUIC).
HELD_IDLE = {"tls idle ": "TLS", "h2 idle ": "HTTP/2", "h3 idle ": "HTTP/3 (QUIC)"}


def held_idle(test):
    return test.startswith(tuple(HELD_IDLE))


def label(test):
    if held_idle(test):
        kind = next(kind for prefix, kind in HELD_IDLE.items() if test.startswith(prefix))
        return "HTTPS: %s idle %s connections held (memory each)" % (test.split()[2], kind)
    if test.startswith("idle ") and test != "idle 0":
        return "wrk -c50 `/`, %s idle connections held" % test.split()[1]
    return LABELS.get(test, test)


def medians(rows):
    """{(mode, test, server): {field: median}} over the rounds of each."""
    groups = {}
    for row in rows:
        if "error" in row:
            continue
        groups.setdefault((row["mode"], row["test"], row["server"]), []).append(row)
    result = {}
    for key, runs in groups.items():
        merged = {"rounds": len(runs)}
        for field in CSV_FIELDS[CSV_FIELDS.index("rps"):]:
            values = [r[field] for r in runs if isinstance(r.get(field), (int, float))
                      and not isinstance(r.get(field), bool)]
            if values:
                merged[field] = (max if field in MAX_FIELDS else statistics.median)(values)
        merged["generator_bound"] = merged.get("client_cores", 0) >= 0.9
        result[key] = merged
    return result


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS + ["error"], extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(v) for k, v in row.items()})


def _csv_value(value):
    return round(value, 4) if isinstance(value, float) else value


def write_json(path, meta, rows, table, verdict, notes):
    """"runs": every turn (the key predates the rounds), "ratios": the verdict."""
    data = {"meta": meta, "runs": rows, "notes": notes, "ratios": verdict,
            "medians": [dict(mode=k[0], test=k[1], server=k[2], **v) for k, v in table.items()]}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)


def human(value):
    """12345 -> 12.3k, 123456 -> 123k, as in ANCHORS.md."""
    if value >= 1e6:
        return "%.2fM" % (value / 1e6)
    if value >= 1e5:
        return "%.0fk" % (value / 1e3)
    if value >= 1e3:
        return "%.1fk" % (value / 1e3)
    return "%.0f" % value


def milliseconds(value):
    return "%.2f ms" % value if value < 10 else "%.0f ms" % value


def cell(test, m):
    """One table cell: what matters for that test, plus error and bottleneck marks."""
    if test == "slowloris":
        text = "%.1f s outage (%d/%d probes ok)" % (
            m.get("outage_s", 0), m.get("probes", 0) - m.get("probes_failed", 0),
            m.get("probes", 0))
        if m.get("slow_closed") is not None:
            text += "; it closed %d of %d slow connections" % (
                m["slow_closed"], m.get("slow_total") or m.get("slow_connected") or 0)
        if m.get("rps"):
            text += "; ab -c10 meanwhile %s/s" % human(m["rps"])
        elif "rps" in m:
            text += "; ab -c10 meanwhile got nothing in 30 s"
        return text
    if held_idle(test):
        return "%d held, %.2f KiB each" % (m.get("idle_held", 0), m.get("rss_per_idle_kib", 0))
    if test == "10m":
        text = "%.2f GB/s" % (m["mbps"] / 1000)
        if m.get("server_cores", 0) > 0.01:
            text += " (%.2f GB/s/core)" % (m["mbps"] / 1000 / m["server_cores"])
    else:
        text = human(m["rps"])
        if m.get("rps_per_core"):
            text += " (%s/core)" % human(m["rps_per_core"])
        if test not in ("ab", "ab-big", "ab-k", "php ab"):  # ab's percentiles are whole ms
            text += ", p99 %s" % milliseconds(m.get("p99_ms", 0))
    if test.startswith("idle ") and test != "idle 0":
        text += "; %d held, %.2f KiB each" % (m.get("idle_held", 0), m.get("rss_per_idle_kib", 0))
    bad = m.get("failed", 0) + m.get("non2xx", 0)
    if bad:
        text += " ⚠ %s errors" % human(bad)
    if m.get("generator_bound"):
        text += " †"
    return text


def markdown(meta, table, verdict, notes):
    """The Markdown report: a header, the verdict (ratios), one table of medians
    per mode, a details table, notes."""
    servers = meta["servers"]
    # No H1: the lead includes this file inside README.md and docs/BENCHMARKS.md.
    lines = ["lepus-bench, %s on %s (%d CPUs, %s), Linux %s; load average %s at start, %s at end. "
             "Command: `%s`." % (meta["date"], meta["host"], meta["cpus"], meta["cpu_model"],
                                 meta["kernel"], meta["load_start"], meta["load_end"],
                                 meta["command"]), "",
             "Versions: %s. %s; the same settings for all (access log %s, keepalive 300 s "
             "without a request limit, sendfile on, each its own php-fpm with a static pool "
             "of 8)." % (", ".join("%s %s" % (s, meta["versions"].get(s, "?")) for s in servers),
                         _rounds_sentence(meta), "on" if meta["access_log"] else "off"), ""]
    lines += _engines_line(meta)
    modes = [mode for mode in meta["modes"] if _tests(table, mode)]
    lines += ratios.markdown(meta, verdict, lambda mode: _tests(table, mode), label)
    missing = ratios.missing_note(servers)
    if missing:
        lines += ["No verdict: %s." % missing, ""]
    lines += ["RPS per core = requests per second / server CPU in cores (utime+stime of all "
              "its processes, /proc). † = the load generator used ≥ 90% of a core: the figure "
              "is the generator's limit, compare RPS/core. ⚠ = failed or non-2xx responses.",
              ""]
    for mode in modes:
        title = {"pinned": "Pinned: server on CPU 0 (one worker), generator on CPU 1",
                 "unpinned": "Unpinned: two workers, sharing both CPUs with the generator"}
        lines += ["### " + title.get(mode, mode) + " (medians over the rounds)", "",
                  "| test | " + " | ".join(servers) + " |",
                  "|---|" + "---:|" * len(servers)]
        for test in _tests(table, mode):
            row = [label(test)]
            for server in servers:
                m = table.get((mode, test, server))
                row.append(cell(test, m) if m else "–")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    # Collapsed on GitHub: the tables above are what a reader wants first.
    lines += ["<details><summary>Details (medians): latency p50 / p99 / max, server and "
              "generator CPU in cores, server RSS</summary>", "",
              "| mode | test | server | p50 | p99 | max | server CPU | generator CPU | RSS MB "
              "| errors |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in modes:
        for test in _tests(table, mode):
            for server in servers:
                m = table.get((mode, test, server))
                if not m or "p50_ms" not in m:
                    continue
                lines.append("| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.1f | %d |" % (
                    mode, test, server, milliseconds(m["p50_ms"]), milliseconds(m["p99_ms"]),
                    milliseconds(m["max_ms"]), m.get("server_cores", 0),
                    m.get("client_cores", 0), m.get("server_rss_mb", 0),
                    m.get("failed", 0) + m.get("non2xx", 0)))
    lines += ["", "</details>"]
    if notes:
        lines += ["", "Notes:", ""] + ["- " + note for note in notes]
    return "\n".join(lines) + "\n"


def _rounds_sentence(meta):
    """How the figures were taken: interleaved rounds (or, in a results.json from
    before them, alternated runs)."""
    if "rounds" not in meta:
        return "Median of %s run(s), servers alternated run by run" % meta.get("runs", "?")
    text = ("%d interleaved rounds of %d s per server (all servers up at once, every server a "
            "turn per round, the order rotating by one each round" % (
                meta["rounds"], meta["round_seconds"]))
    if meta.get("warmup_seconds"):
        text += ", after a %d s warm-up of each per scenario" % meta["warmup_seconds"]
    if meta.get("lepus_before"):
        text += "; `lepus-before` = `%s`" % meta["lepus_before"]
    return text + ")"


def _engines_line(meta):
    """Which lepus column is which --io engine, when more than the default ran."""
    engines = meta.get("io") or ["epoll"]
    if engines == ["epoll"]:
        return []
    return ["lepus event engines: " + ", ".join(
        "`%s` = `lepus --io %s`" % (lepus_name(io), io)
        for io in engines) + ".", ""]


def verdict_lines(meta, table, verdict):
    """The verdict tables alone (what --quick prints on the terminal)."""
    return ratios.markdown(meta, verdict, lambda mode: _tests(table, mode), label)


def _tests(table, mode):
    order = ["ab", "ab-big", "ab-k", "close", "small", "4k", "100k", "c1000", "10m", "php wrk",
             "php ab", "idle 0", "tls small", "tls 4k", "tls 100k", "tls ab"]
    present = {test for (m, test, _) in table if m == mode}
    tests = [t for t in order if t in present]
    tests += sorted(t for t in present if t not in order and t != "slowloris")
    return tests + (["slowloris"] if "slowloris" in present else [])


def charts(out, meta, table, verdict=()):
    """Draws bench-<mode>-rps.png, -rps-per-core.png and -latency.png (medians),
    and -ratio-rps.png and -ratio-per-core.png (the verdict); returns paths."""
    gnuplot = find_program("gnuplot")
    if not gnuplot:
        return []
    servers = meta["servers"]
    drawn = []
    for mode in meta["modes"]:
        for name, title in (("rps", "req/s (GB/s for 10 MiB)"),
                            ("per_core", "per server core-second")):
            png = _ratio_chart(gnuplot, out, mode, [e for e in verdict if e["mode"] == mode],
                               _tests(table, mode), name, title)
            drawn += [png] if png else []
        tests = [t for t in _tests(table, mode)
                 if t not in CHART_TESTS_EXCLUDED and not held_idle(t)]
        if not tests:
            continue
        for field, title, suffix in (
                ("rps", "requests per second", "rps"),
                ("rps_per_core", "requests per second per server core", "rps-per-core"),
                ("latency", "latency p50 and p99 (ms, log scale; wrk tests)", "latency")):
            data = os.path.join(out, "bench-%s-%s.dat" % (mode, suffix))
            png = os.path.join(out, "bench-%s-%s.png" % (mode, suffix))
            if field == "latency":
                chosen = [t for t in tests if t not in ("ab", "ab-big", "ab-k", "php ab")]
                columns = ["%s p50" % s for s in servers] + ["%s p99" % s for s in servers]
                values = lambda m, col: m.get("p50_ms" if col.endswith("p50") else "p99_ms")
            else:
                chosen, columns = tests, list(servers)
                values = lambda m, col, field=field: m.get(field)
            if not chosen:
                continue
            with open(data, "w") as f:
                f.write('"test" ' + " ".join('"%s"' % c for c in columns) + "\n")
                for test in chosen:
                    cells = []
                    for col in columns:
                        m = table.get((mode, test, col.split()[0]))
                        v = values(m, col) if m else None
                        cells.append("%.4f" % v if v else "-")
                    short = CHART_LABELS.get(test) or "+%s idle" % test.split()[-1]
                    f.write('"%s" %s\n' % (short, " ".join(cells)))
            numbers = [v for test in chosen for col in columns
                       for m in [table.get((mode, test, col.split()[0]))]
                       for v in [values(m, col) if m else None] if v]
            script = _gnuplot_script(data, png, "lepus-bench, %s: %s" % (mode, title),
                                     servers, field == "latency",
                                     min(numbers, default=1.0) / 2)
            result = subprocess.run([gnuplot], input=script, capture_output=True, text=True)
            if result.returncode == 0 and os.path.exists(png):
                drawn.append(png)
            else:
                raise RuntimeError("gnuplot failed: " + result.stderr.strip()[-300:])
    return drawn


def _ratio_chart(gnuplot, out, mode, entries, tests, name, title):
    """bench-<mode>-ratio-<name>.png: a bar per test and pair (lepus / other) at the
    median of the per-round ratios, its whisker from min to max; None if empty."""
    pairs = list(dict.fromkeys((e["server"], e["against"]) for e in entries
                               if name + "_median" in e))
    by_key = {(e["test"], e["server"], e["against"]): e for e in entries}
    chosen = [t for t in tests if any((t,) + pair in by_key for pair in pairs)]
    if not pairs or not chosen:
        return None
    suffix = name.replace("_", "-")
    data = os.path.join(out, "bench-%s-ratio-%s.dat" % (mode, suffix))
    png = os.path.join(out, "bench-%s-ratio-%s.png" % (mode, suffix))
    with open(data, "w") as f:
        for test in chosen:
            cells = []
            for pair in pairs:
                entry = by_key.get((test,) + pair, {})
                cells += ["%.4f" % entry[name + field] if name + field in entry else "-"
                          for field in ("_median", "_min", "_max")]
            f.write('"%s" %s\n' % (CHART_LABELS.get(test) or test, " ".join(cells)))
    # Colour of the other server: the bars are "lepus against it".
    colours = ['set linetype %d lc rgb "%s"' % (i + 1, COLOURS.get(against, "#7f8c8d"))
               for i, (_, against) in enumerate(pairs)]
    plots = ['"%s" using %d:%d:%d%s title "%s / %s" lt %d' % (
        data, 2 + 3 * i, 3 + 3 * i, 4 + 3 * i, ":xtic(1)" if i == 0 else "", server, against,
        i + 1) for i, (server, against) in enumerate(pairs)]
    script = "\n".join(colours + [
        'set terminal pngcairo size 1200,600 font "Sans,10"',
        'set output "%s"' % png,
        'set title "lepus-bench, %s: lepus / other server, %s (median of the per-round ratios, '
        'min-max)" font "Sans,12"' % (mode, title),
        "set style data histograms",
        "set style histogram errorbars gap 1 lw 1",
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.9",
        'set datafile missing "-"',
        "set key outside top center horizontal",
        "set grid ytics",
        "set xtics scale 0",
        "set yrange [0:*]",
        # Above the line lepus is ahead.
        "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5",
        "set lmargin 10",
        "set bmargin 3",
        "plot " + ", ".join(plots), ""])
    result = subprocess.run([gnuplot], input=script, capture_output=True, text=True)
    if result.returncode != 0 or not os.path.exists(png):
        raise RuntimeError("gnuplot failed: " + result.stderr.strip()[-300:])
    return png


# One colour per server in every chart, whatever the server list.
COLOURS = {"lepus": "#c0392b", "lepus-uring": "#f1948a", "lepus-before": "#641e16",
           "nginx": "#27ae60",
           "apache": "#2980b9", "lighttpd": "#e67e22", "h2o": "#8e44ad"}


def _gnuplot_script(data, png, title, servers, log, floor):
    """Clustered bars, one colour per server; for latency, p50 pale and p99 solid."""
    count = len(servers)
    colours = ['set linetype %d lc rgb "%s"' % (i + 1, COLOURS.get(name, "#7f8c8d"))
               for i, name in enumerate(servers)]
    if log:
        plot = ('plot for [i=2:%d] "%s" using i:xtic(1) title columnheader(i) lt (i-1) '
                'fs solid 0.35, for [i=%d:%d] "%s" using i title columnheader(i) lt (i-%d) '
                'fs solid 0.9' % (count + 1, data, count + 2, 2 * count + 1, data, count + 1))
    else:
        plot = 'plot for [i=2:%d] "%s" using i:xtic(1) title columnheader(i) lt (i-1)' % (
            count + 1, data)
    return "\n".join(colours + [
        'set terminal pngcairo size 1200,600 font "Sans,10"',
        'set output "%s"' % png,
        'set title "%s" font "Sans,13"' % title,
        "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.9",
        'set datafile missing "-"',
        "set key outside top center horizontal",
        "set grid ytics",
        "set xtics scale 0",
        "set yrange [%s:*]" % ("%g" % floor if log else "0"),
        "set logscale y" if log else "set format y \"%.0s%c\"",
        "set lmargin 10",
        "set bmargin 3",
        plot, ""])
