"""Interleaved rounds: how lepus-bench loads the servers (issue 15).

The machine this project measures on switches between speed phases about 2x
apart that last minutes, so long runs of one server after another compare
phases, not servers. Instead every server of a mode is started at once and
idles until its turn; per scenario, after a short warm-up of each server, each
round gives every server a turn of the same few seconds of load, in an order
that rotates by one every round (so no server always follows the same one or
always goes first). ratios.py reads the verdict from the rounds.
"""
from . import scenarios, servers
from .servers import BenchError


def rotation(names, round_index):
    """The turn order of a round (0-based): the list rotated by one per round."""
    if not names:
        return []
    shift = round_index % len(names)
    return names[shift:] + names[:shift]


def rounds_of(scenario, rounds):
    """How many rounds a scenario runs: slowloris is long and runs once."""
    return 1 if scenario.once else rounds


def applies(scenario, mode, modes):
    """idle and slowloris run pinned only (unless pinned is not among the modes)."""
    return not (scenario.pinned_only and mode != "pinned" and "pinned" in modes)


def estimate(scenario, params, rounds, server_count):
    """Seconds one scenario takes in one mode, warm-up included."""
    turns = rounds_of(scenario, rounds) * scenario.estimate(params, params.round_seconds)
    warm = 0 if scenario.once or not params.warmup_seconds else \
        scenario.estimate(params, params.warmup_seconds)
    return server_count * (turns + warm)


class Turns:
    """Runs the rounds of one mode's scenarios against its live servers."""

    def __init__(self, mode, live, params, client_cpus, progress, rows, notes):
        self.mode = mode
        self.live = live  # {name: Server}, in the order given by --servers
        self.params = params
        self.client_cpus = client_cpus
        self.progress = progress
        self.rows = rows
        self.notes = notes

    def run_scenario(self, scenario, rounds):
        """Warm-up, then the rounds; appends a row per server, test and round.
        Returns the estimated seconds of the turns it ran (for the progress)."""
        names = [name for name, server in self.live.items()
                 if not (scenario.php and server.php_note) and
                 not (scenario.tls and not server.tls_port) and
                 not (scenario.h3 and not server.h3_port) and
                 not (scenario.proxy and server.proxy_note) and
                 (scenario.proxy or name not in servers.PROXY_ONLY) and
                 (not scenario.only or name in scenario.only)]
        rounds = rounds_of(scenario, rounds)
        done = 0.0
        if not scenario.once and self.params.warmup_seconds:
            warm = scenarios.Context(self.params, self.client_cpus, self.params.warmup_seconds)
            for name in names:
                self.progress.show("[%s] %s: warm-up of %s" % (self.mode, scenario.name, name))
                done += self._turn(scenario, name, warm, None)
        turn = scenarios.Context(self.params, self.client_cpus, self.params.round_seconds)
        for round_index in range(rounds):
            for position, name in enumerate(rotation(names, round_index), 1):
                self.progress.show("[%s] %s: round %d of %d, %s" % (
                    self.mode, scenario.name, round_index + 1, rounds, name))
                done += self._turn(scenario, name, turn, (round_index + 1, position))
        return done

    def _turn(self, scenario, name, ctx, place):
        """One server's turn; place = (round, position in it), None for a warm-up
        (whose figures are dropped)."""
        server = self.live[name]
        estimate = scenario.estimate(self.params, ctx.seconds)
        what = "round %d" % place[0] if place else "warm-up"
        try:
            if place is None:
                scenario.warm_up(ctx, server)
            else:
                for test, metrics in scenario.run(ctx, server):
                    self.rows.append(dict(mode=self.mode, test=test, server=name,
                                          round=place[0], turn=place[1], **metrics))
        except RuntimeError as error:
            self.notes.append("%s %s %s %s failed: %s" % (self.mode, scenario.name, name, what,
                                                         error))
            if place:
                self.rows.append(dict(mode=self.mode, test=scenario.name, server=name,
                                      round=place[0], turn=place[1], error=str(error)))
        if not server.process.alive():
            raise BenchError("%s died during %s: %s" % (name, scenario.name,
                                                       server.process.log_tail()))
        self.progress.finished(estimate)
        return estimate
