"""`redline calibrate`: A/A runs of one target, stored as each test's noise floor on this machine."""

from __future__ import annotations

from redline.analysis.comparison import measured_runs_by_test
from redline.analysis.counted import MIN_RUNS as INSTRUCTION_MIN_RUNS
from redline.analysis.counted import spread_pct
from redline.analysis.stats import noise_floor_pct
from redline.commands.arguments import EXIT_STATUS, add_measurement_arguments, add_selection_arguments
from redline.commands.session import check_before_starting, execute, finish, run_settings
from redline.core import metrics
from redline.engine.run_plan import Side
from redline.lab.session import SessionPlan, target_from


def add_parser(commands) -> None:
    parser = commands.add_parser("calibrate", help="A/A runs: measure each test's noise floor on this machine",
                                 epilog=EXIT_STATUS)
    add_selection_arguments(parser)
    parser.add_argument("--target", metavar="TARGET", help="server (default: redis-server on PATH)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    add_measurement_arguments(parser, default_runs=7)
    parser.set_defaults(func=calibrate_command)


def calibrate_command(args) -> int:
    target = target_from(args.target, args.config, "--config", args.variant)
    sides = [Side(target, "baseline"), Side(target, "comparison")]
    session = execute(args, SessionPlan("calibrate", sides, check_before_starting(args, sides), run_settings(args)))
    floors: dict[str, dict[str, float | str]] = {}
    for test, records in measured_runs_by_test(session.records).items():
        floors[test] = {}
        measure = metrics.measure_of(r.metrics for r in records if r.status == "ok")
        for metric in (m.name for m in metrics.compared(measure)):
            a = [r.metrics[metric] for r in records if r.side == "baseline" and r.status == "ok" and r.metrics.get(metric)]
            b = [r.metrics[metric] for r in records if r.side == "comparison" and r.status == "ok" and r.metrics.get(metric)]
            try:
                floor = _floor(measure, a, b)
            except ValueError as exc:
                floors[test][metric] = str(exc)
                continue
            session.store.save_noise_floor(test=test, metric=metric, floor_pct=floor,
                                           runs=min(len(a), len(b)), target=target.label)
            floors[test][metric] = floor
    session.store.save_session_document(session.session_id, "noise_floors", floors)
    return finish(args, session)


def _floor(measure: str, a: list[float], b: list[float]) -> float:
    """Timed runs: the A/A change (redline.analysis.stats.noise_floor_pct). Runs under callgrind: the A/A
    spread, (max − min) ÷ median of every run of both sides, which the instructions verdict rule
    multiplies into its threshold (redline.analysis.counted)."""
    if measure == metrics.INSTRUCTIONS:
        if min(len(a), len(b)) < INSTRUCTION_MIN_RUNS:
            raise ValueError(f"too few A/A runs for a spread ({len(a)} + {len(b)}); use at least "
                             f"{INSTRUCTION_MIN_RUNS} per side")
        return spread_pct(a + b)
    return noise_floor_pct(a, b)
