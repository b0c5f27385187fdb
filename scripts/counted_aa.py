#!/usr/bin/env python3
"""The catalogue-wide counted A/A: every upstream suite through `redline compare --measure
instructions` with one binary on both sides (2 runs per side, the default window), in batches, then
one table: per suite the runs that finished, the spread, the verdicts and why a run failed.

    .venv/bin/python scripts/counted_aa.py [--suites DIR] [--binary PATH] [--store aa.db] [--batch 8]
                                           [--part K/N --cpus C] [--resume [--rerun REGEX]]
                                           [--scale S --name REGEX] [--summarise-store] [--docs FILE]

Same binary, same state, same request count: any verdict of change is a false one. Suites this
machine cannot run are skipped by redline with the reason (other topologies, commands the server
does not know, datasets larger than memory). A check can be resumed and split like
scripts/upstream_check.py (two halves, one core each, each its own store; the summary reads every
store given); --scale with --name runs the matching suites at a smaller dataset scale, and the
table says which suites ran at which scale. Not part of CI: hours on 2 cores.

    scripts/counted_aa.py --resume --part 1/2 --cpus 0 --store aa-1.db --store aa-2.db &
    scripts/counted_aa.py --resume --part 2/2 --cpus 1 --store aa-2.db --store aa-1.db &
    scripts/counted_aa.py --summarise-store --store aa-1.db --store aa-2.db --docs docs/measure-instructions.md
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from upstream_check import DEFAULT_SUITES, REPO, parse_cpus, parse_part, suite_specs, suites_to_run  # noqa: E402

COMMAND_METRIC, WHOLE_METRIC = "instructions_per_op_command", "instructions_per_op"
CHANGE = ("regression", "improvement")
BEGIN, END = "<!-- counted-aa:begin -->", "<!-- counted-aa:end -->"


def suite_results(store: Path) -> dict[str, dict]:
    """Each test's latest compare session in `store`: its runs, verdicts, scale and wall time."""
    db = sqlite3.connect(store)
    db.row_factory = sqlite3.Row
    results: dict[str, dict] = {}
    for session in db.execute("SELECT id, argv, started_at, finished_at FROM sessions WHERE kind = 'compare' "
                              "ORDER BY id"):
        argv = json.loads(session["argv"])
        scale = argv[argv.index("--scale") + 1] if "--scale" in argv else None
        runs = collections.defaultdict(list)
        for row in db.execute("SELECT id, test, side, status, error, flags FROM runs WHERE session_id = ? AND "
                              "purpose = 'measure' AND status NOT IN ('running', 'interrupted') ORDER BY id",
                              (session["id"],)):
            values = dict(db.execute("SELECT name, value FROM metrics WHERE run_id = ?", (row["id"],)).fetchall())
            errors = [flag for flag in json.loads(row["flags"] or "[]") if "error replies" in flag]
            runs[row["test"]].append({"side": row["side"], "status": row["status"], "error": row["error"],
                                      "error_replies": errors[0] if errors else None,
                                      **{name: values.get(name) for name in (COMMAND_METRIC, WHOLE_METRIC)}})
        verdicts = collections.defaultdict(dict)
        for row in db.execute("SELECT test, metric, verdict FROM comparisons WHERE session_id = ?", (session["id"],)):
            verdicts[row["test"]][row["metric"]] = row["verdict"]
        for test, test_runs in runs.items():
            results[test] = {"test": test, "runs": test_runs, "verdicts": verdicts.get(test, {}), "scale": scale,
                             "finished_at": session["finished_at"] or session["started_at"],
                             "session": (str(store), session["id"]),
                             "session_s": (session["finished_at"] or session["started_at"]) - session["started_at"]}
    return results


def results_from_stores(stores: list[Path]) -> dict[str, dict]:
    """Every test's latest result over all stores (a rerun supersedes)."""
    merged: dict[str, dict] = {}
    for store in stores:
        if store.exists():
            for test, result in suite_results(store).items():
                if test not in merged or result["finished_at"] >= merged[test]["finished_at"]:
                    merged[test] = result
    return merged


