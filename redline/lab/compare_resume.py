"""Resuming an interrupted compare (`redline compare --resume SESSION`).

A compare of a large suite at its defaults (7 to 15 interleaved runs per side of each test's own
--test-time) can outlast the time a person or a machine has for it. A resumed compare is a new
session that measures what the earlier one left unfinished, with the earlier one's arguments,
and judges every test — false-discovery control over all of them, as one compare would.

What is carried over: the runs of each test whose job ended in the earlier session (every run ok
or skipped, none interrupted, and compare's adaptive rule asking for no more runs, given the
changes decided by the other tests that ended: `ended_runs`). A test that was interrupted, failed, or
never reached is measured again, whole. Carried runs must come from the same binaries the sides
resolve to now (sha256 of the executable, or for a built target the same build: source commit,
variant and compiler, since a rebuild on another machine differs by Redis' build id), else the
resume is refused.

The resumed session stores a `resume` document (the session it resumes, the arguments it took
over, the uids of the carried runs): its session document holds the carried runs beside its own,
so a report, `show`, or a further resume sees the whole compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redline.core import terminal
from redline.core.errors import UsageError
from redline.core.run import Run
from redline.engine.job import jobs_for
from redline.engine.run_plan import Side
from redline.lab.local import compare_policy
from redline.lab.session import SessionPlan, ready_sides
from redline.output.progress import ConsoleObserver
from redline.server.identity import binary_digest
from redline.store.session import SessionDocument

RESUME_DOCUMENT = "resume"
# What the resumed command may still say: where results go, not what is measured.
OUTPUT_DESTINATIONS = ("store", "json", "jsonl", "html", "markdown", "fail_on_regression", "export", "github_org",
                       "github_repo", "triggering_env", "platform", "branch")


@dataclass
class EarlierCompare:
    """The compare a resume continues: its session, the arguments it was started with (those of
    the first session of a chain of resumes), and its runs (its own and those it carried)."""

    session_id: int
    argv: list[str]
    runs: list[Run] = field(default_factory=list)


def earlier_compare(store, which: int | str) -> EarlierCompare:
    """The stored compare `which` (a number or 'latest'); a UsageError when it is not one that can
    be resumed."""
    number = store.latest_session("compare") if which == "latest" else which
    if number is None:
        raise UsageError(f"--resume latest: {store.path} holds no compare session")
    document: SessionDocument = store.load_session(number)
    if document.kind != "compare":
        raise UsageError(f"--resume {number}: session {number} of {store.path} is a {document.kind}, not a compare")
    if document.status == "running":
        raise UsageError(f"--resume {number}: session {number} is still running (another redline holds it)")
    resumed = document.documents.get(RESUME_DOCUMENT)
    argv = command_arguments(resumed.get("argv") if isinstance(resumed, dict) else document.argv)
    return EarlierCompare(number, argv, document.runs)


def command_arguments(argv) -> list[str]:
    """The redline arguments of a stored argv (its program, whatever it was called, left out); the
    store is not trusted to hold a list of words."""
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv) or "compare" not in argv:
        raise UsageError(f"the stored command line {str(argv)[:200]!r} is not a compare's")
    return argv[argv.index("compare"):]


def refuse_measurement_flags(args, defaults) -> None:
    """--resume takes the earlier compare's suites, targets and settings: a command that also gives
    any of them is refused, naming them (the outputs and the store may differ)."""
    given = sorted(name for name, value in vars(args).items()
                   if name not in OUTPUT_DESTINATIONS + ("resume", "func", "command")
                   and hasattr(defaults, name) and getattr(defaults, name) != value)
    if given:
        flags = ", ".join("SUITE" if name == "suites" else "--" + name.replace("_", "-") for name in given)
        raise UsageError(f"--resume continues the stored compare with its own suites, targets and settings; "
                         f"give no {flags} with it")


def with_outputs_of(earlier_args, args):
    """The earlier compare's arguments, with this command's store and outputs."""
    for name in OUTPUT_DESTINATIONS:
        if hasattr(args, name):
            setattr(earlier_args, name, getattr(args, name))
    earlier_args.resume = args.resume
    return earlier_args


def carry_ended_tests(plan: SessionPlan, earlier: EarlierCompare) -> None:
    """Turn `plan` (every test of the earlier compare) into its resumption: the sides made ready,
    the tests that ended earlier carried (their runs judged with the new ones), the rest to measure,
    and the `resume` document stored with the session. The plan's p a lone finding needs stays that
    of every test."""
    observer = ConsoleObserver(terminal.console(stderr=True))
    try:
        plan.sides = ready_sides(plan.sides, observer)
    finally:
        observer.close()
    plan.carried = ended_runs(earlier, plan)
    done = {run.test for run in plan.carried}
    terminal.console(stderr=True).print(
        f"resuming compare {earlier.session_id}: {len(done)} of {len(plan.tests)} tests ended there and are not "
        f"measured again ({len(plan.carried)} runs carried)")
    plan.tests = [test for test in plan.tests if test.name not in done]
    plan.documents = {RESUME_DOCUMENT: {"resumes": earlier.session_id, "argv": earlier.argv,
                                        "carried": [run.uid for run in plan.carried]}}


def ended_runs(earlier: EarlierCompare, plan: SessionPlan) -> list[Run]:
    """The runs of every test whose job ended in the earlier compare (all of its topologies): the
    runs a resumed compare carries instead of measuring again. Carried runs must have measured the
    binaries the plan's (ready) sides are now.

    A job ended when compare's adaptive rule asks no more of its runs with the p a lone finding
    needs given the tests found ended (`plan.lone_p_value_for`: a compare grants more as changes
    are decided, so a test that stopped once its change would survive the session's control is
    found ended once the tests that granted it that are). That room only grows as tests are
    found ended, so this looks again until no more are: every change it carries survives the
    final control whatever the tests measured again turn out to be."""
    by_key: dict[tuple[str, str], list[Run]] = {}
    for run in earlier.runs:
        by_key.setdefault((run.test, run.topology), []).append(run)
    carried: list[Run] = []
    room = plan.lone_p_value_for(carried)
    waiting = list(plan.tests)
    while waiting:
        ended = []
        for test in waiting:
            jobs = jobs_for([test], plan.sides, plan.settings, max_runs=plan.max_runs, lone_p_value=room)
            groups = [by_key.get((test.name, job.topology), []) for job in jobs]
            if all(_job_ended(job, runs, plan) for job, runs in zip(jobs, groups)):
                carried += [run for runs in groups for run in runs]
                room = plan.lone_p_value_for(carried)
                ended.append(test.name)
        if not ended:
            break
        waiting = [test for test in waiting if test.name not in ended]
    _check_same_binaries(carried, plan.sides, earlier.session_id)
    return carried


def _job_ended(job, runs: list[Run], plan: SessionPlan) -> bool:
    if not runs or any(run.status not in ("ok", "skipped") for run in runs):
        return False
    if any(run.status == "skipped" for run in runs):
        return True                               # a side cannot run it: the skip is the result
    measured = [run for run in runs if run.purpose == "measure"]
    per_side = min(sum(1 for run in measured if run.side == side.name) for side in plan.sides)
    if per_side < plan.settings.runs:
        return False
    if plan.settings.profile and sum(1 for run in runs if run.purpose == "profile") < len(plan.sides):
        return False
    rule = compare_policy(job, plan.floors)
    return rule is None or rule(None, measured, per_side) == 0


def _check_same_binaries(carried: list[Run], sides: list[Side], session_id: int) -> None:
    """Carried runs measured the binaries the sides are now: the same executable (sha256), or one
    built again from the same build (source commit, variant, compiler: the build cache key), as on
    another machine, where Redis' mkreleasehdr.sh writes the host and the time into every build."""
    for side in sides:
        if side.target.binary is None:             # tcp://: nothing redline runs, nothing to check
            continue
        now = binary_digest(side.target.binary)
        mine = [run for run in carried if run.side == side.name and run.status == "ok"]
        then = {(run.facts.get("identity") or {}).get("binary_sha256") for run in mine}
        then.discard(None)
        if not then or then == {now}:
            continue
        measured = ", ".join(sorted(digest[:12] for digest in then))
        key = (side.target.build_facts or {}).get("cache_key")
        keys = {(run.facts.get("build") or {}).get("cache_key") for run in mine}
        if key and keys == {key}:
            terminal.console(stderr=True).print(
                f"the {side.name} {side.target.spec} was built again (sha256 {now[:12]}; session {session_id} "
                f"measured {measured}): the same build (cache key {key}: source, variant, compiler), so its "
                "carried runs stand")
            continue
        raise UsageError(f"--resume {session_id}: the {side.name} {side.target.spec} is now {side.target.binary} "
                         f"(sha256 {now[:12]}), not the binary session {session_id} measured ({measured}); "
                         "a resumed compare must measure the same binaries")
