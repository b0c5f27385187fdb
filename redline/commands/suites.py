"""`redline suites validate` and `redline suites list`.

cli.py calls `add_suites_parser(subparsers)`; each subcommand sets `func(args) -> exit code`.
"""
from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from redline.commands.argtypes import regex
from redline.core import terminal
from redline.core.errors import UsageError
from redline.suites import (Diagnostic, SpecError, TestSpec, builtin_suites, discover, load_test, parse_priority_range,
                            select)

SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "ignored": "dim"}


def add_parser(subparsers) -> None:
    """Register `suites validate PATH...` and `suites list [PATH...] [filters]`."""
    suites = subparsers.add_parser("suites", help="validate and list test suites",
                                   description="Validate and list test-suite files (upstream "
                                   "Redis Benchmarks Specification 0.4 YAML plus redline "
                                   "extensions).")
    actions = suites.add_subparsers(dest="suites_command", metavar="{validate,list}")
    actions.required = True

    validate = actions.add_parser("validate", help="check suite files; exit 1 on any error",
                                  description="Check suite files, directories or built-in "
                                  "suites. Prints a summary and every error and warning with "
                                  "file:line. Exit status 1 if any file has an error.")
    validate.add_argument("paths", nargs="+", metavar="PATH",
                          help="suite file, directory (searched recursively) or built-in suite")
    validate.add_argument("--show-ignored", action="store_true",
                          help="list every ignored key with its file:line, not only a count")
    validate.set_defaults(func=run_validate)

    listing = actions.add_parser("list", help="table of tests, filtered",
                                 description="List tests with their groups, commands, "
                                 "priority and topologies. Without PATH: all built-in suites.")
    listing.add_argument("paths", nargs="*", metavar="PATH",
                         help="suite file, directory or built-in suite (default: all built-in)")
    listing.add_argument("--group", metavar="G", help="only tests whose tested-groups include G")
    listing.add_argument("--command", metavar="C",
                         help="only tests whose tested-commands include C (e.g. get, client|list)")
    listing.add_argument("--priority", metavar="A:B",
                         help="only tests with priority in A..B inclusive (A:, :B and A work)")
    listing.add_argument("--name", type=regex, metavar="REGEX", help="only tests whose name matches REGEX")
    listing.add_argument("--topology", metavar="T",
                         help="only tests that list redis-topology T (e.g. oss-standalone)")
    listing.set_defaults(func=run_list)


def _console(args: argparse.Namespace) -> Console:
    return getattr(args, "console", None) or terminal.console()


def _error_console(args: argparse.Namespace) -> Console:
    return getattr(args, "error_console", None) or terminal.console(stderr=True)


# -- validate ---------------------------------------------------------------------------------
@dataclass
class FileReport:
    path: Path
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def count(self, severity: str) -> int:
        return sum(1 for d in self.diagnostics if d.severity == severity)

    @property
    def status(self) -> str:
        if self.count("error"):
            return "error"
        return "warning" if self.count("warning") else "ok"


@dataclass
class ValidationReport:
    files: list[FileReport] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)  # YAML files that are not tests
    missing: list[SpecError] = field(default_factory=list)  # PATHs that do not exist

    @property
    def failed(self) -> bool:
        return bool(self.missing) or any(f.status == "error" for f in self.files)


def validate_paths(paths: list[str]) -> ValidationReport:
    """Load every test file under `paths`; fatal problems become error diagnostics."""
    report = ValidationReport()
    for item in paths:
        try:
            found = discover([item])
        except SpecError as exc:
            report.missing.append(exc)
            continue
        report.skipped.extend(found.skipped)
        for path in found.files:
            try:
                diagnostics = load_test(path).diagnostics
            except SpecError as exc:
                diagnostics = [Diagnostic(exc.path, exc.line, "error", exc.message)]
            report.files.append(FileReport(path, diagnostics))
    return report