def spread_pct(values: list[float]) -> float | None:
    values = sorted(v for v in values if v)
    if len(values) < 2:
        return None
    median = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
    return (values[-1] - values[0]) / median * 100


def side_spread(runs: list[dict], metric: str) -> float | None:
    """The larger of the two sides' ranges ÷ median (the verdict rule's spread)."""
    spreads = [spread_pct([r[metric] for r in runs if r["side"] == side and r["status"] == "ok"])
               for side in ("baseline", "comparison")]
    spreads = [s for s in spreads if s is not None]
    return max(spreads) if spreads else None


def kind(result: dict) -> str:
    """skipped (not runnable here), failed (a run failed), invalid (every run finished but measured
    error replies), ok."""
    statuses = {r["status"] for r in result["runs"]}
    if statuses == {"skipped"}:
        return "skipped"
    if statuses != {"ok"}:
        return "failed"
    return "invalid" if any(r["error_replies"] for r in result["runs"]) else "ok"


def reason(result: dict) -> str:
    """The first failed (or skipped) run's reason, its first line; else the first error-reply flag."""
    for run in result["runs"]:
        if run["status"] != "ok" and run["error"]:
            return run["error"].splitlines()[0]
    return next((run["error_replies"] for run in result["runs"] if run["error_replies"]), "")


def cause(text: str) -> str:
    """A failure reason without its numbers, paths and names: what groups failures by cause."""
    text = re.sub(r"/\S+", "PATH", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    head, paren, tail = text.partition(" (")      # keep "(COMMAND INFO)", "(CONFIG GET)" as written
    head = re.sub(r"\b[A-Z][A-Z0-9_|]{2,}\b(, [A-Z][A-Z0-9_|]{2,}\b)*", "COMMAND", head)    # HSETEX, HTTL
    text = head + paren + tail
    text = re.sub(r"(configuration parameter) \S+", r"\1 P", text)
    return re.sub(r"\d[\d,.]*", "N", text)[:160]


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def summarise(results: dict[str, dict], suite_count: int, command: str) -> str:
    """The A/A in Markdown: totals, failures by cause, false verdicts, then every suite."""
    by_kind = collections.Counter(kind(r) for r in results.values())
    runnable = len(results) - by_kind["skipped"]
    false = {test: [m for m, v in r["verdicts"].items() if v in CHANGE] for test, r in results.items()}
    false = {test: metrics for test, metrics in false.items() if metrics}
    wall_h = sum({r["session"]: r["session_s"] for r in results.values()}.values()) / 3600
    scaled = sorted((r["test"], r["scale"]) for r in results.values() if r["scale"])
    lines = [f"Command: `{command}`; {len(results)} of {suite_count} suites have a result; "
             f"{wall_h:.1f} hours of compare sessions (parts that ran side by side counted each).", "",
             "| suites | runnable here | every run ok | failed | ran, measured error replies | "
             "false verdicts (tests) | skipped |",
             "|---:|---:|---:|---:|---:|---:|---:|",
             f"| {len(results)} | {runnable} | {by_kind['ok']} | {by_kind['failed']} | {by_kind['invalid']} | "
             f"{sum(map(len, false.values()))} ({len(false)}) | {by_kind['skipped']} |", ""]
    failures = collections.Counter(cause(reason(r)) for r in results.values() if kind(r) in ("failed", "invalid"))
    lines += ["Failed or measured error replies, by cause:", "", "| cause | suites |", "|---|---:|"]
    lines += [f"| {text or 'no reason stored'} | {count} |" for text, count in failures.most_common()] or ["| none | 0 |"]
    skips = collections.Counter(cause(reason(r)) for r in results.values() if kind(r) == "skipped")
    lines += ["", "Skipped (not runnable here), by reason:", "", "| reason | suites |", "|---|---:|"]
    lines += [f"| {text} | {count} |" for text, count in skips.most_common()]
    lines += ["", "False verdicts: " + ("none" if not false else
                                        "; ".join(f"{test} ({', '.join(ms)})" for test, ms in sorted(false.items())))]
    lines += ["", "Run at a smaller dataset scale: " + ("none" if not scaled else
                                                        ", ".join(f"{test} ({scale})" for test, scale in scaled))]
    lines += ["", "| suite | runs ok | spread % in call() | spread % whole | verdicts | failure reason |",
              "|---|---:|---:|---:|---|---|"]
    for test, result in sorted(results.items()):
        if kind(result) == "skipped":
            continue
        ok = sum(r["status"] == "ok" for r in result["runs"])
        verdicts = collections.Counter(result["verdicts"].values())
        words = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items()))
        name = test.removeprefix("memtier_benchmark-") + (f" (scale {result['scale']})" if result["scale"] else "")
        lines.append(f"| {name} | {ok}/{len(result['runs'])} | {_pct(side_spread(result['runs'], COMMAND_METRIC))} | "
                     f"{_pct(side_spread(result['runs'], WHOLE_METRIC))} | {words} | "
                     f"{reason(result).replace('|', '/') if kind(result) in ('failed', 'invalid') else ''} |")
    return "\n".join(lines) + "\n"


