"""`redline gate`: the whole catalogue, baseline vs comparison, one verdict per test — screened by
counts in parallel lanes, confirmed by time alone on the machine, within a time budget
(redline.lab.gate; docs/gate.md)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from redline.analysis.stats import FUTILITY_CHANCE, Verdict
from redline.commands.argtypes import duration, positive_int, regex, session_id, whole_seconds
from redline.commands.arguments import (EXIT_STATUS, add_scale_argument, add_snapshots_argument, add_store_argument,
                                        add_window_argument)
from redline.commands.session import DUET_HELP, check_duet, check_outputs, finish
from redline.core import metrics, terminal
from redline.core.errors import UsageError
from redline.engine.job import suite_path
from redline.engine.run_plan import Side
from redline.lab.gate import Broken, Gate, GatePlan, GateSettings, earlier_documents, select_catalogue
from redline.lab.scheduler import Scheduler, default_lanes, plan_lanes
from redline.lab.session import Session, ready_sides, target_from
from redline.output.progress import ConsoleObserver
from redline.server.targets import parse_target
from redline.store.results import Store, inspect_store_file
from redline.system import machine
from redline.system.pinning import available_cpus
from redline.system.workdirs import remove_abandoned_workdirs

DEFAULT_CATALOGUE = "standard"
TIMED_METRICS = tuple(m.name for m in metrics.compared(metrics.TIME))


def budget(text: str) -> float:
    """A time budget: '3h', '90m', '1h30m', '45s' (the parts of a duration, added)."""
    import re
    parts = re.findall(r"\s*(\d+(?:\.\d+)?)\s*(h|m|s)\s*", text)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != re.sub(r"\s+", "", text):
        raise argparse.ArgumentTypeError(f"not a time budget: {text!r} (examples: 3h, 90m, 1h30m)")
    seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"a time budget of {text!r} leaves no time to measure anything")
    return seconds


def lanes(text: str) -> int:
    """--jobs: a number of lanes (at least 1); whether the machine has the cores is checked next."""
    if text == "auto":
        return default_lanes(available_cpus())
    return positive_int(text)


def add_parser(commands) -> None:
    parser = commands.add_parser(
        "gate", help="the whole catalogue, baseline vs comparison: counted screen in parallel lanes, "
                     "timed confirmation, one verdict per test within a budget", epilog=EXIT_STATUS)
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help="suite YAML files, directories of them (a catalogue), built-in suite names "
                             f"(default: {DEFAULT_CATALOGUE}); broken suites are named and left out")
    parser.add_argument("--name", type=regex, metavar="REGEX", help="keep the tests whose name matches REGEX")
    parser.add_argument("--baseline", metavar="TARGET", help="baseline server (default: redis-server on PATH)")
    parser.add_argument("--comparison", metavar="TARGET", help="comparison server (default: redis-server on PATH)")
    parser.add_argument("--baseline-config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--comparison-config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--variant", metavar="NAME", help="build variant for git:/src: targets")
    parser.add_argument("--jobs", type=lanes, default=None, metavar="N",
                        help="lanes for counted runs, each on its own cores (default: one per core; 'auto')")
    parser.add_argument("--budget", type=budget, default=None, metavar="TIME",
                        help="stop starting new work after TIME (e.g. 3h, 1h30m); what is left undecided is listed")
    parser.add_argument("--counted-runs", type=positive_int, default=2, metavar="N",
                        help="counted runs per side of the screen (default 2)")
    parser.add_argument("--counted-max-runs", type=positive_int, default=3, metavar="N",
                        help="one more counted run per side while the screen is not 'no change', up to N (default 3)")
    parser.add_argument("--runs", type=positive_int, default=None, metavar="N",
                        help="timed runs per side of a confirmation (default 5; with --duet the first look at "
                             "which the pairs' own interval can decide: 7 of at most 15)")
    parser.add_argument("--max-runs", type=positive_int, default=15, metavar="N",
                        help=f"two more timed runs per side while undecided and they have at least a "
                             f"{100 * FUTILITY_CHANCE:g}%% chance to decide, up to N (default 15)")
    parser.add_argument("--duration", type=whole_seconds, default=3.0, metavar="TIME",
                        help="measured time of a timed run (default 3s; the suites' own --test-time is not used)")
    parser.add_argument("--warmup", type=duration, default=1.0, metavar="TIME", help="warm-up of a timed run (default 1s)")
    parser.add_argument("--metric", choices=TIMED_METRICS, default="server_cpu_us_per_op",
                        help="the timed metric a test is decided on (default server_cpu_us_per_op; "
                             "ops_per_sec where no server CPU is measured)")
    add_window_argument(parser, "counted runs: a window of at least N instructions (default 50000000: the screen "
                                "only asks whether a test moved beyond its threshold)")
    add_scale_argument(parser)
    add_snapshots_argument(parser)
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="no counted profile (differential flame graph) of the tests whose counts moved")
    parser.add_argument("--resume", type=session_id, metavar="SESSION",
                        help="continue an interrupted or budget-limited gate of this store ('latest'): its "
                             "targets, tests and settings; decided tests are not measured again")
    parser.add_argument("--duet", action="store_true",
                        help=DUET_HELP.replace("timed A/B as duets", "timed confirmations as duets")
                        + "; with --resume: the timed confirmations still to run")
    parser.add_argument("--pipelines", choices=("count", "time"), default=None,
                        help="pipelined tests: screened by counts, with the server's reads and writes per request "
                             "(what pipelining saves) judged beside the instructions (count: a new gate's default), "
                             "or sent straight to time (time); with --resume: from now on (default: as the gate "
                             "began)")
    parser.add_argument("--screen-only", dest="confirm", action="store_false",
                        help="counts only: no timed confirmation (a test counts cannot decide stays undecided "
                             "and says so; resume without it to confirm)")
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 3 when a regression survives false-discovery control")
    add_store_argument(parser)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the gate's document (every verdict) as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write the gate's page as markdown")
    parser.add_argument("--html", type=Path, metavar="FILE", help="write the gate's page as self-contained HTML")
    parser.set_defaults(func=gate_command)


def gate_command(args) -> int:
    inspect_store_file(args.store)
    check_outputs(args, {"--json": args.json, "--markdown": args.markdown, "--html": args.html})
    cpus = available_cpus()
    plan_lanes(cpus, args.jobs or default_lanes(cpus))        # --jobs beyond the cores: one line, exit 2
    args.runs = first_timed_look(args)
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    if args.counted_max_runs < args.counted_runs:
        raise UsageError(f"--counted-max-runs ({args.counted_max_runs}) is smaller than --counted-runs "
                         f"({args.counted_runs})")
    from redline.instructions.callgrind import find_valgrind
    find_valgrind()
    console = terminal.console(stderr=True)
    resumed, sides, settings, suites = _what_to_gate(args)
    tests, broken = select_catalogue(suites, args.name if not resumed else None)
    if resumed:
        wanted = {entry["key"].split("@", 1)[0] for entry in resumed[0].get("tests", [])}
        tests = [t for t in tests if t.name in wanted]
        broken = [Broken(b["location"], b["message"]) for b in resumed[0].get("broken", [])] + broken
    for b in broken:
        console.print(f"skipped: {b}", style="yellow")
    observer = ConsoleObserver(console)
    building = time.monotonic()
    try:
        sides = ready_sides(sides, observer)
    finally:
        observer.close()
    builds_s = time.monotonic() - building
    store = Store(args.store)
    remove_abandoned_workdirs()
    floors = store.noise_floors()
    session = store.begin_session(kind="gate", argv=sys.argv, machine=machine.facts())
    console.print(f"redline gate (session {session}): {len(tests)} tests, {len(broken)} broken suites left out; "
                  f"{sides[0].target.label} vs {sides[1].target.label}")
    from redline.output.lanes import LaneProgress
    progress = LaneProgress(console)
    scheduler = Scheduler(store, lanes=args.jobs, cpus=cpus, observers=[progress])
    plan = GatePlan(sides=sides, tests=tests, broken=broken, settings=settings, budget_s=args.budget,
                    resumed=resumed, argv=sys.argv, builds_s=builds_s)
    status = "interrupted"
    try:
        result = Gate(plan, store=store, session_id=session, scheduler=scheduler, floors=floors,
                      progress=progress).run()
        status = "finished"
    finally:
        progress.close()
        store.finish_session(session, status)
    regressions = [v for v in result.verdicts if v.verdict == Verdict.REGRESSION]
    return finish(args, Session("gate", store, session, result.records),
                  regressions=len(regressions) if args.fail_on_regression else 0)


def first_timed_look(args) -> int:
    """Timed runs per side before a confirmation's first look: --runs, or the gate's own choice
    (GateSettings.first_look)."""
    if args.runs is not None:
        return args.runs
    return GateSettings.first_look(duet=args.duet, max_runs=args.max_runs)


def _what_to_gate(args):
    """The sides, settings and suites: from the command line, or from the gate being resumed."""
    if args.resume is None:
        sides = [Side(target_from(args.baseline, args.baseline_config, "--baseline-config", args.variant), "baseline"),
                 Side(target_from(args.comparison, args.comparison_config, "--comparison-config", args.variant),
                      "comparison")]
        settings = GateSettings(counted_runs=args.counted_runs, counted_max_runs=args.counted_max_runs,
                                timed_runs=args.runs, timed_max_runs=args.max_runs, duration_s=args.duration,
                                warmup_s=args.warmup, scale=args.scale, window_instructions=args.window_instructions,
                                snapshots=args.snapshots, metric=args.metric, profile=args.profile,
                                duet=args.duet, count_pipelines=args.pipelines != "time", confirm=args.confirm)
        check_duet(args, sides)
        return [], sides, settings, args.suites or [DEFAULT_CATALOGUE]
    if args.suites or args.baseline or args.comparison or args.name:
        raise UsageError("--resume continues the stored gate with its own targets and tests; give no suites, "
                         "--name, --baseline or --comparison with it")
    if not args.store.exists():
        raise UsageError(f"--resume {args.resume}: {args.store} does not exist")
    store = Store(args.store)
    number = store.latest_session("gate") if args.resume == "latest" else args.resume
    if number is None:
        raise UsageError(f"--resume latest: {args.store} holds no gate session")
    documents = earlier_documents(store, number)
    store.close()
    latest = documents[0]
    sides = [Side(parse_target(s["target"], s.get("config") or {}, s.get("variant")), s["name"])
             for s in latest["sides"]]
    suites = [str(suite_path(reference)) for reference in latest["suites"]]
    settings = GateSettings.resumed(latest, duet=args.duet, pipelines=args.pipelines, confirm=args.confirm)
    check_duet(args, sides)
    return documents, sides, settings, suites
