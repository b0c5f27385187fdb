"""`redline run`: measure the selected tests on one target."""

from __future__ import annotations

from redline.commands.report import html_if_asked
from redline.commands.session import check_before_starting, execute, session_exit_code
from redline.export.sink import live_export
from redline.engine.run_plan import Side
from redline.lab.session import target_from
from redline.core import terminal
from redline.output.json_file import write_runs_json
from redline.output.tables import print_profiles, print_results


def run_command(args) -> int:
    target = target_from(args.target, args.config, "--config", args.variant)
    sides = [Side(target)]
    tests = check_before_starting(args, sides)
    export = live_export(args)
    session = execute(args, kind="run", sides=sides, tests=tests, sinks=(export,) if export else ())
    measured = [r for r in session.records if r.purpose == "measure"]
    out = terminal.console()
    print_results(out, measured)
    print_profiles(out, [r for r in session.records if r.purpose == "profile"])
    if args.json:
        write_runs_json(args.json, measured)
    html_if_asked(args, session)
    code = session_exit_code(session)
    return export.finish(session.store, session.session_id, code) if export else code
