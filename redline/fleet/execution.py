"""Where the fleet meets the engine: a job document in, the run documents out — the same
`execute_job` that `redline run`/`compare` use, on this machine's real servers.

Builds: each agent builds a git:/src: target into its own build cache (redline.builder, keyed by
commit and variant; the JobResolver keeps built targets for the agent's later jobs), see
docs/fleet.md "Builds".
"""

from __future__ import annotations

from redline.bisect.measure import step_more_runs
from redline.bisect.search import StepRule
from redline.core.errors import UsageError
from redline.engine.job import Job, JobResolver
from redline.engine.run_plan import Observer
from redline.fleet import profiles
from redline.lab.local import execute_job, local_engine
from redline.store.results import Store


class LogObserver(Observer):
    """The engine's events as the agent's log lines: one per run and per note (no progress bars)."""

    def __init__(self, say):
        self.say = say

    def test_skipped(self, test, reason: str) -> None:
        self.say("test skipped", test=test.name, reason=reason)

    def run_finished(self, run) -> None:
        self.say("run finished", test=run.test, side=run.side, run=run.run_index + 1, status=run.status,
                 ops_per_sec=run.metrics.get("ops_per_sec"))

    def note(self, text: str) -> None:
        self.say("note", text=text)


def step_rule_runs(job: Job):
    """A bisection step's extra-runs rule from its job's step rule (None: compare's adaptive rule):
    two more runs per side while the candidate's interval straddles its search's half-way point, up
    to the job's max_runs — as `redline bisect` measures a step on one machine."""
    if not job.step_rule:
        return None
    rule = StepRule.from_json(job.step_rule)
    runs = job.settings.get("runs", 1)
    return step_more_runs(rule, job.step_rule["metric"], {}, runs=runs, max_runs=job.max_runs or runs)


class JobRefused(Exception):
    """The job cannot run here at all: its document, suite, test or target is not understood."""


class Executor:
    """Runs an agent's jobs; built targets and loaded suites are kept for its later jobs."""

    def __init__(self, store: Store, observer: Observer):
        self.store, self.observer = store, observer
        self.resolver = JobResolver()

    def execute(self, document: dict, *, session_id: int) -> list[dict]:
        try:
            job = Job.from_json(document)
        except (ValueError, TypeError, KeyError) as exc:
            raise JobRefused(f"not a job document: {exc}") from exc
        try:
            runs = execute_job(job, engine=local_engine(self.store, observers=[self.observer]),
                               session_id=session_id, resolver=self.resolver, more_runs=step_rule_runs(job))
        except UsageError as exc:
            raise JobRefused(str(exc)) from exc
        return [profiles.shipped(run) for run in runs]
