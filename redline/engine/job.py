"""A job is data: one test on one topology, its sides and run settings, as JSON.

It is the unit of work a fleet agent receives, and what `redline run`, `compare` and `calibrate`
build and execute locally through the same path (`redline.lab.local.execute_job`). A job names everything by text
that resolves on the machine that executes it: the suite file (`builtin:<suite>/<file>` for the
suites shipped with redline), the test's name, each side's target spec and server configuration.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from redline.core.errors import UsageError
from redline.engine.run_plan import RunSettings, Side
from redline.server.targets import Target, ensure_built, parse_target
from redline.suites import SpecError, TestSpec, builtin_suites_dir, load_test
from redline.topology import parse_topology

JOB_FORMAT = 1
BUILTIN = "builtin:"
# The RunSettings a job carries (its topology is the job's own).
SETTINGS = ("runs", "duration_s", "warmup_s", "scale", "profile", "duet", "snapshots", "measure", "window_instructions",
            "window_requests", "earlier_window_requests", "system_calls_judged")


def suite_reference(path: Path) -> str:
    """How a job names a suite file: relative to redline's built-in suites when it is one of
    them (so it resolves on any machine with redline), else its absolute path."""
    resolved, builtin = path.resolve(), builtin_suites_dir()
    if resolved.is_relative_to(builtin):
        return BUILTIN + resolved.relative_to(builtin).as_posix()
    return str(resolved)


def suite_path(reference: str) -> Path:
    if reference.startswith(BUILTIN):
        return builtin_suites_dir() / reference[len(BUILTIN):]
    return Path(reference)


@dataclass(frozen=True)
class SideSpec:
    """One side of a job as text: the target spec, its server configuration, its build variant."""

    name: str | None                     # None for a plain run, 'baseline'/'comparison' in an A/B
    target: str                          # bin:PATH, git:REPO@REF, src:DIR, tcp://HOST:PORT
    config: tuple[tuple[str, str], ...] = ()
    variant: str | None = None

    @classmethod
    def of(cls, side: Side) -> SideSpec:
        return cls(side.name, side.target.spec, tuple(sorted(side.target.config.items())), side.target.variant)

    def to_json(self) -> dict:
        return {"name": self.name, "target": self.target, "config": dict(self.config), "variant": self.variant}

    @classmethod
    def from_json(cls, document: dict) -> SideSpec:
        return cls(document.get("name"), document["target"], tuple(sorted((document.get("config") or {}).items())),
                   document.get("variant"))


@dataclass
class Job:
    suite: str
    test: str
    sides: list[SideSpec]
    topology: str = "oss-standalone"
    settings: dict = field(default_factory=dict)      # RunSettings fields named in SETTINGS
    max_runs: int | None = None          # compare: extra runs per side while undecided, up to this
    lone_p_value: float | None = None    # compare: the p a lone finding needs to survive the session's FDR
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    step_rule: dict | None = None        # a bisection step: when its runs are enough (redline.bisect.search.StepRule + metric)

    @property
    def adaptive(self) -> bool:
        return self.max_runs is not None and self.max_runs > self.settings.get("runs", 1)

    def run_settings(self) -> RunSettings:
        return RunSettings(**{name: self.settings[name] for name in SETTINGS if name in self.settings},
                           topologies=(parse_topology(self.topology),))

    def to_json(self) -> dict:
        document = asdict(self)
        document["sides"] = [side.to_json() for side in self.sides]
        if document["step_rule"] is None:        # only a bisection step carries one
            del document["step_rule"]
        return {"format": JOB_FORMAT, **document}

    @classmethod
    def from_json(cls, document: dict) -> Job:
        if document.get("format") != JOB_FORMAT:
            raise ValueError(f"job format {document.get('format')!r}: this redline reads format {JOB_FORMAT}")
        fields = {k: v for k, v in document.items() if k != "format"}
        fields["sides"] = [SideSpec.from_json(side) for side in fields.get("sides") or []]
        return cls(**fields)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)


def jobs_for(tests: list[TestSpec], sides: list[Side], settings: RunSettings, *, max_runs: int | None = None,
             lone_p_value: float | None = None) -> list[Job]:
    """Every test × topology of a session as jobs, in the order they run."""
    carried = {name: getattr(settings, name) for name in SETTINGS}
    specs = [SideSpec.of(side) for side in sides]
    return [Job(suite=suite_reference(test.path), test=test.name, sides=specs, topology=topology.name,
                settings=dict(carried), max_runs=max_runs, lone_p_value=lone_p_value)
            for test in tests for topology in settings.topologies]


class JobResolver:
    """Turns a job's text into a test and ready sides on this machine, once per suite file and
    side (a session's jobs share them; a fleet agent's jobs reuse built targets)."""

    def __init__(self, *, tests: list[TestSpec] = (), sides: list[Side] = (), progress=None):
        self.tests = {(suite_reference(t.path), t.name): t for t in tests}
        self.sides = {SideSpec.of(side): side for side in sides}
        self.progress = progress

    def test(self, job: Job) -> TestSpec:
        key = (job.suite, job.test)
        if key not in self.tests:
            try:
                test = load_test(suite_path(job.suite))
            except SpecError as exc:
                raise UsageError(str(exc)) from exc
            if test.name != job.test:
                raise UsageError(f"{job.suite} holds test {test.name!r}, not {job.test!r}")
            self.tests[key] = test
        return self.tests[key]

    def side(self, spec: SideSpec) -> Side:
        if spec not in self.sides:
            target: Target = parse_target(spec.target, dict(spec.config), spec.variant)
            if target.build is not None and target.binary is None:
                target = ensure_built(target, progress=self.progress)
            self.sides[spec] = Side(target, spec.name)
        return self.sides[spec]
