"""A bisection as a store session: the session opened (kind `bisect`), the comparer the settings ask
for, the search run with its document (`bisection`) saved after every step, the session closed
whatever happens. `redline bisect` and the accuracy runner's range entries both run through here."""

from __future__ import annotations

import sys
from collections.abc import Callable

from redline.bisect import search
from redline.bisect.measure import CommitBuilds, Measuring, StepSettings, comparer_for
from redline.bisect.search import Commit, Outcome, Unbuildable
from redline.core.errors import RunError
from redline.output.progress import ConsoleObserver, print_plan
from redline.store.results import Store
from redline.suites import TestSpec
from redline.system import machine
from redline.system.workdirs import remove_abandoned_workdirs


def run_bisection(store: Store, *, repo, good: Commit, path: list[Commit], tests: list[TestSpec],
                  settings: StepSettings, variant: str | None, context: dict, plan_line: str, console,
                  argv: list[str] | None = None, profile: bool = False, each_step: bool = False,
                  on_session: Callable[[int], None] = lambda session_id: None) -> tuple[int, Outcome, dict]:
    """Bisect `path` (after `good`) on `tests` into a new session of `store`: (session id, outcome,
    the stored bisection document: `context`, the session and the outcome). An endpoint that does
    not build is a RunError with its build log's tail."""
    remove_abandoned_workdirs()
    session_id = store.begin_session(kind="bisect", argv=list(sys.argv if argv is None else argv),
                                     machine=machine.facts())
    on_session(session_id)
    context = {**context, "session": session_id}
    observer = ConsoleObserver(console)
    status = "interrupted"
    try:
        print_plan(console, plan_line, [], settings.runs.topologies)
        comparer = comparer_for(builds=CommitBuilds(repo=repo, variant=variant, observer=observer), tests=tests,
                                settings=settings, measuring=Measuring(store, session_id, observer))

        def save(outcome: Outcome) -> None:
            store.save_session_document(session_id, "bisection", {**context, **outcome.as_json()})

        try:
            outcome = search.bisect(comparer, good, path, [t.name for t in tests],
                                    progress=lambda line: console.print(line, style="bold"), on_step=save,
                                    profile=profile, each_step=each_step)
        except Unbuildable as failure:           # an endpoint does not build: nothing to bisect against
            raise RunError(f"{failure}: an endpoint must build; its build log ends:\n" + "\n".join(failure.tail)) from None
        save(outcome)
        status = "finished"
    finally:
        observer.close()
        store.finish_session(session_id, status)
    return session_id, outcome, {**context, **outcome.as_json()}
