"""What each CLI command does, on top of the engine."""

from __future__ import annotations

import sys

from rich.console import Console

from redline import machine
from redline.engine import Engine, RunSettings, Side
from redline.errors import UsageError
from redline.pinning import plan_pinning
from redline.report import ConsoleObserver, results_table, write_json
from redline.spec import SpecError, resolve_suites, select
from redline.store import Store
from redline.targets import default_target, parse_config_pairs, parse_target

DEFAULT_SUITE = "quick"


def select_tests(args) -> list:
    try:
        tests = resolve_suites(args.suites or [DEFAULT_SUITE])
        tests = select(tests, args.name)
    except SpecError as exc:
        raise UsageError(str(exc)) from exc
    if not tests:
        raise UsageError(f"no test matches --name {args.name!r}" if args.name else "the suites hold no tests")
    return tests


def run_settings(args) -> RunSettings:
    return RunSettings(runs=args.runs, duration_s=args.duration, warmup_s=args.warmup, scale=args.scale)


def run_command(args) -> int:
    config = parse_config_pairs(args.config, "--config")
    target = parse_target(args.target, config) if args.target else default_target()
    if config and not args.target:
        target = parse_target(target.spec, config)
    tests = select_tests(args)
    pinning = plan_pinning()
    console = Console(stderr=True, highlight=False)
    console.print(f"redline {machine.facts()['redline_version']}: {len(tests)} tests × {args.runs} runs "
                  f"against {target.label}; {pinning.describe()}")
    if not target.managed:
        console.print("[yellow]tcp target: someone else's server — no process control, no server CPU, "
                      "no profiles[/yellow]")
    store = Store(args.store)
    session_id = store.begin_session(kind="run", argv=sys.argv, machine=machine.facts())
    observer = ConsoleObserver(console)
    status = "interrupted"
    try:
        engine = Engine(store=store, observer=observer, pinning=pinning)
        records = engine.execute(tests=tests, sides=[Side(target)], settings=run_settings(args),
                                 session_id=session_id)
        status = "finished"
    finally:
        observer.close()
        store.finish_session(session_id, status)
    Console(highlight=False).print(results_table(records))
    if args.json:
        write_json(args.json, records)
    failed = [r for r in records if r.status != "ok"]
    console.print(f"stored {len(records)} runs in {args.store} (session {session_id})"
                  + (f"; [red]{len(failed)} failed[/red]" if failed else ""))
    return 1 if failed else 0
