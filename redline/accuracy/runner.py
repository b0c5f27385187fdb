"""The accuracy runner: each selected entry measured the way the plan says, through redline's own
compare (redline.lab.compare over redline.lab.session: both commits built through the build cache,
interleaved runs, verdicts after false-discovery control) or, for a range, redline's bisection
(redline.bisect.session), into one store; then the table.

Every measurement is a session of the store (kind `compare` or `bisect`) that carries a document
named `accuracy`: the entry, the way it was measured, its resume key (redline.accuracy.plan), and
per test the verdict on the decision metric with its interval (for a range: the endpoints, the
culprit and the culprit's own change). A later run skips every entry × way whose key has a
measured document, so an interrupted or partial run resumes where it stopped, and an edited entry
is measured again. A measurement that failed (a build, runs that failed) is stored as failed and
tried again next time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from redline import datasets
from redline.accuracy import plan as planning
from redline.accuracy.corpus import Corpus, Entry
from redline.accuracy.history import Repository
from redline.accuracy.scoring import FAILED, MEASURED, Row, row_for
from redline.accuracy.workloads import Workload, workload_of
from redline.analysis.comparison import BASELINE, COMPARISON, TestComparison
from redline.analysis.stats import Verdict
from redline.core.errors import RunError, UsageError
from redline.core.metrics import INSTRUCTIONS, TIME
from redline.core.run import Run
from redline.engine.run_plan import RunSettings, Side
from redline.store.results import Store
from redline.suites import TestSpec
from redline.system import machine
from redline.topology import parse_topology

DOCUMENT = "accuracy"          # the name of the measurement document on its session
FORMAT = 1


@dataclass
class Job:
    """One entry measured one way."""

    entry: Entry
    kind: str                       # counted | timed
    primary: bool
    workload: Workload
    metric: str
    variant: str
    key: str
    refused: str | None = None

    @property
    def tests(self) -> list[TestSpec]:
        return self.workload.tests


@dataclass
class Measured:
    """What a measurer gives back: the session it stored, per test the decision metric's result,
    and for a range the bisection's summary."""

    session: int
    tests: dict[str, dict]
    bisection: dict | None = None
    notes: list[str] = field(default_factory=list)


class Measurer(Protocol):
    def measure(self, job: Job, *, on_session) -> Measured:
        """Measure the job into a new session of the store (`on_session(id)` as soon as it exists).
        Raises RunError (a commit that does not build) or UsageError (a server configuration the
        binary does not know) when it cannot."""
        ...


# -- planning -------------------------------------------------------------------------------------
def jobs_of(entry: Entry, workload: Workload, settings: planning.Settings, *,
            with_kinds: set[str] = frozenset()) -> list[Job]:
    """The entry's jobs: the ways `settings.measure` asks for, its primary way, and `with_kinds`."""
    wanted = set(with_kinds)
    why_not: dict[str, str | None] = {}
    if workload.refused:
        primary = planning.COUNTED if entry.countable else planning.TIMED
    else:
        primary = planning.primary_kind(entry, workload.topology)
        wanted |= set(planning.kinds(entry, workload.topology, settings.measure))
        why_not = planning.kinds(entry, workload.topology, planning.BOTH)
    texts = [Path(test.path).read_text() for test in workload.tests]
    generated = any(test.db.dataset_name and datasets.lookup(test.db.dataset_name) for test in workload.tests)
    jobs = []
    for kind in (planning.COUNTED, planning.TIMED):
        if kind not in wanted | {primary}:
            continue
        refused = workload.refused or why_not.get(kind)
        if not refused and entry.ranged and entry.config:
            refused = "server configuration on a range: a bisection builds and runs each commit as it is"
        key = planning.resume_key(entry, kind, settings, texts, generated=generated)
        jobs.append(Job(entry, kind, kind == primary, workload, planning.metric_of(entry, kind),
                        planning.variant_of(entry, settings), key, refused))
    return jobs


def stored_documents(store: Store) -> dict[str, dict]:
    """The latest measurement document of every resume key (measured or failed)."""
    return {document["key"]: {**document, "session": session} for session, document in store.documents_named(DOCUMENT)
            if document.get("format") == FORMAT and document.get("key")}


