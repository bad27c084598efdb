"""The verdict: lepus against each other server, read from per-round ratios.

This machine switches between speed phases about 2x apart that last minutes
(issue 15), so a figure from one round is only comparable with the figures of
the same round: within a round every server gets the same load within a few
seconds of the others. For every round, lepus's figure is divided by each
other server's figure of that round; the verdict is the median of those
per-round ratios, with their min and max as the spread. Two figures: requests
per second (GB/s for the 10 MiB file) and the same per server core-second
(the server's CPU during its turn, from /proc).
"""
import csv
import statistics

from .servers import lepus_io

# Tests whose rows are not a request rate of the server (seconds of outage).
NOT_RATES = ("slowloris",)
# Columns of ratios.csv and of the "ratios" list in results.json.
FIELDS = ["mode", "test", "server", "against", "rounds", "rps_median", "rps_min", "rps_max",
          "per_core_median", "per_core_min", "per_core_max"]


def subjects(servers):
    """The lepus servers whose ratios are the verdict (every --io engine)."""
    return [name for name in servers if lepus_io(name)]


def references(servers):
    """What lepus is measured against: the anchors and lepus-before."""
    return [name for name in servers if not lepus_io(name)]


def throughput(test, row):
    """(figure, figure per server core) of one row: GB/s for the 10 MiB file
    (the bytes, not the count, are what that test is about), else req/s."""
    value = row.get("mbps") if test == "10m" else row.get("rps")
    if not isinstance(value, (int, float)) or value <= 0:
        return None, None
    cores = row.get("server_cores") or 0
    return value, value / cores if cores > 0.01 else None


def per_round(rows, servers):
    """{(mode, test, server, against): [(round, rps ratio, per-core ratio or None)]}."""
    figures = {}
    for row in rows:
        if "error" in row or row["test"] in NOT_RATES:
            continue
        round_number = row.get("round")
        figure = throughput(row["test"], row)
        if figure[0] is not None:
            figures[(row["mode"], row["test"], round_number, row["server"])] = figure
    ratios = {}
    lepus_servers, others = subjects(servers), references(servers)
    # Sorted by round so that each list of ratios reads round 1, 2, ...
    for (mode, test, round_number, server), (value, per_core) in sorted(
            figures.items(), key=lambda item: (item[0][:2], item[0][3], item[0][2] or 0)):
        if server not in lepus_servers:
            continue
        for against in others:
            other = figures.get((mode, test, round_number, against))
            if other is None:
                continue
            core_ratio = per_core / other[1] if per_core and other[1] else None
            ratios.setdefault((mode, test, server, against), []).append(
                (round_number, value / other[0], core_ratio))
    return ratios


def verdict(rows, servers):
    """[{FIELDS...}]: median, min and max of the per-round ratios, per mode,
    test, lepus server and server it is measured against."""
    result = []
    for (mode, test, server, against), rounds in per_round(rows, servers).items():
        entry = {"mode": mode, "test": test, "server": server, "against": against,
                 "rounds": len(rounds)}
        for name, values in (("rps", [r[1] for r in rounds]),
                             ("per_core", [r[2] for r in rounds if r[2] is not None])):
            if values:
                entry.update({name + "_median": statistics.median(values),
                              name + "_min": min(values), name + "_max": max(values)})
        result.append(entry)
    return result


def write_csv(path, entries):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        for entry in entries:
            writer.writerow({k: round(v, 4) if isinstance(v, float) else v
                             for k, v in entry.items()})


def spread(entry, name):
    """'0.89 [0.88-0.90]', or '–' without figures."""
    if name + "_median" not in entry:
        return "–"
    return "%.2f [%.2f-%.2f]" % (entry[name + "_median"], entry[name + "_min"],
                                 entry[name + "_max"])


def markdown(meta, entries, tests_in_order, label):
    """The verdict tables, one per mode: a line per test and server lepus is
    measured against. tests_in_order(mode) gives the row order, label(test) the
    name of a test."""
    if not entries:
        return []
    servers = meta["servers"]
    rounds = meta.get("rounds", meta.get("runs"))
    lines = ["### Verdict: median of the per-round ratios [min-max]", "",
             "Each ratio is lepus's figure divided by the other server's figure of the same "
             "round (%s rounds%s); above 1 lepus is ahead. Per core = per server "
             "core-second (server CPU during its turn, /proc). The 10 MiB row compares GB/s."
             % (rounds, " of %s s" % meta["round_seconds"] if meta.get("round_seconds")
                else ""), ""]
    by_key = {(e["mode"], e["test"], e["server"], e["against"]): e for e in entries}
    for mode in meta["modes"]:
        pairs = [(s, a) for s in subjects(servers) for a in references(servers)]
        body = []
        for test in tests_in_order(mode):
            for server, against in pairs:
                entry = by_key.get((mode, test, server, against))
                if entry:
                    body.append("| %s | %s / %s | %s | %s |" % (
                        label(test), server, against, spread(entry, "rps"),
                        spread(entry, "per_core")))
        if body:
            lines += ["%s:" % mode.capitalize(), "",
                      "| test | ratio | req/s | per core |", "|---|---|---:|---:|"] + body + [""]
    return lines


def missing_note(servers):
    """Why there is no verdict table, when there is none."""
    if not subjects(servers):
        return "no lepus in --servers: no ratios"
    if not references(servers):
        return ("lepus ran alone: no ratios (add anchors with --servers, or a "
                "--lepus-before binary)")
    return None

