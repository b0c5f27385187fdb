#!/usr/bin/env python3
"""The long check: run every upstream suite through `redline run` unchanged, then summarise.

    .venv/bin/python scripts/upstream_check.py [--suites DIR] [--duration 3s] [--out docs/upstream-check.md]

Each suite is run for --duration (default 3s, after a 1s warm-up) against Debian's redis-server.
Suites this machine cannot run (other topologies, commands the server does not know, datasets
larger than memory) are skipped by redline with the reason; suites with several clients at once
(clientconfigs) and the other client tools (pubsub-sub-bench, bcast-listener, the job queues) run
(redline.load.groups, redline-load --role). The summary
counts, of the runnable suites, how many completed with valid results (status ok, operations
measured, no error replies) and lists every failure with its reason. Not part of the CI run: the
upstream preloads are large (10M keys, 10M stream entries), so it takes hours on 2 cores.

A check can be resumed (--resume skips suites finished in the stores) and split: two halves on
one core each, sharing the snapshot cache, then one summary over both stores:

    scripts/upstream_check.py --resume --part 1/2 --cpus 0 --store a.db --store b.db --json a.json &
    scripts/upstream_check.py --resume --part 2/2 --cpus 1 --store b.db --store a.db --json b.json
    scripts/upstream_check.py --summarise-store --store a.db --store b.db
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SUITES = REPO.parent / "shared" / "upstream-suites" / "test-suites"


def classify(run: dict) -> str:
    if run["status"] == "skipped":
        return "skipped"
    if run["status"] != "ok":
        return "failed"
    if not run.get("ops_per_sec") or any("error replies" in flag for flag in run.get("flags", [])):
        return "invalid"
    return "valid"


def summarise(runs: list[dict], command: list[str], *, suite_count: int, hours: float, refused: list) -> str:
    """The check's summary in Markdown, over every store (a resumed or split check is whole)."""
    kinds = collections.Counter(classify(r) for r in runs)
    runnable = len(runs) - kinds["skipped"]
    valid_share = kinds["valid"] / runnable if runnable else 0.0
    lines = ["# Upstream suites on this machine", "",
             f"Command: `{' '.join(command)}` ({_coverage(runs, suite_count, hours, len(refused))}).", "",
             "| suites | runnable here | valid results | failed | ran but invalid | skipped |",
             "|---:|---:|---:|---:|---:|---:|",
             f"| {len(runs) + len(refused)}{f' ({len(refused)} refused)' if refused else ''} | {runnable} | "
             f"{kinds['valid']} ({valid_share:.0%}) | {kinds['failed']} | {kinds['invalid']} | {kinds['skipped']} |", ""]
    skipped = [r for r in runs if r["status"] == "skipped"]
    reasons = collections.Counter(_reason_class(r["error"]) for r in skipped)
    lines += ["Skipped, by reason:", "", "| reason | suites |", "|---|---:|"]
    lines += [f"| {reason} | {count} |" for reason, count in reasons.most_common()]
    grouped = [r for r in skipped if _reason_class(r["error"]) != r["error"]]
    if grouped:
        lines += ["", "The grouped reasons, suite by suite:", ""]
        lines += [f"- {r['test']}: {_without_directories(r['error'])}" for r in grouped]
    lines += ["", "Failed or invalid, each with its reason:", "", "| suite | reason |", "|---|---|"]
    for r in runs:
        if classify(r) in ("failed", "invalid"):
            why = r.get("error") or "; ".join(r.get("flags", [])) or "no operations measured"
            lines.append(f"| {r['test']} | {why.splitlines()[0]} |")
    lines += _valid_but_flagged(runs, "miss path", "measuring the miss path (more than half of the reads missed)")
    from redline.bench.window_fit import MIN_ROUNDS
    lines += _valid_but_flagged(runs, "window too short", f"with a window too short to measure (fewer than "
                                f"{MIN_ROUNDS} median latencies: a longer --duration measures them)")
    lines += several_clients(runs)
    lines += snapshot_reuse(runs)
    lines += ["", f"Not run: the suite has errors (`redline run` refuses such a suite with exit 2): {len(refused)}", ""]
    lines += [f"- {spec.name}: {_without_directories(str(next(d for d in spec.diagnostics if d.severity == 'error')))}"
              for spec in refused]
    return "\n".join(lines) + "\n"


def _valid_but_flagged(runs: list[dict], marker: str, title: str) -> list[str]:
    flagged = [(r["test"], f) for r in runs if classify(r) == "valid" for f in r.get("flags", []) if marker in f]
    return ["", f"Valid but {title}: {len(flagged)}", "", *(f"- {test}: {flag}" for test, flag in flagged)]


def _coverage(runs: list[dict], suite_count: int, hours: float, refused: int = 0) -> str:
    """Whether every suite has a result (a suite with errors is refused before it runs: its
    result is the error, listed at the end)."""
    if len(runs) + refused >= suite_count:
        done = "every suite has a result" + (f", {refused} of them the errors that refuse it" if refused else "")
    else:
        done = f"partial: {len(runs)} of {suite_count - refused} runnable suites have a result"
    return f"{done}; {hours:.1f} hours of running, parts that ran side by side counted each"