# -- measuring ------------------------------------------------------------------------------------
def measure(jobs: list[Job], *, store: Store, measurer: Measurer, say=print, again: bool = False) -> dict[str, dict]:
    """Every job not refused and not measured before (by its key; with `again`, measured before
    too: after a fix in redline), one after another; each measurement's document saved on its
    session. Returns the documents written, by key."""
    written = {}
    for number, job in enumerate(jobs, 1):
        label = f"[{number}/{len(jobs)}] {job.entry.name} ({job.kind})"
        if job.refused:
            say(f"{label}: not run here: {job.refused}")
            continue
        earlier = stored_documents(store).get(job.key)      # read now: another run may share the store
        if earlier and earlier.get("status") == MEASURED and not again:
            say(f"{label}: measured before (session {earlier['session']}), skipped")
            continue
        say(f"{label}: measuring on {', '.join(t.name for t in job.tests)}")
        started = {"session": None}

        def on_session(session_id: int) -> None:
            started["session"] = session_id

        document = _document(job)
        try:
            measured = measurer.measure(job, on_session=on_session)
        except (RunError, UsageError) as exc:      # this entry cannot be measured (a build, its configuration)
            document.update(status=FAILED, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            say(f"{label}: failed: {document['error']}")
            if started["session"] is not None:
                store.save_session_document(started["session"], DOCUMENT, document)
            written[job.key] = document
            continue
        measured_any = any(t.get("delta_pct") is not None or t.get("skipped") for t in measured.tests.values())
        document.update(session=measured.session, tests=measured.tests, bisection=measured.bisection,
                        notes=job.workload.notes + measured.notes, status=MEASURED if measured_any else FAILED,
                        error=None if measured_any else _no_result(measured.tests))
        store.save_session_document(measured.session, DOCUMENT, document)
        written[job.key] = document
        say(f"{label}: {_said(job, document)}")
    return written


def _document(job: Job) -> dict:
    return {"format": FORMAT, "entry": job.entry.name, "kind": job.kind, "key": job.key, "metric": job.metric,
            "variant": job.variant, "topology": job.workload.topology, "measured_at": time.time(),
            "machine": machine.facts(),
            "status": None, "tests": {}, "bisection": None, "notes": list(job.workload.notes), "error": None}


def _no_result(tests: dict) -> str:
    notes = [t.get("note") for t in tests.values() if t.get("note")]
    return "no test gave a result" + (f": {notes[0]}" if notes else "")


def _said(job: Job, document: dict) -> str:
    if document["status"] != MEASURED:
        return f"failed: {document['error']}"
    parts = [f"{test} {t['verdict']} {t['delta_pct']:+.2f}%" if t.get("delta_pct") is not None
             else f"{test} {t.get('skipped') or t.get('note') or t.get('verdict')}" for test, t in document["tests"].items()]
    culprit = (document.get("bisection") or {}).get("culprit")
    return "; ".join(parts) + (f"; culprit {culprit[:12]}" if culprit else "")


# -- the table's rows -----------------------------------------------------------------------------
def rows(corpus_jobs: list[tuple[Entry, list[Job]]], documents: dict[str, dict]) -> list[Row]:
    """One row per entry and way of measuring, in corpus order: refused, pending, failed or measured."""
    out = []
    for entry, jobs in corpus_jobs:
        for job in jobs:
            document = documents.get(job.key)
            out.append(row_for(entry, job.kind, primary=job.primary, document=document, refused=job.refused,
                               pending=_pending_reason(entry, documents)))
    return out


def _pending_reason(entry: Entry, documents: dict[str, dict]) -> str:
    earlier = [d for d in documents.values() if d.get("entry") == entry.name]
    return "measured before, but the entry, its suites or the settings changed since" if earlier else "not measured yet"


# -- summaries of what was measured (shared by the real measurer and its tests) --------------------
def test_results(comparisons: list[TestComparison], records: list[Run], metric: str) -> dict[str, dict]:
    """Per test (and topology): the decision metric's verdict and interval, every compared
    metric's verdict of change, or why it was not measured (skipped)."""
    out: dict[str, dict] = {}
    for record in records:
        if record.purpose == "measure" and record.status == "skipped":
            out.setdefault(record.key, {"skipped": record.error or "skipped"})
    for c in comparisons:
        entry = out.setdefault(c.test, {})
        if c.metric == metric:
            entry.pop("skipped", None)
            result = c.result
            entry.update(verdict=c.verdict,
                         note=c.note or c.state_refusal or c.withheld or (result.futility_note if result else None),
                         delta_pct=result.delta_pct if result else None,
                         ci_low_pct=result.ci_low_pct if result else None,
                         ci_high_pct=result.ci_high_pct if result else None,
                         tau_pct=result.tau_pct if result else None,
                         min_detectable_pct=result.min_detectable_pct if result else None,
                         baseline_median=result.baseline_median if result else None,
                         comparison_median=result.comparison_median if result else None,
                         runs=result.n_comparison if result else 0)
        if c.verdict in (Verdict.IMPROVEMENT, Verdict.REGRESSION):
            entry.setdefault("changes", {})[c.metric] = c.verdict
    return out


def change_result(change) -> dict:
    """A bisection's Change (redline.bisect.search) as a test result."""
    return {"verdict": change.verdict, "note": change.note, "delta_pct": change.delta_pct,
            "ci_low_pct": change.ci_low_pct, "ci_high_pct": change.ci_high_pct,
            "min_detectable_pct": change.min_detectable_pct, "runs": change.runs,
            **({"changes": {"decision": change.verdict}} if change.verdict in (Verdict.IMPROVEMENT, Verdict.REGRESSION)
               else {})}


def bisection_summary(outcome) -> tuple[dict[str, dict], dict]:
    """The endpoints' results per test, and what the bisection named (redline.bisect.search.Outcome)."""
    tests = {test: change_result(change) for test, change in outcome.endpoints.changes.items()}
    remainder = outcome.remainder
    summary = {"culprit": outcome.culprit.sha if outcome.culprit else None,
               "culprit_subject": outcome.culprit.subject if outcome.culprit else None,
               "candidates": [c.sha for c in outcome.candidates], "no_change": outcome.no_change,
               "moved": outcome.endpoints.moved, "too_close": outcome.endpoints.too_close,
               "steps": len(outcome.steps),
               "culprit_change": {test: change_result(c) for test, c in remainder.changes.items()} if remainder else {},
               "explained": remainder.explained if remainder else {},
               "explained_at_most": remainder.explained_at_most if remainder else {}}
    return tests, summary


class LabMeasurer:
    """Measurer on this machine: builds through the build cache, real servers, the store."""

    def __init__(self, *, repository: Repository, store_path: Path, settings: planning.Settings, console,
                 argv: list[str]):
        self.repository, self.store_path, self.settings = repository, Path(store_path), settings
        self.console, self.argv = console, argv

    def run_settings(self, job: Job) -> RunSettings:
        counted = job.kind == planning.COUNTED
        s = self.settings
        return RunSettings(runs=s.counted_runs if counted else s.timed_runs,
                           duration_s=None if counted else s.duration_s, warmup_s=s.warmup_s, scale=s.scale,
                           topologies=(parse_topology(job.workload.topology),),
                           measure=INSTRUCTIONS if counted else TIME,
                           window_instructions=s.window_instructions if counted else None)

    def measure(self, job: Job, *, on_session) -> Measured:
        return self._bisect(job, on_session) if job.entry.ranged else self._compare(job, on_session)

    def _compare(self, job: Job, on_session) -> Measured:
        from redline.lab.compare import compare_plan, session_verdicts
        from redline.lab.session import execute_session, target_from
        entry = job.entry
        pairs = [f"{name}={value}" for name, value in (entry.config or {}).items()]
        flag = f"{entry.where} config"
        sides = [Side(target_from(f"git:{self.repository.path}@{sha}", pairs, flag, job.variant), name)
                 for sha, name in ((entry.parent, BASELINE), (entry.commit, COMPARISON))]
        settings = self.run_settings(job)
        floors = Store(self.store_path).noise_floors()
        max_runs = settings.runs if job.kind == planning.COUNTED else self.settings.timed_max_runs
        plan = compare_plan(sides, job.tests, settings, max_runs=max_runs, floors=floors)
        session = execute_session(plan, store_path=self.store_path,
                                  argv=[*self.argv, f"--entry={entry.name}", f"--way={job.kind}"])
        on_session(session.session_id)
        comparisons = session_verdicts(session, plan)
        session.close()
        return Measured(session.session_id, test_results(comparisons, session.records, job.metric))

    def _bisect(self, job: Job, on_session) -> Measured:
        from redline.bisect import search
        from redline.bisect.measure import StepSettings
        from redline.bisect.session import run_bisection
        entry = job.entry
        repo = self.repository.path
        good, path = search.ancestry_path(repo, entry.good, entry.bad)
        store = Store(self.store_path)
        runs = self.run_settings(job)
        counted = job.kind == planning.COUNTED
        settings = StepSettings(runs=runs, metric=job.metric, noise_floors=store.noise_floors(),
                                max_runs=runs.runs if counted else self.settings.timed_max_runs)
        context = {"repository": str(repo), "metric": job.metric, "variant": job.variant,
                   "tests": [t.name for t in job.tests], "selection": [f"accuracy entry {entry.name}"],
                   "store": str(self.store_path), "all_parents": False, "good_ref": entry.good, "bad_ref": entry.bad,
                   "measure": runs.measure}
        line = (f"accuracy {entry.name}: bisect {len(path)} commits after {good.short} on {len(job.tests)} tests, "
                f"{job.kind}, deciding on {job.metric}")
        session_id, outcome, _ = run_bisection(store, repo=repo, good=good, path=path, tests=job.tests,
                                               settings=settings, variant=job.variant, context=context, plan_line=line,
                                               console=self.console,
                                               argv=[*self.argv, f"--entry={entry.name}", f"--way={job.kind}"],
                                               on_session=on_session)
        tests, summary = bisection_summary(outcome)
        return Measured(session_id, tests, summary)


def plan_corpus(corpus: Corpus, entries: list[Entry], settings: planning.Settings, *, catalogue: Path, workdir: Path,
                documents: dict[str, dict]) -> list[tuple[Entry, list[Job]]]:
    """Every entry's jobs (for `entries`, the ways asked for; for the others, the primary way),
    with the ways measured before kept as rows."""
    chosen = {entry.name for entry in entries}
    stored_kinds: dict[str, set[str]] = {}
    for document in documents.values():
        stored_kinds.setdefault(document.get("entry"), set()).add(document.get("kind"))
    planned = []
    for entry in corpus.entries:
        workload = workload_of(entry, catalogue, workdir)
        asked = settings if entry.name in chosen else planning.Settings(**{**planning.settings_json(settings),
                                                                           "measure": planning.AUTO})
        jobs = jobs_of(entry, workload, asked, with_kinds=stored_kinds.get(entry.name, set()))
        planned.append((entry, jobs))
    return planned
