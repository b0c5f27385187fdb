#!/usr/bin/env python3
"""Replay the timed runs of stored sessions under redline's adaptive rule, with and without
stopping for futility, to see what futility saves and what it costs on real measurements.

A stopping rule that only stops earlier is replayed exactly from stored runs: up to the look where
it stops, the runs are the ones that were measured. For each timed test of each session this
takes the first n runs per side at every look (start, start+2, ... up to the stored count), judges
them as the rule does (redline.analysis.comparison.compare_test at the per-look confidence), and
reports where the rule as stored stopped (a check of the replay: it must equal what was measured),
where it stops with futility at each chance threshold, and the verdict each ends with.

    .venv/bin/python scripts/replay_stopping.py --store GATE.db --start 5 --max 15 --metric server_cpu_us_per_op
    .venv/bin/python scripts/replay_stopping.py --store COMPARE.db --start 7 --max 15

Verdicts here are each comparison's own (before the session's false-discovery control).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redline.analysis.comparison import (BASELINE, COMPARISON, FDR_Q, compare_test,  # noqa: E402
                                         extra_runs_needed, looks_confidence)
from redline.analysis.stats import Verdict  # noqa: E402
from redline.core import metrics  # noqa: E402
from redline.store.results import Store  # noqa: E402

@dataclass
class Replay:
    """One timed test of one session: its runs per side in the order they ran."""

    store: str
    session: int
    key: str
    runs: dict[str, list] = field(default_factory=dict)

    @property
    def stored_pairs(self) -> int:
        return min(len(self.runs.get(BASELINE, [])), len(self.runs.get(COMPARISON, [])))

    def prefix(self, n: int) -> list:
        return self.runs[BASELINE][:n] + self.runs[COMPARISON][:n]


def timed_tests(store_path: Path, sessions: list[int] | None) -> list[Replay]:
    store = Store(store_path)
    wanted = sessions or store.sessions_since(0)
    found = []
    for session in wanted:
        by_key: dict[str, Replay] = {}
        for run in store.load_runs(session):
            if run.purpose != "measure" or run.status != "ok" or run.side not in (BASELINE, COMPARISON):
                continue
            if metrics.measure_of([run.metrics]) == metrics.INSTRUCTIONS:
                continue
            replay = by_key.setdefault(run.key, Replay(store_path.name, session, run.key))
            replay.runs.setdefault(run.side, []).append(run)
        found += [r for r in by_key.values() if r.stored_pairs >= 2]
    store.close()
    return found


def replay(test: Replay, *, start: int, max_runs: int, decision: set[str] | None, floors: dict,
           lone_p: float, futility_chance: float) -> tuple[int, dict[str, str]]:
    """(pairs redline's rule stops at, verdict per decision metric there); futility_chance 0 replays
    the rule without stopping for futility."""
    confidence = looks_confidence(start, max_runs)
    n = min(start, test.stored_pairs)
    while True:
        comparisons = [c for c in compare_test(test.key, test.prefix(n), floors, confidence=confidence,
                                               runs_allowed=max_runs)
                       if c.result is not None and (decision is None or c.metric in decision)]
        more = extra_runs_needed(comparisons, n, max_runs, lone_p_value=lone_p, futility_chance=futility_chance)
        if not more or n + more > test.stored_pairs:
            return n, {c.metric: c.verdict_alone for c in comparisons}
        n += more


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, action="append", required=True,
                        help="a result store (repeatable; each file name once)")
    parser.add_argument("--session", type=int, action="append", help="only these sessions (default: all)")
    parser.add_argument("--start", type=int, default=7, help="runs per side before the first look")
    parser.add_argument("--max", type=int, default=15, dest="max_runs", help="runs per side at most")
    parser.add_argument("--metric", action="append", help="decide on these metrics only (the gate: one)")
    parser.add_argument("--threshold", type=float, action="append", help="futility chance thresholds to replay")
    parser.add_argument("--lone-p", type=float, dest="lone_p",
                        help="the p a lone finding needs (the plan's: q / its comparisons; default: q / the "
                             "session's timed tests × metrics)")
    args = parser.parse_args(argv)
    thresholds = args.threshold or [0.02, 0.05, 0.10]
    if len({p.name for p in args.store}) != len(args.store):
        parser.error("--store: give each file name once (the table names stores by file name)")
    decision = set(args.metric) if args.metric else None

    tests = [t for path in args.store for t in timed_tests(path, args.session)]
    floors_of = {}
    for path in args.store:
        store = Store(path)
        floors_of[path.name] = store.noise_floors()
        store.close()
    print(f"{len(tests)} timed tests; rule: {args.start} -> {args.max_runs} runs per side, two more per look")
    header = "| store | session | test | stored | replayed | verdict | " + " | ".join(
        f"futility <{t:g}" for t in thresholds) + " |"
    print(header)
    print("|" + "---|" * (6 + len(thresholds)))
    saved = {t: 0 for t in thresholds}
    lost = {t: 0 for t in thresholds}
    mismatches = total = decided = 0
    for test in tests:
        floors = floors_of[test.store]
        per_session = sum(1 for t in tests if (t.store, t.session) == (test.store, test.session))
        lone_p = args.lone_p or FDR_Q / max(1, per_session * (len(decision) if decision else len(metrics.COMPARED)))
        n, verdicts = replay(test, start=args.start, max_runs=args.max_runs, decision=decision, floors=floors,
                             lone_p=lone_p, futility_chance=0.0)
        total += n
        mismatches += n != test.stored_pairs
        decided += sum(v != Verdict.INCONCLUSIVE for v in verdicts.values())
        cells = []
        for t in thresholds:
            n_f, verdicts_f = replay(test, start=args.start, max_runs=args.max_runs, decision=decision,
                                     floors=floors, lone_p=lone_p, futility_chance=t)
            saved[t] += n - n_f
            changed = [m for m, v in verdicts.items() if v != verdicts_f.get(m)]
            lost[t] += len(changed)
            cells.append(f"{n_f}" + (f" ({', '.join(verdicts_f[m] for m in changed)})" if changed else ""))
        shown = ", ".join(sorted(set(verdicts.values())))
        print(f"| {test.store} | {test.session} | {test.key} | {test.stored_pairs} | {n} | {shown} | "
              + " | ".join(cells) + " |")
    print()
    print(f"replayed stops that differ from what was measured: {mismatches} of {len(tests)} "
          f"(a test interrupted or measured under other settings)")
    print(f"pairs under the rule as it is: {total}; decided comparisons: {decided}")
    for t in thresholds:
        print(f"futility below {t:g}: {saved[t]} pairs fewer ({100 * saved[t] / max(1, total):.0f}%), "
              f"{lost[t]} comparisons whose verdict changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
