"""The tests an entry is measured on: its catalogue suites, and for an entry with a `command:` a
suite made from that memtier command line and the entry's structured `prepare:` (the catalogue
suite whose preparation it borrows, or its own init commands, init script or preload). The suite
is written into the run's work directory and read back by redline's suite loader, so it is
checked like any suite. What cannot run here is refused with the reason, never guessed:
another tool's command line, an abbreviated one (`...`), a dataset given only in prose, a
topology redline cannot deploy."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from redline.accuracy.corpus import Entry
from redline.core.errors import UsageError
from redline.suites import SpecError, TestSpec, load_test, parse_client_arguments
from redline.topology import DEFAULT_TOPOLOGY, parse_topology

MEMTIER = "memtier_benchmark"


@dataclass
class Workload:
    """What an entry is measured on, or why it cannot be measured here."""

    tests: list[TestSpec] = field(default_factory=list)
    topology: str = DEFAULT_TOPOLOGY
    refused: str | None = None               # the entry cannot run here, and why
    notes: list[str] = field(default_factory=list)   # parts left out (a command beside runnable suites)


def topology_of(entry: Entry) -> str:
    return entry.topology or DEFAULT_TOPOLOGY


def workload_of(entry: Entry, catalogue: Path, workdir: Path) -> Workload:
    """The entry's tests: its suites from `catalogue`, and the suite made from its command (written
    in `workdir`). A part that cannot run is refused with the reason."""
    workload = Workload(topology=topology_of(entry))
    try:
        parse_topology(workload.topology)
    except UsageError as exc:
        workload.refused = f"topology {workload.topology!r}: {exc}"
        return workload
    problems = []
    for name in entry.suite_names:
        test, problem = _load(catalogue / f"{name}.yml")
        if test:
            workload.tests.append(test)
        else:
            problems.append(problem)
    if entry.command:
        path, why = command_suite(entry, catalogue, workdir)
        test, problem = _load(path) if path else (None, why)
        if test:
            workload.tests.append(test)
        elif workload.tests:
            workload.notes.append(f"its command is not measured: {problem}")
        else:
            problems.append(problem)
    if not workload.tests:
        workload.refused = "; ".join(problems) or "no test to measure"
    else:
        workload.notes += problems
    return workload


def _load(path: Path) -> tuple[TestSpec | None, str | None]:
    try:
        test = load_test(path)
    except SpecError as exc:
        return None, str(exc)
    errors = [d for d in test.diagnostics if d.severity == "error"]
    if errors:
        return None, f"{errors[0].path}:{errors[0].line}: {errors[0].message} (suite {test.name})"
    return test, None


def command_suite(entry: Entry, catalogue: Path, workdir: Path) -> tuple[Path | None, str | None]:
    """(the suite file made from the entry's command, None) or (None, why it cannot be made)."""
    try:
        argv = shlex.split(entry.command)
    except ValueError as exc:
        return None, f"the command line cannot be split ({exc})"
    if not argv or Path(argv[0]).name != MEMTIER:
        tool = argv[0] if argv else "nothing"
        return None, f"the command runs {tool}, not {MEMTIER}: no suite can hold it"
    if any(arg == "..." or " ... " in f" {arg} " for arg in argv):
        return None, "the command line is abbreviated (`...`): the arguments it stands for are not written out"
    prepare = entry.prepare
    if prepare is None:
        return None, (f"its dataset is described only in prose ({entry.dataset or 'none given'}); "
                      "`prepare:` says how to make it")
    suite = {
        "version": 0.4,
        "name": f"accuracy-{entry.name}",
        "description": f"made by `redline accuracy` from the command of entry {entry.name} of "
                       f"{entry.path.name}; dataset: {entry.dataset or 'an empty server'}",
        "dbconfig": _dbconfig(prepare, catalogue),
        "tested-commands": sorted({command[0].lower() for command in parse_client_arguments(argv[1:]).commands
                                   if command}),
        "redis-topologies": [topology_of(entry)],
        "clientconfig": {"tool": MEMTIER, "arguments": shlex.join(argv[1:])},
    }
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"accuracy-{entry.name}.yml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False, width=120))
    return path, None


def _dbconfig(prepare, catalogue: Path) -> dict:
    if prepare == "empty":
        return {"configuration-parameters": {"save": '""'}, "check": {"keyspacelen": 0}}
    if prepare.get("from_suite"):
        borrowed = yaml.safe_load((catalogue / f"{prepare['from_suite']}.yml").read_text())
        db = dict(borrowed.get("dbconfig") or {})
    else:
        db = {"configuration-parameters": {"save": '""'}}
        if prepare.get("init_commands"):
            db["init_commands"] = prepare["init_commands"]
        if prepare.get("init_lua"):
            db["init_lua"] = prepare["init_lua"]
        if prepare.get("preload"):
            arguments = prepare["preload"]
            if arguments.startswith(MEMTIER):
                arguments = arguments[len(MEMTIER):].strip()
            db["preload_tool"] = {"tool": MEMTIER, "arguments": arguments}
    if "keyspacelen" in prepare:
        db["check"] = {"keyspacelen": prepare["keyspacelen"]}
    return db