def into_docs(docs: Path, table: str) -> None:
    """Replace the marked section of `docs` with `table`."""
    text = docs.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{docs}: no {BEGIN} … {END} section to replace")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    docs.write_text(f"{head}{BEGIN}\n{table}{END}{tail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=Path, default=DEFAULT_SUITES)
    parser.add_argument("--binary", type=Path, default=Path("/usr/bin/redis-server"))
    parser.add_argument("--store", type=Path, action="append",
                        help="results store (default counted-aa.db); runs go to the first, every one is read")
    parser.add_argument("--batch", type=int, default=8, help="suites per redline compare (default 8)")
    parser.add_argument("--resume", action="store_true", help="skip suites with a result in the stores")
    parser.add_argument("--rerun", type=re.compile, metavar="REGEX", help="with --resume: run these again")
    parser.add_argument("--name", type=re.compile, metavar="REGEX", help="only the suites whose name matches")
    parser.add_argument("--scale", help="dataset scale for these suites (recorded with their results)")
    parser.add_argument("--part", type=parse_part, default=(1, 1), metavar="K/N")
    parser.add_argument("--cpus", type=parse_cpus, help="run redline on these CPUs only")
    parser.add_argument("--summarise-store", action="store_true", help="run nothing: summarise the stores")
    parser.add_argument("--docs", type=Path, help="write the summary into this file's counted-aa section")
    args = parser.parse_args()
    stores = args.store or [Path("counted-aa.db")]
    specs = [spec for spec in suite_specs(args.suites) if not args.name or args.name.search(spec.name)]
    target = f"bin:{args.binary}"
    fixed = ["--measure", "instructions", "--runs", "2", "--baseline", target, "--comparison", target,
             *(["--scale", args.scale] if args.scale else [])]
    if not args.summarise_store:
        done = set(results_from_stores(stores)) if args.resume else set()
        files = suites_to_run(specs, done, args.part, args.rerun)
        for start in range(0, len(files), args.batch):
            batch = files[start:start + args.batch]
            command = [str(REPO / ".venv" / "bin" / "redline"), "compare", *map(str, batch), *fixed,
                       "--store", str(stores[0])]
            print(f"{time.strftime('%H:%M:%S')} batch {start // args.batch + 1}: {len(batch)} suites "
                  f"({start + len(batch)} of {len(files)})", flush=True)
            # exit status 1 when runs failed: the summary says which and why
            subprocess.run(command, preexec_fn=(lambda: os.sched_setaffinity(0, args.cpus)) if args.cpus else None)
    shown = " ".join(["redline compare <upstream test-suites>", *fixed])
    table = summarise(results_from_stores(stores), len(specs), shown)
    if args.docs:
        into_docs(args.docs, table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
