"""Whether a timed run's window held enough rounds of requests, and the window fitted to calls
that take seconds.

A window shorter than the suite's own `--test-time` (`--duration`, the gate's 3 s) is fine for
calls of microseconds and useless for calls of seconds: SRANDMEMBER of 5,000 members from 200
connections at pipeline 4 takes about 11 s a round of requests, so a 3 s window completes no reply
(the run fails, "no reply completed …") or a handful (the run is flagged "window too short"). Such
a test's window is lengthened to FIT_ROUNDS rounds, rounded up to the next of WINDOW_STEPS (so that
sessions and history that see slightly different rounds still measure one window), never beyond
the suite's own `--test-time` (FIT_LONGEST_S for a suite that counts requests instead); the runs
that showed it are measured again with it
(redline.bench.server_runner), and so is every later run of every side: every run a comparison
reads has one window. The window is fitted only until a run measured it whole (an ok run of
MIN_ROUNDS rounds or more, or a run at the longest window allowed); after that it stays, and a
later short run is flagged.

A rate-limited load (`--rate-limiting`) is never fitted and never flagged "window too short": how
many requests a connection sends in a window is set by its rate, not by how long a reply takes,
and its replies are timed from their intended send time (loadgen/src/report.rs), so a median reply
of seconds is the load's backlog, not a slow call. A load that stayed below its rate is flagged
instead (`fell_behind_rate`): its latencies measure that backlog.
"""

from __future__ import annotations

from dataclasses import dataclass

from redline.core.run import Run

MIN_ROUNDS = 10                # a window shorter than this many median latencies measures too few rounds
FIT_ROUNDS = 15                # a fitted window holds this many rounds at the pace that was seen
FIT_LONGEST_S = 60.0           # the longest fitted window of a suite that gives no --test-time
WINDOW_STEPS = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600)   # seconds a fitted window may take
KEPT_RATE = 0.95               # a rate-limited load that reached less than this share of its rate fell behind
ROUND_FACT = "round_s"         # run.facts: seconds a round of a connection's requests took, when known


def window_too_short(p50_ms: float | None, measured_s: float) -> str | None:
    """The flag of a window that holds fewer than MIN_ROUNDS median latencies: each connection
    completed only a few requests (calls of seconds with many in flight), so the rate and the
    percentiles rest on a handful of replies and move with where the window happened to cut."""
    rounds = measured_s / (p50_ms / 1000) if p50_ms and measured_s else None
    if rounds is None or rounds >= MIN_ROUNDS:
        return None
    return (f"window too short: the median reply took {p50_ms / 1000:.2f} s, so the {measured_s:g} s window "
            f"held about {rounds:.1f} rounds of requests per connection; a longer --duration measures it")


def fell_behind_rate(ops_per_sec: float | None, rate_limit_per_sec: float | None) -> str | None:
    """The flag of a rate-limited load that stayed below its rate: its replies are timed from
    when they were due to be sent, so its latencies grow with the backlog it built up."""
    if not rate_limit_per_sec or ops_per_sec is None or ops_per_sec >= KEPT_RATE * rate_limit_per_sec:
        return None
    return (f"the load fell behind its rate: {ops_per_sec:,.0f} of {rate_limit_per_sec:,.0f} requests/s; its "
            "latencies are timed from each request's intended send time, so they measure the backlog")


def pace_flag(*, p50_ms: float | None, measured_s: float, ops_per_sec: float | None,
              rate_limit_per_sec: float | None) -> str | None:
    """What a timed window's pace says of its run: a rate-limited load is judged by the rate it
    kept (its latencies are a backlog, not rounds), any other by the rounds its window held."""
    if rate_limit_per_sec:
        return fell_behind_rate(ops_per_sec, rate_limit_per_sec)
    return window_too_short(p50_ms, measured_s)


def round_seconds(run: Run) -> float | None:
    """How long a round of a connection's requests took in `run`: its median reply (an ok run), or
    the server's time per call times the requests in flight (a run in which none completed)."""
    if run.status == "ok":
        p50_ms = (run.metrics or {}).get("p50_ms")
        return p50_ms / 1000 if p50_ms else None
    return (run.facts or {}).get(ROUND_FACT)


def fitted_words(runs) -> str | None:
    """How the window of these runs (one test's) was fitted to its calls, in words for a verdict;
    None when it was not. The facts come from a store: their types are checked."""
    for run in runs:
        facts = run.facts or {}
        fitted, window = facts.get("window_fitted"), facts.get("duration_s")
        if not isinstance(fitted, dict) or not isinstance(window, (int, float)):
            continue
        asked, round_s = fitted.get("asked_s"), fitted.get("round_s")
        if isinstance(asked, (int, float)) and isinstance(round_s, (int, float)):
            return (f"measured in {window:g} s windows, not {asked:g} s: its calls take about {round_s:.2f} s "
                    "a round of requests per connection")
    return None


@dataclass
class WindowFit:
    """The window of one test's timed runs. `duration_s` None: the suite's own `--test-time`,
    which is never lengthened."""

    duration_s: float | None
    longest_s: float
    settled: bool = False
    fitted: dict | None = None      # the window asked for and the round seen, once lengthened

    @classmethod
    def for_test(cls, duration_s: float | None, test_time: float | None, *, fixed: bool = False) -> WindowFit:
        """`fixed`: the window is never lengthened (a counted run's window is a request count)."""
        longest = float(test_time) if test_time else FIT_LONGEST_S
        return cls(duration_s, longest, settled=fixed or duration_s is None or duration_s >= longest)

    def after_slot(self, runs: list[Run]) -> str | None:
        """Judge the runs of one slot (one run, or a duet's pair) while the window is not settled.
        When their calls need a longer window, lengthen it and say why (the caller measures those
        runs again); None when the window stays."""
        if self.settled or not runs:
            return None
        rounds = [round_s for round_s in map(round_seconds, runs)
                  if round_s and self.duration_s / round_s < MIN_ROUNDS]
        if not rounds:
            self.settled = any(run.status == "ok" for run in runs)
            return None
        round_s, asked = max(rounds), self.duration_s
        wanted = max(FIT_ROUNDS * round_s, 2 * asked)
        self.duration_s = float(min([self.longest_s] + [step for step in WINDOW_STEPS if step >= wanted]))
        self.settled = self.duration_s >= self.longest_s
        how = "the suite's own --test-time" if self.settled else f"{FIT_ROUNDS} rounds"
        self.fitted = {"asked_s": (self.fitted or {}).get("asked_s", asked), "round_s": round(round_s, 4)}
        return (f"the test's calls take about {round_s:.2f} s a round of requests per connection, so a "
                f"{asked:g} s window holds {asked / round_s:.1f} rounds; its runs measure {self.duration_s:g} s "
                f"({how})")
