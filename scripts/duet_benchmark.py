"""Duets against interleaved runs, side by side (docs/statistics.md, "Duets"): a benchmark script,
not a test.

For each test, `redline compare` twice with the same targets and settings: once interleaved (A B B
A …, one side at a time, as by default) and once with --duet (run i of both sides at once on the
same cores); which of the two goes first alternates from test to test, so that a drift of the
machine falls on both. Each mode has its own store in --out. The summary (summary.md,
summary.json) gives, per test and mode, the decision metric's Δ, its 95% interval and the
interval's width, the verdict, the runs per side and the wall time; then per mode the tests decided
and the median width. Give --baseline and --comparison the same target for an A/A.

    .venv/bin/python scripts/duet_benchmark.py --out /tmp/duet-ab \\
        --baseline git:/work/wt/redis-repo@7.0.5 --comparison git:/work/wt/redis-repo@7.0.7 \\
        --tests geo-geosearch-bybox-200km zset-zrange-100-withscores string-get-100B-pipeline-1
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import time
from pathlib import Path

from gate_benchmark import REDLINE, LoadSampler, build, run

METRIC = "server_cpu_us_per_op"
MODES = {"interleaved": [], "duet": ["--duet"]}
DEFAULT_TESTS = ("geo-geosearch-bybox-200km", "geo-geosearch-byradius-100km", "zset-zrange-100-withscores",
                 "geo-geodist", "string-get-100B-pipeline-1", "hash-hget-100B", "set-sismember-1000",
                 "list-lrange-100")


def compare(args, test: str, mode: str, out: Path, log: Path) -> dict:
    store, document = out / f"{mode}.db", out / f"{mode}-{test}.json"
    argv = [*REDLINE, "compare", args.suite, f"--name=-{test}$", "--baseline", args.baseline,
            "--comparison", args.comparison, "--runs", str(args.runs), "--max-runs", str(args.max_runs),
            "--duration", args.duration, "--warmup", args.warmup, "--store", str(store), "--json", str(document),
            *MODES[mode]]
    code, wall = run(argv, log)
    result = {"test": test, "mode": mode, "exit": code, "wall_s": round(wall, 1)}
    if not document.exists():
        return {**result, "verdict": "no result"}
    found = [c for c in json.loads(document.read_text())["comparisons"] if c["metric"] == METRIC]
    if not found:
        return {**result, "verdict": "no result"}
    [c] = found
    session = sqlite3.connect(store).execute("SELECT MAX(session_id) FROM runs").fetchone()[0]
    per_side = sqlite3.connect(store).execute(
        "SELECT COUNT(*) FROM runs WHERE session_id = ? AND side = 'baseline' AND purpose = 'measure' "
        "AND status = 'ok'", (session,)).fetchone()[0]
    result.update(verdict=c["verdict"], delta_pct=c["delta_pct"], runs_per_side=per_side)
    if c["ci_low_pct"] is not None and c["ci_high_pct"] is not None:      # too few runs give no interval
        result.update(ci_low_pct=c["ci_low_pct"], ci_high_pct=c["ci_high_pct"],
                      width_pct=c["ci_high_pct"] - c["ci_low_pct"])
    return result


def summarize(results: list[dict], args, sampler: LoadSampler) -> tuple[dict, str]:
    by_mode = {mode: [r for r in results if r["mode"] == mode] for mode in args.modes}
    totals = {}
    for mode, rows in by_mode.items():
        widths = [r["width_pct"] for r in rows if "width_pct" in r]
        totals[mode] = {"tests": len(rows),
                        "decided": sum(1 for r in rows if r["verdict"] in ("improvement", "regression", "no_change")),
                        "changes": sum(1 for r in rows if r["verdict"] in ("improvement", "regression")),
                        "median_width_pct": round(statistics.median(widths), 2) if widths else None,
                        "wall_s": round(sum(r["wall_s"] for r in rows), 1)}
    summary = {"baseline": args.baseline, "comparison": args.comparison, "settings": {
        "runs": args.runs, "max_runs": args.max_runs, "duration": args.duration, "warmup": args.warmup},
        "results": results, "totals": totals, "load": sampler.stats("compare")}
    lines = [f"# duets vs interleaved runs: {args.comparison} vs {args.baseline}", "",
             f"`redline compare` per test, --runs {args.runs} --max-runs {args.max_runs} --duration {args.duration} "
             f"--warmup {args.warmup}; decision metric {METRIC}; load average {summary['load']}", "",
             "| test | mode | Δ | 95% interval | width | verdict | runs per side | wall |",
             "|---|---|---:|---|---:|---|---:|---:|"]
    for r in results:
        delta = f"{r['delta_pct']:+.1f}%" if r.get("delta_pct") is not None else ""
        interval = f"[{r['ci_low_pct']:+.1f}%, {r['ci_high_pct']:+.1f}%] | {r['width_pct']:.1f}" if "width_pct" in r \
            else " | "
        verdict = r["verdict"] + (f" (exit {r['exit']})" if r["exit"] else "")
        lines.append(f"| {r['test']} | {r['mode']} | {delta} | {interval} | {verdict} | {r.get('runs_per_side', '')} "
                     f"| {r['wall_s']:.0f} s |")
    lines += ["", "| mode | tests | decided | changes | median interval width | wall time |", "|---|---:|---:|---:|---:|---:|"]
    for mode, t in totals.items():
        lines.append(f"| {mode} | {t['tests']} | {t['decided']} | {t['changes']} | {t['median_width_pct']} pts | "
                     f"{t['wall_s'] / 60:.1f} min |")
    return summary, "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--comparison", required=True)
    parser.add_argument("--suite", default="standard")
    parser.add_argument("--tests", nargs="*", default=list(DEFAULT_TESTS))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-runs", dest="max_runs", type=int, default=15)
    parser.add_argument("--duration", default="3s")
    parser.add_argument("--warmup", default="1s")
    parser.add_argument("--modes", nargs="+", choices=tuple(MODES), default=list(MODES),
                        help="measure only these (default both, side by side)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "commands.log"
    for target in {args.baseline, args.comparison}:
        build(target, log)
    sampler = LoadSampler(args.out / "load.tsv")
    sampler.phase = "compare"
    results = []
    started = time.monotonic()
    try:
        for number, test in enumerate(args.tests):
            order = list(args.modes) if number % 2 == 0 else list(reversed(args.modes))
            for mode in order:
                print(f"[{time.monotonic() - started:6.0f}s] {test}: {mode}", file=sys.stderr, flush=True)
                results.append(compare(args, test, mode, args.out, log))
                r = results[-1]
                print(f"    {r['verdict']}" + (f", Δ {r['delta_pct']:+.1f}% width {r['width_pct']:.1f} pts after "
                                               f"{r['runs_per_side']} runs per side" if "width_pct" in r else ""),
                      file=sys.stderr, flush=True)
    finally:
        sampler.stop()
        summary, text = summarize(results, args, sampler)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
        (args.out / "summary.md").write_text(text)
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
