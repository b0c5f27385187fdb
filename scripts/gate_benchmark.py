"""Measures the catalogue gate (docs/gate.md, "Measured"): a benchmark script, not a test.

    catalogue   the whole catalogue, baseline vs comparison: wall time split into builds,
                preparation, counted screen and timed confirmation; the GEO verdicts; a
                projection for a machine with more cores from the measured per-job costs
    aa          the same gate with one binary on both sides: its false verdicts
    standard    side by side on the built-in 48-test standard suite: the gate, then today's timed
                `redline compare` at its defaults, same targets; tests decided by each, verdicts one
                contradicts, wall times and their ratio. The compare outlasts a 3-hour working
                session here: --resume goes on with both (`gate --resume`, `compare --resume`)
    pipelines   the check of `gate --pipelines count` against time: the pipelined tests a
                reference gate (--reference, its store) confirmed by time, screened by counts
                and system calls per request (`--screen-only`), baseline vs comparison and as an
                A/A (the comparison on both sides); a screen that says "no change" where the
                reference's time decided a change is a miss

Each mode runs redline as a user would (subprocesses), records the load average every 10 s
(the machine is shared), and writes a summary (summary.md, summary.json) next to the gate's own
outputs in --out. Examples (docs/gate.md has the ones measured):

    .venv/bin/python scripts/gate_benchmark.py catalogue --out /tmp/gate-ab \\
        --baseline git:/work/wt/redis-repo@7.0.5 --comparison git:/work/wt/redis-repo@7.0.7 \\
        --suites /work/shared/upstream-suites/test-suites --scale 0.1644
    .venv/bin/python scripts/gate_benchmark.py aa --out /tmp/gate-aa --baseline git:/work/wt/redis-repo@7.0.7 \\
        --suites /work/shared/upstream-suites/test-suites --scale 0.1644
    .venv/bin/python scripts/gate_benchmark.py standard --out /tmp/gate-std \\
        --baseline git:/work/wt/redis-repo@7.0.5 --comparison git:/work/wt/redis-repo@7.0.7
    .venv/bin/python scripts/gate_benchmark.py pipelines --out /tmp/gate-pipelines \\
        --baseline git:/work/wt/redis-repo@7.0.5 --comparison git:/work/wt/redis-repo@7.0.7 \\
        --suites /work/shared/upstream-suites/test-suites --scale 0.1644 --reference /tmp/catalogue-ab/gate.db
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

REDLINE = [sys.executable, "-m", "redline.cli"]
GEO_EXPECTED = (   # what 7.0.7 changed against 7.0.5 (issue #35): the suite's name ends with -> expected
    ("geosearch-fromlonlat-bybox", "improvement, about 3x"),
    ("geosearch-fromlonlat", "improvement, about 1.2x (BYRADIUS)"),
    ("geodist-pipeline-10", "improvement, about 1.3x"),
    ("geopos", "not flagged"), ("geopos-pipeline-10", "not flagged"),
    ("geohash", "not flagged"), ("geohash-pipeline-10", "not flagged"),
)
CORES_PROJECTED = 16


class LoadSampler:
    """/proc/loadavg every `every` seconds, labelled with the phase, into a TSV file."""

    def __init__(self, path: Path, every: float = 10.0):
        self.path, self.every, self.phase = path, every, "start"
        self.samples: list[tuple[float, str, float]] = []      # every session's, when --out is reused (--resume)
        if path.exists():
            for line in path.read_text().splitlines():
                at, phase, value = line.split("\t")
                self.samples.append((float(at), phase, float(value)))
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        with open(self.path, "a") as out:
            while not self.stopped.is_set():
                one = float(Path("/proc/loadavg").read_text().split()[0])
                self.samples.append((time.time(), self.phase, one))
                out.write(f"{time.time():.0f}\t{self.phase}\t{one}\n")
                out.flush()
                self.stopped.wait(self.every)

    def stats(self, phase: str) -> dict:
        values = sorted(v for _, p, v in self.samples if p == phase)
        if not values:
            return {}
        return {"min": values[0], "median": values[len(values) // 2], "max": values[-1], "samples": len(values)}

    def stop(self):
        self.stopped.set()
        self.thread.join()


def run(argv: list[str], log: Path) -> tuple[int, float]:
    started = time.monotonic()
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        code = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT)
    return code, time.monotonic() - started


def build(target: str, log: Path) -> dict:
    """`redline build` of a git:/src: target (cached): this run's wall time, and the build's own
    time when it was built (build.json)."""
    if not target.startswith(("git:", "src:")):
        return {"target": target, "wall_s": 0.0, "built_s": None}
    code, wall = run([*REDLINE, "build", target], log)
    if code != 0:
        raise SystemExit(f"redline build {target} failed (see {log})")
    text = log.read_text().splitlines()
    binary = next(line for line in reversed(text) if line.endswith("/redis-server"))
    facts = json.loads((Path(binary).parent / "build.json").read_text())
    return {"target": target, "wall_s": round(wall, 1), "built_s": facts.get("build_seconds"),
            "binary": binary}


def gate(args, out: Path, log: Path, sampler: LoadSampler, baseline: str, comparison: str, suites: list[str],
         name: str = "gate") -> dict:
    sampler.phase = name
    outputs = ["--store", str(out / f"{name}.db"), "--json", str(out / f"{name}.json"),
               "--markdown", str(out / f"{name}.md"), "--html", str(out / f"{name}.html")]
    if args.resume and (out / f"{name}.db").exists():     # the stored gate goes on: its own targets, tests, settings
        argv = [*REDLINE, "gate", "--resume", "latest", *outputs]
        flags = ("jobs", "budget")
    else:
        argv = [*REDLINE, "gate", *suites, "--baseline", baseline, "--comparison", comparison, *outputs]
        flags = ("scale", "jobs", "budget", "window_instructions", "name")
    for flag in flags:
        value = getattr(args, flag, None)
        if value is not None:
            argv += [f"--{flag.replace('_', '-')}", str(value)]
    argv += args.gate_args
    code, wall = run(argv, log)
    document = stored_gate(out / f"{name}.db")
    return {"exit": code, "wall_s": round(wall, 1), "document": document, "load": sampler.stats(name),
            "sessions": chain(out / f"{name}.db", document)}


def stored_gate(store: Path) -> dict:
    """The gate's document as its last session stored it: there also when the gate was stopped
    (SIGTERM, Ctrl-C) before it wrote its --json file."""
    import sqlite3
    if not store.exists():
        return {}
    row = sqlite3.connect(store).execute("SELECT document FROM session_documents WHERE name='gate' "
                                         "ORDER BY session_id DESC LIMIT 1").fetchone()
    return json.loads(row[0]) if row else {}


def compare_sessions(store: Path) -> list[tuple[int, float, float]]:
    """The compare sessions of `store` (the first and each resume): number, start and end."""
    import sqlite3
    if not store.exists():
        return []
    db = sqlite3.connect(store)
    return [(n, started, finished) for n, started, finished in db.execute(
        "SELECT s.id, s.started_at, coalesce(s.finished_at, (SELECT max(finished_at) FROM runs r "
        "WHERE r.session_id = s.id), s.started_at) FROM sessions s WHERE s.kind = 'compare' ORDER BY s.id")]


def chain(store: Path, document: dict) -> list[dict]:
    """Each session of a gate that was resumed: its wall time and phases (from its own document)."""
    import sqlite3
    db = sqlite3.connect(store)
    out = []
    for session in document.get("sessions", []):
        row = db.execute("SELECT document FROM session_documents WHERE session_id=? AND name='gate'",
                         (session,)).fetchone()
        if row:
            earlier = json.loads(row[0])
            out.append({"session": session, "elapsed_s": earlier.get("elapsed_s"), "phases": earlier.get("phases"),
                        "finished": earlier.get("finished"), "budget_s": earlier.get("budget_s")})
    return out


DECIDED = ("improvement", "regression", "no_change")
DECIDING_STAGE = {"counts": "screen", "time": "time"}


def decided_over_time(document: dict, store: Path, sessions: list[dict]) -> list[float]:
    """When each decided test was decided, in hours of gate wall time summed over its sessions
    (a resumed gate's earlier sessions first): the end of the last run of the stage that decided
    it. Each verdict as it stands at the end, so what the first N hours of a gate decide can be
    read off a gate that ran longer than N hours (a budget of N hours spends them the same way:
    screens first, the likeliest decisions next)."""
    import sqlite3
    db = sqlite3.connect(store)
    started = dict(db.execute("SELECT id, started_at FROM sessions"))
    ended = {uid: finished for uid, finished in db.execute("SELECT uid, finished_at FROM runs WHERE finished_at IS NOT NULL")}
    offset, before = {}, 0.0
    for s in sessions:
        offset[s["session"]], before = before, before + (s["elapsed_s"] or 0)
    moments = []
    for t in document.get("tests", []):
        stage = (t.get("stages") or {}).get(DECIDING_STAGE.get(t.get("decided_by"), ""))
        if t["verdict"] not in DECIDED or not stage or stage.get("session") not in offset:
            continue
        ends = [ended[uid] for uid in stage["runs"] if uid in ended]
        if ends:
            moments.append((offset[stage["session"]] + max(ends) - started[stage["session"]]) / 3600)
    return sorted(moments)


def decided_by_hours(moments: list[float], total_h: float,
                     marks: tuple[float, ...] = (1, 2, 3, 4, 6, 8, 12)) -> list[tuple[float, int]]:
    """(hours, tests decided by then) at each mark the gate's `total_h` hours reached, and at its end."""
    reached = [mark for mark in marks if mark < total_h] + [total_h]
    return [(mark, sum(m <= mark for m in moments)) for mark in reached]


def per_test_costs(document: dict, store: Path) -> dict:
    """Lane-seconds of counted jobs (screens and profiles) and machine-seconds of timed jobs: each
    job from its first run's start to its last run's end (the gate's document names each stage's
    runs); the screens of pipelined tests apart (their counted windows send 5 pipelines a
    connection, so they cost more)."""
    import sqlite3
    db = sqlite3.connect(store)
    span = {uid: (started, finished) for uid, started, finished in
            db.execute("SELECT uid, started_at, finished_at FROM runs WHERE finished_at IS NOT NULL")}
    costs = {"counted": 0.0, "timed": 0.0, "pipelined_screen": 0.0}
    tests = {"counted": 0, "timed": 0, "pipelined_screen": 0}
    for entry in document.get("tests", []):
        for stage, done in (entry.get("stages") or {}).items():
            times = [span[uid] for uid in done["runs"] if uid in span]
            if not times:
                continue
            kind = "timed" if stage == "time" else "counted"
            cost = max(t[1] for t in times) - min(t[0] for t in times)
            costs[kind] += cost
            tests[kind] += stage != "profile"
            if stage == "screen" and _judged_system_calls(entry):
                costs["pipelined_screen"] += cost
                tests["pipelined_screen"] += 1
    return {"counted_lane_s": round(costs["counted"], 1), "timed_s": round(costs["timed"], 1),
            "counted_tests": tests["counted"], "timed_tests": tests["timed"],
            "pipelined_screen_lane_s": round(costs["pipelined_screen"], 1),
            "pipelined_screen_tests": tests["pipelined_screen"]}


def _judged_system_calls(entry: dict) -> bool:
    """Whether the test's screen judged system calls per request, as the gate does for a pipelined
    test (its counted window then sends 5 pipelines a connection): read off its counted metrics."""
    from redline.analysis.gate import SYSTEM_CALLS
    return any(m.get("metric") in SYSTEM_CALLS for m in (entry.get("counted") or {}).get("metrics") or [])


def geo_check(document: dict) -> list[str]:
    """A table row per 60M-point GEO suite: its verdict and effect against what 7.0.7 changed."""
    expected = dict(GEO_EXPECTED)
    lines = []
    for t in document.get("tests", []):
        if "geo-60M" not in t["key"]:
            continue
        wanted = next((words for end, words in expected.items() if t["key"].endswith(end)), "(not named by the issue)")
        effect = t.get("effect_pct")
        ratio = f" ({1 / (1 + effect / 100):.2f}x less per op)" if effect is not None and effect > -100 else ""
        flagged = t["verdict"] in ("regression", "improvement")
        ok = "–" if wanted.startswith("(") else "yes" if flagged == (wanted != "not flagged") and \
            (not flagged or t["verdict"] == wanted.split(",")[0]) else "NO"
        effect_text = f"{effect:+.1f}%{ratio}" if effect is not None else "–"
        lines.append(f"| {t['key']} | {t['verdict']} ({t.get('decided_by') or '–'}) | {effect_text} | {wanted} | {ok} |")
    return lines


def projection(costs: dict, builds: list[dict], phases: dict, cores_here: int) -> dict:
    """The same catalogue on a machine with CORES_PROJECTED cores: builds scale with make -j,
    counted jobs spread over one lane per core, timed jobs (one at a time, whole machine) do not."""
    built = sum(b["built_s"] or 0 for b in builds)
    return {"cores": CORES_PROJECTED,
            "builds_s": round(built * cores_here / CORES_PROJECTED, 1),
            "counted_s": round(costs["counted_lane_s"] / CORES_PROJECTED, 1),
            "timed_s": costs["timed_s"],
            "total_s": round(built * cores_here / CORES_PROJECTED + costs["counted_lane_s"] / CORES_PROJECTED
                             + costs["timed_s"], 1)}


def hours(seconds: float | None) -> str:
    from redline.core.numbers import format_duration
    return format_duration(seconds)


def catalogue_mode(args, out: Path, log: Path, sampler: LoadSampler, *, aa: bool) -> dict:
    comparison = args.baseline if aa else args.comparison
    sampler.phase = "builds"
    builds = [build(args.baseline, log)] + ([] if aa else [build(comparison, log)])
    result = gate(args, out, log, sampler, args.baseline, comparison, args.suites or [])
    document = result["document"]
    costs = per_test_costs(document, out / "gate.db")
    summary = {"mode": "aa" if aa else "catalogue", "builds": builds, "gate": {k: v for k, v in result.items()
                                                                             if k != "document"},
               "phases": document.get("phases"), "verdicts": document.get("summary"), "costs": costs,
               "projection": projection(costs, builds, document.get("phases") or {}, len(os.sched_getaffinity(0))),
               "broken": document.get("broken"), "budget_left_undecided": document.get("budget_left_undecided")}
    sessions = result["sessions"]
    summary["sessions"] = sessions
    total = sum(s["elapsed_s"] or 0 for s in sessions)
    phases = {k: round(sum((s["phases"] or {}).get(k) or 0 for s in sessions), 1)
              for k in ("screen_wall_s", "timed_s", "profile_s", "profile_wall_s", "preparation_s")}
    summary["phases_all_sessions"] = phases
    timeline = decided_by_hours(decided_over_time(document, out / "gate.db", sessions), total / 3600)
    summary["decided_by_hours"] = timeline
    lines = [f"# gate {'A/A' if aa else 'A/B'}: {args.baseline} vs {comparison}", "",
             f"sessions (a resumed gate continues in a new one): "
             + "; ".join(f"{s['session']}: {hours(s['elapsed_s'])}{'' if s['finished'] else ' (stopped)'}"
                         for s in sessions) + f"; together {hours(total)}", "",
             f"command: see {log.name}; load average during the gate (1-min, every 10 s): {result['load']}", "",
             "| phase | wall time |", "|---|---:|",
             *[f"| build {b['target']} | {hours(b['wall_s'])} this run (built in {hours(b['built_s'])}) |" for b in builds],
             f"| gate, whole (every session) | {hours(total)} |",
             f"| of which counted screen (lanes, to the last screen job) | {hours(phases['screen_wall_s'])} |",
             f"| of which timed confirmation (whole machine) | {hours(phases['timed_s'])} |",
             f"| of which counted profiles (lanes, after the timed jobs; {hours(phases['profile_s'])} of lane time) "
             f"| {hours(phases['profile_wall_s'] or phases['profile_s'])} |",
             f"| datasets prepared (inside the above) | {hours(phases['preparation_s'])} |",
             "", f"verdicts: {document.get('summary')}", "",
             "| gate wall time (every session) | tests decided by then (each dated by the end of the stage that decided it) |",
             "|---:|---:|", *[f"| {hours(h * 3600)} | {n} |" for h, n in timeline], "",
             f"per-test costs: {costs}; projection for {CORES_PROJECTED} cores: {summary['projection']}"]
    if aa:
        false = [t for t in document.get("tests", []) if t["verdict"] in ("regression", "improvement")]
        summary["false_verdicts"] = [(t["key"], t["verdict"], t["why"]) for t in false]
        lines += ["", f"false verdicts (A/A): {len(false)}", *[f"- {t['key']}: {t['verdict']}: {t['why']}" for t in false]]
    else:
        lines += ["", "| GEO test | verdict | effect (time, or counts) | expected | as expected |", "|---|---|---:|---|---|",
                  *geo_check(document)]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return summary


def decision(comparisons: list[dict], test: str, metric: str) -> str | None:
    row = next((c for c in comparisons if c["test"] == test and c["metric"] == metric), None)
    return row["verdict"] if row else None


def standard_mode(args, out: Path, log: Path, sampler: LoadSampler) -> dict:
    """The gate, then `redline compare` at its defaults, same targets and suites. With --resume
    (the compare at its defaults outlasts a working session on 2 cores): a gate that finished is not
    run again, an unfinished one goes on (`gate --resume`), and the compare goes on from where it
    stopped (`compare --resume`); wall times add up every session of each."""
    sampler.phase = "builds"
    builds = [build(args.baseline, log), build(args.comparison, log)]
    suites = args.suites or ["standard"]
    earlier = json.loads((out / "gate.json").read_text()) if args.resume and (out / "gate.json").exists() else {}
    if earlier.get("finished"):
        result = {"exit": 0, "document": earlier, "sessions": chain(out / "gate.db", earlier)}
    else:
        result = gate(args, out, log, sampler, args.baseline, args.comparison, suites)
    result["wall_s"] = round(sum(s["elapsed_s"] or 0 for s in result["sessions"]), 1)
    result["load"] = sampler.stats("gate")
    sampler.phase = "compare"
    outputs = ["--store", str(out / "compare.db"), "--json", str(out / "compare.json"),
               "--markdown", str(out / "compare.md")]
    if args.resume and compare_sessions(out / "compare.db"):
        argv = [*REDLINE, "compare", "--resume", "latest", *outputs]
    else:
        argv = [*REDLINE, "compare", *suites, "--baseline", args.baseline, "--comparison", args.comparison, *outputs]
    code, _ = run(argv, log)
    sessions = compare_sessions(out / "compare.db")
    wall = sum(finished - started for _, started, finished in sessions)
    if not (out / "compare.json").exists():        # stopped before its verdicts: it goes on with --resume
        raise SystemExit(f"the compare stopped before its verdicts (exit {code}) after {hours(wall)} in "
                         f"{len(sessions)} sessions; go on with: {' '.join(sys.argv)}"
                         + ("" if args.resume else " --resume"))
    compared = json.loads((out / "compare.json").read_text())
    comparisons = compared.get("comparisons", compared if isinstance(compared, list) else [])
    metric = "server_cpu_us_per_op"
    rows, decided_gate, decided_compare, contradictions = [], 0, 0, []
    for t in result["document"].get("tests", []):
        g = t["verdict"]
        c = decision(comparisons, t["test"], metric)
        g_decided = g in ("regression", "improvement", "no_change")
        c_decided = c in ("regression", "improvement", "no_change")
        decided_gate += g_decided
        decided_compare += c_decided
        if g_decided and c_decided and g != c:
            contradictions.append((t["key"], g, c))
        rows.append(f"| {t['key']} | {g} ({t.get('decided_by') or '–'}) | {c or '–'} |")
    summary = {"mode": "standard", "builds": builds, "gate": {"wall_s": result["wall_s"], "exit": result["exit"],
                                                              "load": result["load"]},
               "compare": {"wall_s": round(wall, 1), "exit": code, "load": sampler.stats("compare"),
                           "sessions": [{"session": n, "wall_s": round(f - s, 1)} for n, s, f in sessions]},
               "gate_sessions": result["sessions"],
               "decided": {"gate": decided_gate, "compare": decided_compare}, "contradictions": contradictions,
               "wall_ratio": round(result["wall_s"] / wall, 3) if wall else None}
    lines = ["# gate vs compare on the standard suite, side by side", "",
             f"gate: {hours(result['wall_s'])}, load {result['load']}; compare (defaults): {hours(wall)}, "
             f"load {sampler.stats('compare')}; ratio {summary['wall_ratio']}", "",
             f"tests decided: gate {decided_gate}, compare {decided_compare} (compare: {metric}'s verdict after "
             f"false-discovery control); verdicts that contradict: {len(contradictions)} {contradictions}", "",
             "| test | gate | compare |", "|---|---|---|", *rows]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return summary


PIPELINE_ONLY = "pipeline "      # the start of the one reason a pipelined test goes to time (timed_reasons)


def pipelined_timed(reference: dict) -> list[dict]:
    """The tests of a reference gate sent to time for their pipeline alone whose timed runs ended
    in a comparison (a decided change, no change, or inconclusive): what the check screens."""
    return [t for t in reference.get("tests", []) if t.get("why_timed") and t.get("timed")
            and all(w.startswith(PIPELINE_ONLY) for w in t["why_timed"])]


def screened_words(entry: dict | None) -> tuple[str, str]:
    """A screen's decision and what moved (or why undecided), from a gate document's test entry."""
    counted = (entry or {}).get("counted")
    if not counted:
        return "not screened", (entry or {}).get("why") or "–"
    return counted["decision"], counted.get("note") or "–"


def pipelines_mode(args, out: Path, log: Path, sampler: LoadSampler) -> dict:
    reference = stored_gate(Path(args.reference))
    chosen = pipelined_timed(reference)
    if not chosen:
        raise SystemExit(f"{args.reference}: no pipelined test was confirmed by time there")
    args.name = "^(" + "|".join(re.escape(t["test"]) for t in chosen) + ")$"
    args.gate_args += ["--pipelines", "count", "--screen-only"]
    sampler.phase = "builds"
    builds = [build(args.baseline, log), build(args.comparison, log)]
    ab = gate(args, out, log, sampler, args.baseline, args.comparison, args.suites or [], name="ab")
    aa = gate(args, out, log, sampler, args.comparison, args.comparison, args.suites or [], name="aa")
    by_key = {name: {t["key"]: t for t in result["document"].get("tests", [])} for name, result in
              (("ab", ab), ("aa", aa))}
    rows, misses = [], []
    for t in sorted(chosen, key=lambda t: (t["verdict"], t["key"])):
        decision, note = screened_words(by_key["ab"].get(t["key"]))
        aa_decision, aa_note = screened_words(by_key["aa"].get(t["key"]))
        timed = t["timed"]
        changed = t["verdict"] in ("improvement", "regression")
        if decision == "no change" and changed:
            misses.append(t["key"])
        rows.append({"test": t["key"], "time": t["verdict"], "time_delta_pct": timed.get("delta_pct"),
                     "screen": decision, "screen_note": note, "aa_screen": aa_decision, "aa_note": aa_note})
    summary = {"mode": "pipelines", "builds": builds, "reference": args.reference, "tests": len(chosen),
               "ab": {k: v for k, v in ab.items() if k != "document"}, "aa": {k: v for k, v in aa.items() if k != "document"},
               "rows": rows, "misses": misses,
               "ab_screens": dict(Counter(r["screen"] for r in rows)),
               "aa_screens": dict(Counter(r["aa_screen"] for r in rows))}
    lines = [f"# --pipelines count against time: {args.baseline} vs {args.comparison}", "",
             f"{len(chosen)} pipelined tests that {args.reference} confirmed by time; commands in {log.name}", "",
             f"A/B screens {hours(ab['wall_s'])} ({summary['ab_screens']}), load {ab['load']}",
             f"A/A screens {hours(aa['wall_s'])} ({summary['aa_screens']}), load {aa['load']}", "",
             f"misses (the screen said no change, time a change): {len(misses)} {misses}", "",
             "| test | time (reference) | A/B screen | what moved / why | A/A screen |", "|---|---|---|---|---|",
             *[f"| {r['test']} | {r['time']} {'' if r['time_delta_pct'] is None else format(r['time_delta_pct'], '+.1f') + '%'}"
               f" | {r['screen']} | {r['screen_note']} | {r['aa_screen']}"
               f"{'' if r['aa_screen'] == 'no change' else ': ' + r['aa_note']} |" for r in rows]]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("catalogue", "aa", "standard", "pipelines"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--comparison")
    parser.add_argument("--suites", nargs="*")
    parser.add_argument("--scale", type=float)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--budget")
    parser.add_argument("--window-instructions", dest="window_instructions", type=int)
    parser.add_argument("--name")
    parser.add_argument("--reference", help="pipelines: the store of a gate whose timed verdicts the screens are "
                                            "checked against")
    parser.add_argument("--resume", action="store_true", help="go on with the gate stored in --out (redline gate "
                                                               "--resume latest); the summary covers every session")
    args, more = parser.parse_known_args()      # anything else goes to `redline gate` (e.g. --duration 5s)
    args.gate_args = [a for a in more if a != "--"]
    if args.mode != "aa" and not args.comparison:
        parser.error(f"{args.mode} needs --comparison")
    if args.mode == "pipelines" and not args.reference:
        parser.error("pipelines needs --reference (a gate store whose timed verdicts are the check)")
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "commands.log"
    sampler = LoadSampler(args.out / "load.tsv")
    started = time.monotonic()
    try:
        if args.mode == "standard":
            summary = standard_mode(args, args.out, log, sampler)
        elif args.mode == "pipelines":
            summary = pipelines_mode(args, args.out, log, sampler)
        else:
            summary = catalogue_mode(args, args.out, log, sampler, aa=args.mode == "aa")
    finally:
        sampler.stop()
    summary["script_wall_s"] = round(time.monotonic() - started, 1)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