def wall_hours(stores: list[Path]) -> float:
    """Each session's first start to last finish, added up over every store (a store holds one
    part of a check; a resumed part or a rerun is a session of its own, and the time between
    sessions is not running)."""
    total = 0.0
    for store in stores:
        if store.exists():
            for first, last in sqlite3.connect(store).execute(
                    "SELECT min(started_at), max(finished_at) FROM runs GROUP BY session_id"):
                total += (last - first) if first is not None and last is not None else 0.0
    return total / 3600


# reasons that differ only in a detail, counted as one row (each suite's own words listed below)
REASON_GROUPS = {"runs on ": "needs another topology (replicas, cluster, io-threads; choose with --topology)",
                 "client tool": "its client tool is neither memtier_benchmark nor a role redline-load plays",
                 "preload tool": "its preload tool is not memtier_benchmark",
                 "its preload needs": "its preload needs more than 60% of the available memory",
                 "the suite has errors": "the suite has errors"}


def _reason_class(reason: str) -> str:
    return next((label for prefix, label in REASON_GROUPS.items() if reason.startswith(prefix)), reason)


def _without_directories(reason: str) -> str:
    return re.sub(r"/\S*/([^/\s]+\.ya?ml)", r"\1", reason)


def runs_from_store(store: Path) -> list[dict]:
    """The latest finished run of each test in the store (over every session, so a check that
    was resumed or split is summarised whole), in --json's shape, read through redline's own
    store (its flags, facts and metrics where redline keeps them)."""
    from redline.store.results import Store
    latest: dict[str, dict] = {}
    for run in Store(store).load_runs():
        if run.status in ("running", "interrupted"):
            continue
        latest[run.test] = {"test": run.test, "status": run.status, "error": run.error,
                            "finished_at": run.finished_at or 0.0,
                            "ops_per_sec": run.metrics.get("ops_per_sec"), "flags": list(run.flags),
                            "dataset": run.facts.get("dataset") or {}, "groups": run.facts.get("groups") or []}
    return list(latest.values())


def runs_from_stores(stores: list[Path]) -> list[dict]:
    """Each test's run that finished last, whichever store holds it (a re-run supersedes)."""
    runs: dict[str, dict] = {}
    for store in stores:
        if store.exists():
            for run in runs_from_store(store):
                if run["test"] not in runs or run["finished_at"] >= runs[run["test"]]["finished_at"]:
                    runs[run["test"]] = run
    return sorted(runs.values(), key=lambda r: r["test"])


def suite_specs(directory: Path) -> list:
    from redline.suites import resolve_suites
    return resolve_suites([str(directory)])


def suites_to_run(specs: list, done: set[str], part: tuple[int, int],
                  rerun: re.Pattern | None = None) -> list[Path]:
    """The suite files without errors not yet finished (or named by --rerun), and of those every
    N-th starting at the K-th (--part K/N)."""
    todo = [spec.path for spec in specs if not spec.has_errors
            and (spec.name not in done or (rerun and rerun.search(spec.name)))]
    k, n = part
    return todo[k - 1::n]


def parse_part(text: str) -> tuple[int, int]:
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return int(k), int(n)


