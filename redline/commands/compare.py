"""`redline compare`: interleaved A/B runs of a baseline and a comparison, and their verdicts."""

from __future__ import annotations

from redline.commands.report import html_if_asked
from redline.commands.session import check_before_starting, execute, session_exit_code
from redline.analysis.comparison import (COMPARED_METRICS, apply_false_discovery_control, attach_profiles, compare_test,
                                         looks_confidence, measured_runs_by_test)
from redline.export.sink import live_export
from redline.engine.run_plan import Side
from redline.lab.session import target_from
from redline.topology import DEFAULT_TOPOLOGY
from redline.core.errors import UsageError
from redline.output import files, verdicts
from redline.core import terminal
from redline.output.json_file import write_comparison_json
from redline.output.markdown import comparison_markdown
from redline.analysis.stats import Verdict
from redline.store.results import Store

FDR_Q = 0.05          # Benjamini–Hochberg false-discovery rate for verdicts of change


def compare_command(args) -> int:
    baseline = Side(target_from(args.baseline, args.baseline_config, "--baseline-config", args.variant), "baseline")
    comparison = Side(target_from(args.comparison, args.comparison_config, "--comparison-config", args.variant),
                      "comparison")
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    tests = check_before_starting(args, [baseline, comparison])
    floors = Store(args.store).noise_floors() if args.store.exists() else {}
    confidence = looks_confidence(args.runs, args.max_runs)
    lone_p_value = FDR_Q / (len(tests) * len(args.topology or [DEFAULT_TOPOLOGY]) * len(COMPARED_METRICS))
    export = live_export(args)
    session = execute(args, kind="compare", sides=[baseline, comparison], tests=tests,
                              max_runs=args.max_runs, lone_p_value=lone_p_value, floors=floors,
                              sinks=(export,) if export else ())
    by_test = measured_runs_by_test(session.records)
    comparisons = [c for test, records in by_test.items()
                   for c in compare_test(test, records, floors, confidence=confidence)]
    apply_false_discovery_control(comparisons, q=FDR_Q)
    if args.profile:
        artifacts = session.store.path.with_name(session.store.path.stem + "-artifacts") / f"compare-{session.session_id}"
        attach_profiles(comparisons, session.records, artifacts)
    session.store.save_comparisons(session.session_id, [c.as_json() for c in comparisons])
    out = terminal.console()
    out.print(verdicts.terminal_table(comparisons, width=out.width))
    for line in verdicts.name_legend(comparisons, width=out.width):
        out.print(line)
    out.print(verdicts.summary_sentence(comparisons, len(by_test)))
    for line in verdicts.profile_lines(comparisons):
        out.print(line)
    if args.markdown:
        files.write_output(args.markdown, comparison_markdown(comparisons, session.records,
                                                         baseline=baseline.target.label,
                                                         comparison=comparison.target.label))
    if args.json:
        write_comparison_json(args.json, comparisons, session.records)
    html_if_asked(args, session)
    regressions = [c for c in comparisons if c.verdict == Verdict.REGRESSION]
    code = session_exit_code(session, regressions=len(regressions) if args.fail_on_regression else 0)
    return export.finish(session.store, session.session_id, code) if export else code