def run_validate(args: argparse.Namespace) -> int:
    out = _console(args)
    report = validate_paths(args.paths)
    for exc in report.missing:
        out.print(Text(f"error: {exc}", style=SEVERITY_STYLES["error"]), soft_wrap=True)
    _print_diagnostics(out, report, show_ignored=getattr(args, "show_ignored", False))
    _print_summary(out, report)
    return 1 if report.failed else 0


def _print_diagnostics(out: Console, report: ValidationReport, show_ignored: bool) -> None:
    ignored: Counter[str] = Counter()
    for file in report.files:
        for diag in file.diagnostics:
            if diag.severity == "ignored" and not show_ignored:
                ignored[diag.message] += 1
                continue
            line = Text(f"{diag.location}: ")
            line.append(diag.severity, style=SEVERITY_STYLES[diag.severity])
            line.append(f": {diag.message}")
            out.print(line, soft_wrap=True)
    if ignored:
        table = Table(title="Ignored keys (not used by redline; --show-ignored lists each)",
                      title_justify="left")
        table.add_column("files", justify="right")
        table.add_column("key: why it is ignored")
        for message, count in sorted(ignored.items(), key=lambda kv: (-kv[1], kv[0])):
            table.add_row(str(count), Text(message))
        out.print(table)


def _print_summary(out: Console, report: ValidationReport) -> None:
    statuses = Counter(f.status for f in report.files)
    table = Table(title="Suite validation", title_justify="left")
    table.add_column("result")
    table.add_column("files", justify="right")
    table.add_column("diagnostics", justify="right")
    rows = [("ok", "ok", "green"), ("with warnings", "warning", "yellow"),
            ("with errors", "error", "bold red")]
    for label, status, style in rows:
        diags = sum(f.count(status) for f in report.files) if status != "ok" else 0
        table.add_row(Text(label, style=style), str(statuses.get(status, 0)),
                      str(diags) if status != "ok" else "")
    if report.skipped:
        table.add_row(Text("skipped (not tests)", style="dim"), str(len(report.skipped)), "")
    if report.missing:
        table.add_row(Text("missing paths", style="bold red"), str(len(report.missing)), "")
    table.add_row(Text("total test files", style="bold"), str(len(report.files)), "")
    out.print(table)


# -- list -------------------------------------------------------------------------------------
def run_list(args: argparse.Namespace) -> int:
    """Bad filters and missing paths are usage errors: one line on stderr (cli.py), exit 2."""
    out, err = _console(args), _error_console(args)
    try:
        priority = parse_priority_range(args.priority) if args.priority else None
    except ValueError as exc:
        raise UsageError(f"--priority: {exc}") from None
    items = list(args.paths) or builtin_suites()
    if not items:
        raise UsageError("no PATH given and no built-in suites installed")
    try:
        found = discover(items)
    except SpecError as exc:
        raise UsageError(str(exc)) from None
    tests: list[TestSpec] = []
    broken = 0
    for path in found.files:
        try:
            tests.append(load_test(path))
        except SpecError as exc:
            broken += 1
            err.print(Text(f"skipped: {exc}", style="yellow"), soft_wrap=True)
    try:
        chosen = select(tests, args.name, group=args.group, command=args.command,
                        priority=priority, topology=args.topology)
    except ValueError as exc:
        raise UsageError(f"--name: {exc}") from None
    out.print(_tests_table(chosen))
    summary = f"{len(chosen)} of {len(tests)} tests"
    if broken:
        summary += f" ({broken} files could not be read; see `redline suites validate`)"
    out.print(summary)
    return 1 if broken else 0


def _tests_table(tests: list[TestSpec]) -> Table:
    table = Table(title_justify="left")
    table.add_column("name", overflow="fold")
    table.add_column("group")
    table.add_column("commands", overflow="fold")
    table.add_column("priority", justify="right")
    table.add_column("topology", overflow="fold")
    for test in tests:
        table.add_row(Text(test.name), Text(", ".join(test.tested_groups)),
                      Text(", ".join(test.tested_commands)),
                      "" if test.priority is None else str(test.priority),
                      Text(", ".join(test.topologies)))
    return table
