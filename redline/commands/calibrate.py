"""`redline calibrate`: A/A runs of one target, stored as each test's noise floor on this machine."""

from __future__ import annotations

from redline.commands.report import html_if_asked
from redline.commands.session import check_before_starting, execute_session, measured_runs_by_test, \
    session_exit_code, target_from
from redline.comparison import COMPARED_METRICS
from redline.run_plan import Side
from redline.output import terminal
from redline.output.json_file import write_runs_json
from redline.output.tables import noise_floor_table
from redline.stats import noise_floor_pct


def calibrate_command(args) -> int:
    target = target_from(args.target, args.config, "--config", args.variant)
    sides = [Side(target, "baseline"), Side(target, "comparison")]
    session = execute_session(args, kind="calibrate", sides=sides, tests=check_before_starting(args, sides))
    floors: dict[str, dict[str, float | str]] = {}
    for test, records in measured_runs_by_test(session.records).items():
        floors[test] = {}
        for metric in COMPARED_METRICS:
            a = [r.metrics[metric] for r in records if r.side == "baseline" and r.status == "ok" and r.metrics.get(metric)]
            b = [r.metrics[metric] for r in records if r.side == "comparison" and r.status == "ok" and r.metrics.get(metric)]
            try:
                floor = noise_floor_pct(a, b)
            except ValueError as exc:
                floors[test][metric] = str(exc)
                continue
            session.store.save_noise_floor(test=test, metric=metric, floor_pct=floor,
                                           runs=min(len(a), len(b)), target=target.label)
            floors[test][metric] = floor
    terminal.console().print(noise_floor_table(floors, COMPARED_METRICS))
    if args.json:
        write_runs_json(args.json, [r for r in session.records if r.purpose == "measure"])
    html_if_asked(args, session)
    return session_exit_code(session)
