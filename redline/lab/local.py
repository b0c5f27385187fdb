"""The composition root: the engine on this machine's real servers, and a job executed through it.

`local_engine` joins what the engine knows nothing of: the real test runners (timed:
redline.bench.server_runner; counted, the server under callgrind: redline.instructions.runner), each
built by `real_runner` with this machine's servers (redline.bench.servers) and redline-load
(redline.load.groups) as its collaborators, the store (always the first sink) and any other sinks
and observers. `execute_job` runs one job
(redline.engine.job) with compare's adaptive rule unless the caller brings its own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Collection, Sequence

from redline.analysis.comparison import compare_test, extra_runs_needed, looks_confidence
from redline.core.run import Run
from redline.engine.engine import Engine, MoreRuns
from redline.engine.job import Job, JobResolver
from redline.engine.run_plan import Observer
from redline.engine.sinks import ResultSink
from redline.system.pinning import available_cpus


def real_runner(test, topology, sides, settings, observer: Observer, workdir: Path, *, cpus: list[int],
                artifacts: Callable[[Run], Path]):
    """The test runner for `test` on this machine: timed, or counted (its servers under callgrind),
    with real servers on `cpus` and redline-load."""
    from redline.bench.server_runner import ServerRunner
    from redline.bench.servers import RealServers
    from redline.instructions.runner import InstructionsRunner
    from redline.load.groups import run_test_load
    runner = InstructionsRunner if settings.counts(test) else ServerRunner       # timed, or under callgrind
    servers = RealServers(test, topology, sides, settings, observer=observer, cpus=cpus, workdir=workdir,
                          under=runner.servers_under)
    return runner(test, topology, sides, settings, observer=observer, servers=servers, load=run_test_load,
                  workdir=workdir, artifacts=artifacts)


def local_engine(store, *, observers: Sequence[Observer] = (), sinks: Sequence[ResultSink] = (),
                 cpus: list[int] | None = None) -> Engine:
    """The engine on this machine's real servers, storing into `store` (first) and `sinks`; profiles
    are kept in the store's artifact directory."""
    cpus = cpus if cpus is not None else available_cpus()

    def runners(test, topology, sides, settings, observer, workdir):
        return real_runner(test, topology, sides, settings, observer, workdir, cpus=cpus,
                           artifacts=lambda run: store.artifact_dir(run.run_id))

    return Engine(runners=runners, sinks=[store, *sinks], observers=observers)


def compare_policy(job: Job, floors: dict, metrics: Collection[str] | None = None) -> MoreRuns | None:
    """The adaptive A/B rule of a compare job: extra runs per side while its verdicts are
    undecided and more runs can still decide them, up to `max_runs`
    (redline.analysis.comparison.extra_runs_needed); only the verdicts of
    `metrics` count when given (the catalogue gate decides a test on one metric)."""
    if not job.adaptive:
        return None
    runs = job.settings.get("runs", 1)
    confidence = looks_confidence(runs, job.max_runs)

    def more_runs(test, records, runs_so_far):
        key = records[-1].key if records else test.name
        comparisons = compare_test(key, [r for r in records if r.key == key], floors, confidence=confidence,
                                   runs_allowed=job.max_runs)
        return extra_runs_needed([c for c in comparisons if metrics is None or c.metric in metrics], runs_so_far,
                                 job.max_runs, lone_p_value=job.lone_p_value)
    return more_runs


def execute_job(job: Job, *, engine: Engine, session_id: int | None, resolver: JobResolver | None = None,
                floors: dict | None = None, position: tuple[int, int] = (1, 1),
                more_runs: MoreRuns | None = None) -> list[Run]:
    """Run one job with `engine`: every run goes to the engine's sinks and observers. `more_runs`
    replaces compare's adaptive rule (a bisection step decides on its own rule)."""
    resolver = resolver or JobResolver()
    test = resolver.test(job)
    sides = [resolver.side(spec) for spec in job.sides]
    return engine.execute_test(test, sides=sides, settings=job.run_settings(), session_id=session_id,
                               more_runs=more_runs or compare_policy(job, floors or {}), position=position)


def execute_jobs(jobs: list[Job], *, engine: Engine, session_id: int | None, resolver: JobResolver,
                 floors: dict | None = None,
                 lone_p_value: Callable[[list[Run]], float | None] | None = None) -> list[Run]:
    """Run `jobs` one after another. `lone_p_value(runs measured so far)`: the p a lone finding of
    the next adaptive job needs, asked as it starts (a compare grants more as its tests decide
    changes, redline.lab.compare.ComparePlan); else each job's own."""
    runs: list[Run] = []
    for number, job in enumerate(jobs, 1):
        if lone_p_value is not None and job.adaptive:
            job = replace(job, lone_p_value=lone_p_value(runs))
        runs += execute_job(job, engine=engine, session_id=session_id, resolver=resolver, floors=floors,
                            position=(number, len(jobs)))
    return runs