def parse_cpus(text: str) -> set[int]:
    try:
        return {int(c) for c in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CPU numbers like 0 or 0,1, got {text!r}") from None


def several_clients(runs: list[dict]) -> list[str]:
    """Each valid run with several client groups or a role (pub/sub, tracking, job queues): every
    group's rate and p50, and what the role counted (the headline alone would hide the rest)."""
    shown = [r for r in runs if classify(r) == "valid"
             and (len(r.get("groups", [])) > 1 or any(g.get("role_counts") for g in r.get("groups", [])))]
    if not shown:
        return []
    lines = ["", f"Suites with several clients or a role redline-load plays: {len(shown)}, each group's "
             "rate and p50 (the headline is the last group; – where the role's messages carry no send "
             "time) and what the role counted:", "",
             "| suite | groups: rate/s, p50 ms | role counts |", "|---|---|---|"]
    for r in shown:
        groups = " · ".join(f"{_group_name(g['group'])} {g['ops_per_sec'] or 0:,.0f}, "
                            + (f"{g['p50_ms']:.3f}" if g.get("p50_ms") is not None else "–")
                            for g in r["groups"])
        counts = "; ".join(filter(None, (role_counts_text(g.get("role_counts")) for g in r["groups"])))
        lines.append(f"| {r['test'].removeprefix('memtier_benchmark-')} | {groups} | {counts} |")
    return lines


def _group_name(label: str) -> str:
    """'group 2 (memtier_benchmark: BLPOP k 0 | XADD s * f v)' -> 'BLPOP/XADD';
    'group 1 (bullmq-bench)' -> 'bullmq-bench'."""
    inner = label[label.find("(") + 1:label.rfind(")")] if "(" in label else label
    tool, _, commands = inner.partition(": ")
    if not commands:
        return tool
    return "/".join(command.split()[0] for command in commands.split(" | ") if command.split())


def role_counts_text(counts: dict | None) -> str:
    """The few numbers of a role's own counts that say whether it did what it claims."""
    if not counts:
        return ""
    if "exactly_once" in counts:
        if counts["exactly_once"]:
            return f"{counts.get('fetched', 0):,} jobs, each exactly once"
        return (f"NOT exactly once: {counts.get('fetched_twice_or_more', 0):,} fetched twice or more, "
                f"{counts.get('never_fetched', 0):,} never")
    if "invalidations_per_write" in counts:
        return (f"{counts.get('invalidation_messages', 0):,} invalidations, "
                f"{counts['invalidations_per_write']:.1f} per write, {counts.get('listeners', 0):,} listeners")
    if "received_total" in counts:
        same = "every subscriber got every message" if counts.get("every_subscriber_got_every_message") \
            else "subscribers of one channel got different counts"
        return f"{counts['received_total']:,} messages to {counts.get('subscriptions', 0):,} subscriptions; {same}"
    return ""


def snapshot_reuse(runs: list[dict]) -> list[str]:
    """How much preparation the shared snapshots avoided: each restore against the preparation
    that saved the snapshot it restored."""
    prepared = {r["dataset"]["snapshot_key"]: r for r in runs
                if r.get("dataset", {}).get("snapshot") and r["dataset"].get("snapshot_key")}
    restorers: dict[str, list[dict]] = collections.defaultdict(list)
    for r in runs:
        key = r.get("dataset", {}).get("snapshot_key")
        if r["dataset"].get("restored_from") and not r["dataset"].get("snapshot") and key in prepared:
            restorers[key].append(r)
    if not restorers:
        return []
    def avoided(key: str) -> float:
        return prepared[key]["dataset"]["prepared_s"] * len(restorers[key])
    restores = sum(len(rs) for rs in restorers.values())
    lines = ["", f"Shared snapshots: {len(prepared)} preparations were saved as RDB snapshots and "
             f"{restores} suites restored one instead of preparing their data again, avoiding "
             f"{sum(map(avoided, restorers)) / 60:.0f} minutes of preparation. The largest savings:", "",
             "| snapshot prepared by | keys | preparation s | restored by | avoided s |",
             "|---|---:|---:|---:|---:|"]
    for key in sorted(restorers, key=avoided, reverse=True)[:8]:
        p = prepared[key]
        lines.append(f"| {p['test']} | {p['dataset'].get('keyspace_length', 0):,} | "
                     f"{p['dataset']['prepared_s']:.1f} | {len(restorers[key])} suites | {avoided(key):.0f} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=Path, default=DEFAULT_SUITES)
    parser.add_argument("--duration", default="3s")
    parser.add_argument("--store", type=Path, action="append",
                        help="results store (default upstream-check.db); runs go to the first, and "
                             "every one given is read for --resume and the summary")
    parser.add_argument("--json", type=Path, default=Path("upstream-check.json"))
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "upstream-check.md")
    parser.add_argument("--resume", action="store_true",
                        help="skip suites that already have a finished run in the stores")
    parser.add_argument("--rerun", type=re.compile, metavar="REGEX",
                        help="with --resume: run the suites whose names match again (the newer run counts)")
    parser.add_argument("--part", type=parse_part, default=(1, 1), metavar="K/N",
                        help="run only every N-th remaining suite, starting at the K-th")
    parser.add_argument("--cpus", type=parse_cpus,
                        help="run redline on these CPUs only (its pinning plan uses what it may use)")
    parser.add_argument("--summarise-store", action="store_true",
                        help="do not run anything: summarise what the stores hold so far")
    args = parser.parse_args()
    stores = args.store or [Path("upstream-check.db")]
    shown = ["redline", "run", "<upstream test-suites>", "--duration", args.duration, "--warmup", "1s"]
    specs = suite_specs(args.suites)
    if not args.summarise_store:
        done = {r["test"] for r in runs_from_stores(stores)} if args.resume else set()
        files = suites_to_run(specs, done, args.part, args.rerun)
        command = [str(REPO / ".venv" / "bin" / "redline"), "run", *map(str, files), "--duration", args.duration,
                   "--warmup", "1s", "--store", str(stores[0]), "--json", str(args.json)]
        cpus = args.cpus
        # exit status 1 when some runs failed: the summary says which
        subprocess.run(command, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    args.out.write_text(summarise(runs_from_stores(stores), shown, suite_count=len(specs),
                                  refused=[spec for spec in specs if spec.has_errors],
                                  hours=wall_hours(stores)))
    print(args.out.read_text())
    return 0

if __name__ == "__main__":
    sys.exit(main())
