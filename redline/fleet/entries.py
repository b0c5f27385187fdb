"""Everything the fleet reads from Redis is checked here before it is used: a jobs entry, a results
entry and its run documents, a work hash. What is read is untrusted (anyone who can write to the
fleet's Redis can write an entry); a check that fails raises `Malformed` with the reason, and the
reader dead-letters the entry with it (redline.fleet.agent, redline.fleet.collector) instead of
stopping on it — a malformed entry is never read again at the next start.

Only shapes and bounds are decided here; whether a job may run on an agent (its targets, suite,
server configuration) is redline.fleet.policy.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field

from redline.core.run import PURPOSES, RUN_FORMAT, STATUSES, Run
from redline.engine.job import JOB_FORMAT, SETTINGS, Job, SideSpec
from redline.fleet import keys
from redline.fleet.work import BRANCH, PLATFORM_NAME
from redline.profile.folding import StackBounds

IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,199}$")   # job ids, work ids, agent names
GITHUB = re.compile(r"^(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\d{1,9})?$")
UID = re.compile(r"^[0-9a-f]{32}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
MEASURE = re.compile(r"^(time|instructions)$")      # --measure
TEXT_LIMIT = 4096             # a target, a suite path, a test name
ERROR_LIMIT = 64 * 1024       # an error carried in an entry (a build log's tail)
RUNS_LIMIT = 10_000           # run documents in one result
LONGEST_S = 24 * 3600.0
MAX_RUNS = 1000
# A profiled run's folded stacks in its run document (an agent bounds them, redline.fleet.profiles):
# 2,000 stacks, 256 KiB of stack text, frames of 256 characters, 256 frames a stack — at most about
# 0.3 MB of JSON per profiled run, two per job of a bisection's own-change pair (a result entry
# above redline.fleet.agent.INLINE_LIMIT goes by reference, a blob).
PROFILE_BOUNDS = StackBounds(stacks=2000, text_bytes=256 * 1024, frame_chars=256, frames=256)
COUNT_LIMIT = 10**15            # a stack's samples or instructions


class Malformed(ValueError):
    """An entry or document that does not have the fleet's shape: the reason, in one line."""


# -- scalar fields ----------------------------------------------------------------------------------
def text(value, where: str, *, pattern: re.Pattern | None = None, limit: int = TEXT_LIMIT,
         empty: bool = False) -> str:
    if not isinstance(value, str):
        raise Malformed(f"{where}: expected text, got {type(value).__name__}")
    if len(value) > limit:
        raise Malformed(f"{where}: longer than {limit} characters")
    if not value and not empty:
        raise Malformed(f"{where} is empty")
    if pattern is not None and value and not pattern.match(value):
        raise Malformed(f"{where}: {value[:80]!r} is not of the expected form")
    if "\x00" in value:
        raise Malformed(f"{where}: holds a NUL character")
    return value


def integer(value, where: str, low: int, high: int) -> int:
    if isinstance(value, str):
        if not re.fullmatch(r"-?\d{1,18}", value.strip()):
            raise Malformed(f"{where}: {value[:40]!r} is not a whole number")
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Malformed(f"{where}: expected a whole number, got {type(value).__name__}")
    if not low <= value <= high:
        raise Malformed(f"{where}: {value} is outside {low}..{high}")
    return value


def number(value, where: str, low: float, high: float) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise Malformed(f"{where}: {value[:40]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Malformed(f"{where}: expected a finite number, got {value!r:.40}")
    if not low <= value <= high:
        raise Malformed(f"{where}: {value:g} is outside {low:g}..{high:g}")
    return float(value)


def optional(check, value, *args, **kwargs):
    return None if value is None else check(value, *args, **kwargs)


def json_document(payload, where: str, kind: type):
    if not isinstance(payload, str):
        raise Malformed(f"{where}: expected JSON text")
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise Malformed(f"{where}: not JSON ({str(exc)[:120]})") from None
    if not isinstance(document, kind):
        raise Malformed(f"{where}: expected a JSON {'object' if kind is dict else 'list'}")
    return document


def only_keys(document: dict, allowed, where: str) -> None:
    unknown = sorted(set(map(str, document)) - set(allowed))
    if unknown:
        raise Malformed(f"{where}: unknown field(s) {', '.join(unknown)[:200]}")


# -- jobs ---------------------------------------------------------------------------------------------
@dataclass
class JobEntry:
    job_id: str
    work_id: str
    attempt: int
    job: Job


def job_entry(fields: dict) -> JobEntry:
    """A jobs-stream entry (keys.JOBS) with its job document, checked."""
    job_id = text(fields.get("job_id"), "job_id", pattern=IDENTIFIER)
    work_id = text(fields.get("work_id"), "work_id", pattern=IDENTIFIER)
    attempt = integer(fields.get("attempt", "1"), "attempt", 1, 1000)
    optional(number, fields.get("submitted_at"), "submitted_at", 0, 1e11)
    job = job_document(json_document(fields.get("job"), "job", dict))
    if job.job_id != job_id:
        raise Malformed(f"job: its job_id {job.job_id!r:.80} is not the entry's {job_id!r}")
    return JobEntry(job_id, work_id, attempt, job)


JOB_KEYS = ("format", "suite", "test", "sides", "topology", "settings", "max_runs", "lone_p_value", "job_id",
            "step_rule")
STEP_RULE_KEYS = ("metric", "halves", "rising", "steps", "against_bad")
STEP_RULE_TESTS = 200
SIDE_KEYS = ("name", "target", "config", "variant")


def job_document(document: dict) -> Job:
    """A job document (redline.engine.job format) whose every field has its type and bounds."""
    if document.get("format") != JOB_FORMAT:
        raise Malformed(f"job format {str(document.get('format'))[:20]!r}: this redline reads format {JOB_FORMAT}")
    only_keys(document, JOB_KEYS, "job")
    sides = document.get("sides")
    if not isinstance(sides, list) or not 1 <= len(sides) <= 2:
        raise Malformed("job.sides: expected a list of one or two sides")
    settings = document.get("settings") or {}
    if not isinstance(settings, dict):
        raise Malformed("job.settings: expected an object")
    only_keys(settings, SETTINGS, "job.settings")
    runs = integer(settings.get("runs", 1), "job.settings.runs", 1, MAX_RUNS)
    checked = {"runs": runs}
    for name, check in (("duration_s", lambda v, w: number(v, w, 1, LONGEST_S)),
                        ("warmup_s", lambda v, w: number(v, w, 0, LONGEST_S)),
                        ("scale", lambda v, w: number(v, w, 1e-6, 1e6)),
                        ("window_instructions", lambda v, w: integer(v, w, 1, 10**15)),
                        ("window_requests", lambda v, w: integer(v, w, 1, 10**12)),
                        ("earlier_window_requests", lambda v, w: integer(v, w, 1, 10**12))):
        if name in settings:
            checked[name] = optional(check, settings[name], f"job.settings.{name}")
    for name in ("profile", "duet", "snapshots", "system_calls_judged"):
        if name in settings:
            if not isinstance(settings[name], bool):
                raise Malformed(f"job.settings.{name}: expected true or false")
            checked[name] = settings[name]
    if "measure" in settings:
        checked["measure"] = optional(text, settings["measure"], "job.settings.measure", pattern=MEASURE)
    max_runs = optional(integer, document.get("max_runs"), "job.max_runs", runs, MAX_RUNS)
    lone_p = optional(number, document.get("lone_p_value"), "job.lone_p_value", 0.0, 1.0)
    topology = text(document.get("topology", "oss-standalone"), "job.topology", pattern=IDENTIFIER)
    try:
        from redline.topology import parse_topology
        parse_topology(topology)
    except Exception as exc:            # noqa: BLE001 — any refusal of the name is the entry's fault
        raise Malformed(f"job.topology: {str(exc)[:200]}") from None
    return Job(suite=text(document.get("suite"), "job.suite"), test=text(document.get("test"), "job.test"),
               sides=[side_document(side, f"job.sides[{n}]") for n, side in enumerate(sides)], topology=topology,
               settings=checked, max_runs=max_runs, lone_p_value=lone_p,
               job_id=text(document.get("job_id"), "job.job_id", pattern=IDENTIFIER),
               step_rule=optional(step_rule_document, document.get("step_rule"), "job.step_rule"))


def step_rule_document(document, where: str) -> dict:
    """A bisection step's rule (redline.bisect.search.StepRule as JSON, with the metric it decides
    on): per test a half-way point (a place, 0 at GOOD and 1 at BAD, within -10..10), a direction and
    the endpoints' ratio (positive, not 1); the same tests in all three."""
    from redline.analysis.comparison import COMPARED_METRICS
    if not isinstance(document, dict):
        raise Malformed(f"{where}: expected an object")
    only_keys(document, STEP_RULE_KEYS, where)
    metric = text(document.get("metric"), f"{where}.metric")
    if metric not in COMPARED_METRICS:
        raise Malformed(f"{where}.metric: {metric[:40]!r} is not a compared metric")
    if not isinstance(document.get("against_bad"), bool):
        raise Malformed(f"{where}.against_bad: expected true or false")
    parts = {}
    for name in ("halves", "rising", "steps"):
        part = document.get(name)
        if not isinstance(part, dict) or not 1 <= len(part) <= STEP_RULE_TESTS:
            raise Malformed(f"{where}.{name}: expected an object of 1 to {STEP_RULE_TESTS} tests")
        parts[name] = {text(test, f"{where}.{name} test"): value for test, value in part.items()}
    if not set(parts["halves"]) == set(parts["rising"]) == set(parts["steps"]):
        raise Malformed(f"{where}: halves, rising and steps must name the same tests")
    for test, rising in parts["rising"].items():
        if not isinstance(rising, bool):
            raise Malformed(f"{where}.rising: expected true or false for {test[:80]!r}")
    halves = {test: number(value, f"{where}.halves", -10.0, 10.0) for test, value in parts["halves"].items()}
    steps = {test: number(value, f"{where}.steps", 1e-9, 1e9) for test, value in parts["steps"].items()}
    if any(step == 1.0 for step in steps.values()):
        raise Malformed(f"{where}.steps: an endpoint ratio of exactly 1 is no change to place a commit on")
    return {"metric": metric, "halves": halves, "rising": dict(parts["rising"]), "steps": steps,
            "against_bad": document["against_bad"]}


def side_document(side, where: str) -> SideSpec:
    if not isinstance(side, dict):
        raise Malformed(f"{where}: expected an object")
    only_keys(side, SIDE_KEYS, where)
    name = side.get("name")
    if name not in (None, "baseline", "comparison"):
        raise Malformed(f"{where}.name: expected baseline or comparison")
    config = side.get("config") or {}
    if not isinstance(config, dict) or len(config) > 200:
        raise Malformed(f"{where}.config: expected an object of at most 200 NAME: VALUE settings")
    pairs = tuple(sorted((text(k, f"{where}.config name"), text(v, f"{where}.config.{k:.40}", empty=True))
                         for k, v in config.items()))
    variant = optional(text, side.get("variant"), f"{where}.variant")
    return SideSpec(name, text(side.get("target"), f"{where}.target"), pairs, variant)


# -- results ------------------------------------------------------------------------------------------
@dataclass
class ResultEntry:
    kind: str                      # result | dead
    job_id: str
    work_id: str
    platform: str
    agent: str
    attempt: int
    fields: dict                   # as read (the ledger keeps the times and the error)
    runs_ref: str | None = None
    runs_sha256: str | None = None
    error: str | None = None
    inline: str | None = field(default=None, repr=False)


def result_entry(fields: dict) -> ResultEntry:
    """A results-stream entry (keys.RESULTS), checked; its runs are read by `run_documents`."""
    kind = fields.get("kind")
    if kind not in ("result", "dead"):
        raise Malformed(f"kind: {str(kind)[:40]!r} is neither result nor dead")
    entry = ResultEntry(kind=kind, job_id=text(fields.get("job_id"), "job_id", pattern=IDENTIFIER),
                        work_id=text(fields.get("work_id"), "work_id", pattern=IDENTIFIER),
                        platform=text(fields.get("platform"), "platform", pattern=PLATFORM_NAME),
                        agent=text(fields.get("agent"), "agent", pattern=IDENTIFIER),
                        attempt=integer(fields.get("attempt"), "attempt", 0, 1000), fields=fields)
    for name in ("submitted_at", "started_at", "finished_at"):
        if fields.get(name):
            number(fields[name], name, 0, 1e11)
    if kind == "dead":
        entry.error = text(fields.get("error"), "error", limit=ERROR_LIMIT)
        return entry
    if "runs" in fields:
        if "runs_ref" in fields:
            raise Malformed("a result holds either runs or runs_ref, not both")
        entry.inline = fields["runs"]
        return entry
    entry.runs_sha256 = text(fields.get("runs_sha256"), "runs_sha256", pattern=SHA256)
    entry.runs_ref = text(fields.get("runs_ref"), "runs_ref")
    if entry.runs_ref != keys.BLOB.key(sha256=entry.runs_sha256):
        raise Malformed(f"runs_ref {entry.runs_ref[:80]!r} is not the blob key of its sha256")
    return entry


def blob_payload(payload: str | None, entry: ResultEntry) -> str:
    """The blob a result refers to, checked against its sha256."""
    if payload is None:
        raise Malformed(f"results blob {entry.runs_ref} is missing")
    if hashlib.sha256(payload.encode()).hexdigest() != entry.runs_sha256:
        raise Malformed(f"results blob {entry.runs_ref} does not match its sha256")
    return payload


def run_documents(payload: str, where: str = "runs") -> list[Run]:
    """A result's run documents (redline.core.run format), each checked: identity, status,
    numbers, a profiled run's shipped stacks. A profile's files are on the agent's machine, not
    here: their paths are not kept (redline.fleet.profiles keeps the stacks on this side)."""
    documents = json_document(payload, where, list)
    if len(documents) > RUNS_LIMIT:
        raise Malformed(f"{where}: more than {RUNS_LIMIT} run documents")
    return [run_document(document, f"{where}[{n}]") for n, document in enumerate(documents)]


def run_document(document, where: str) -> Run:
    if not isinstance(document, dict):
        raise Malformed(f"{where}: expected an object")
    if document.get("format") != RUN_FORMAT:
        raise Malformed(f"{where}: run format {str(document.get('format'))[:20]!r}, this redline reads {RUN_FORMAT}")
    text(document.get("uid"), f"{where}.uid", pattern=UID)
    text(document.get("test"), f"{where}.test")
    text(document.get("target"), f"{where}.target")
    if document.get("side") not in (None, "baseline", "comparison"):
        raise Malformed(f"{where}.side: expected baseline or comparison")
    integer(document.get("run_index"), f"{where}.run_index", 0, 100_000)
    if document.get("status") not in STATUSES or document.get("purpose", "measure") not in PURPOSES:
        raise Malformed(f"{where}: status or purpose is not one redline knows")
    text(document.get("topology", "oss-standalone"), f"{where}.topology", pattern=IDENTIFIER)
    for name in ("started_at", "finished_at"):
        optional(number, document.get(name), f"{where}.{name}", 0, 1e11)
    for name in ("error", "server_log_tail", "suite_file"):
        optional(text, document.get(name), f"{where}.{name}", limit=ERROR_LIMIT, empty=True)
    series = document.get("series") or {}
    if not isinstance(series, dict) or not all(isinstance(v, list) for v in series.values()):
        raise Malformed(f"{where}.series: expected an object of lists")
    for name, values in series.items():
        for value in values:
            optional(number, value, f"{where}.series.{name:.40}", -math.inf, math.inf)
    if not isinstance(document.get("facts") or {}, dict) or not isinstance(document.get("flags") or [], list):
        raise Malformed(f"{where}: facts must be an object and flags a list")
    for flag in document.get("flags") or []:
        text(flag, f"{where}.flags", limit=ERROR_LIMIT)
    try:
        run = Run.from_json(document)
    except (TypeError, ValueError) as exc:
        raise Malformed(f"{where}: {str(exc)[:200]}") from None
    for name, value in run.metrics.items():
        number(value, f"{where}.{name}", -math.inf, math.inf)
    run.profile = profile_document(document.get("profile"), f"{where}.profile") if run.purpose == "profile" else None
    return run


def profile_document(document, where: str) -> dict | None:
    """A profiled run's profile as shipped (redline.fleet.profiles.shipped): its folded stacks within
    PROFILE_BOUNDS — frame names are untrusted text: printable, bounded, none empty —, their counts
    whole numbers from 1, the samples and how many stacks the agent merged into [other]. Its files'
    paths are the agent's and are not kept. None: no profile, or one without stacks (its files
    stayed on the agent's machine)."""
    if document is None:
        return None
    if not isinstance(document, dict):
        raise Malformed(f"{where}: expected an object")
    if document.get("stacks") is None:
        return None
    stacks = document["stacks"]
    bounds = PROFILE_BOUNDS
    if not isinstance(stacks, list) or len(stacks) > bounds.stacks:
        raise Malformed(f"{where}.stacks: expected a list of at most {bounds.stacks} [stack, count] pairs")
    checked: dict[str, int] = {}
    size = 0
    for n, pair in enumerate(stacks):
        if not isinstance(pair, list) or len(pair) != 2:
            raise Malformed(f"{where}.stacks[{n}]: expected a [stack, count] pair")
        stack = text(pair[0], f"{where}.stacks[{n}]", limit=bounds.frames * (bounds.frame_chars + 1))
        frames = stack.split(";")
        if len(frames) > bounds.frames:
            raise Malformed(f"{where}.stacks[{n}]: more than {bounds.frames} frames")
        for frame in frames:
            if not frame or len(frame) > bounds.frame_chars:
                raise Malformed(f"{where}.stacks[{n}]: a frame name is empty or longer than {bounds.frame_chars} "
                                "characters")
            if not frame.isprintable():
                raise Malformed(f"{where}.stacks[{n}]: a frame name holds a control or unprintable character")
        if stack in checked:
            raise Malformed(f"{where}.stacks[{n}]: the stack is listed twice")
        if isinstance(pair[1], bool) or not isinstance(pair[1], int):
            raise Malformed(f"{where}.stacks[{n}]: its count is not a whole number")
        checked[stack] = integer(pair[1], f"{where}.stacks[{n}] count", 1, COUNT_LIMIT)
        size += len(stack.encode())
        if size > bounds.text_bytes:
            raise Malformed(f"{where}.stacks: more than {bounds.text_bytes} bytes of stack text")
    event = optional(text, document.get("event"), f"{where}.event", limit=200, empty=True)
    if event and not event.isprintable():
        raise Malformed(f"{where}.event: holds a control or unprintable character")
    return {"stacks": checked, "event": event,
            "samples": integer(document.get("samples", sum(checked.values())), f"{where}.samples", 0, COUNT_LIMIT),
            "stacks_merged": integer(document.get("stacks_merged", 0), f"{where}.stacks_merged", 0, 10**9)}


# -- work hashes --------------------------------------------------------------------------------------
WORK_STATES = ("queued", "running", "done", "failed")


@dataclass
class WorkSummary:
    work_id: str
    jobs_total: int
    runs: int
    max_runs: int
    github: str
    state: str
    baseline: str
    comparison: str
    fields: dict
    source: str = "cli"
    sides: list[SideSpec] = field(default_factory=list)     # as enqueued (older hashes: none)
    settings: dict = field(default_factory=dict)            # redline.fleet.work.Settings as enqueued, checked
    bisection: str = ""                                     # the fleet bisection it is a step of, if any
    platforms: list[str] = field(default_factory=list)
    branch: str = ""                                        # a push's branch (its history: redline.fleet.branch_history)


SOURCES = ("cli", "push", "pull_request", "bisect")
WORK_SETTINGS = ("runs", "max_runs", "duration_s", "warmup_s", "scale", "profile", "snapshots", "measure",
                 "window_instructions", "window_requests")


def work_settings(payload: str) -> dict:
    """A work hash's `settings` (redline.fleet.work.Settings as JSON), every field with its type and bounds."""
    document = json_document(payload, "work.settings", dict)
    only_keys(document, WORK_SETTINGS, "work.settings")
    checked = {}
    checked["runs"] = integer(document.get("runs", 7), "work.settings.runs", 1, MAX_RUNS)
    checked["max_runs"] = integer(document.get("max_runs", 15), "work.settings.max_runs", checked["runs"], MAX_RUNS)
    checked["duration_s"] = optional(number, document.get("duration_s"), "work.settings.duration_s", 1, LONGEST_S)
    checked["warmup_s"] = number(document.get("warmup_s", 2.0), "work.settings.warmup_s", 0, LONGEST_S)
    checked["scale"] = optional(number, document.get("scale"), "work.settings.scale", 1e-6, 1e6)
    for name, default in (("profile", False), ("snapshots", True)):
        value = document.get(name, default)
        if not isinstance(value, bool):
            raise Malformed(f"work.settings.{name}: expected true or false")
        checked[name] = value
    checked["measure"] = optional(text, document.get("measure"), "work.settings.measure", pattern=MEASURE)
    checked["window_instructions"] = optional(integer, document.get("window_instructions"),
                                              "work.settings.window_instructions", 1, 10**15)
    fixed = document.get("window_requests")
    fixed = {} if fixed is None else fixed
    if not isinstance(fixed, dict) or len(fixed) > STEP_RULE_TESTS:
        raise Malformed(f"work.settings.window_requests: expected an object of at most {STEP_RULE_TESTS} tests")
    checked["window_requests"] = {text(test, "work.settings.window_requests test"):
                                  integer(value, "work.settings.window_requests", 1, 10**12)
                                  for test, value in fixed.items()}
    return checked


def work_summary(fields: dict, work_id: str) -> WorkSummary:
    """A work hash (keys.WORK) as the collector needs it."""
    runs = integer(fields.get("runs") or 7, "work.runs", 1, MAX_RUNS)
    source = fields.get("source") or "cli"
    if source not in SOURCES:
        raise Malformed(f"work.source: {str(source)[:40]!r} is not one of {', '.join(SOURCES)}")
    sides = json_document(fields["sides"], "work.sides", list) if fields.get("sides") else []
    if len(sides) > 2:
        raise Malformed("work.sides: expected at most two sides")
    platforms = json_document(fields["platforms"], "work.platforms", list) if fields.get("platforms") else []
    return WorkSummary(work_id=work_id, jobs_total=integer(fields.get("jobs_total"), "work.jobs_total", 1, 10**7),
                       runs=runs, max_runs=integer(fields.get("max_runs") or 15, "work.max_runs", 1, MAX_RUNS),
                       github=text(fields.get("github", ""), "work.github", pattern=GITHUB, empty=True),
                       state=fields.get("state") if fields.get("state") in WORK_STATES else "queued",
                       baseline=text(fields.get("baseline", ""), "work.baseline", empty=True),
                       comparison=text(fields.get("comparison", ""), "work.comparison", empty=True), fields=fields,
                       source=source, sides=[side_document(side, f"work.sides[{n}]") for n, side in enumerate(sides)],
                       settings=work_settings(fields["settings"]) if fields.get("settings") else {},
                       bisection=text(fields.get("bisection", ""), "work.bisection", pattern=IDENTIFIER, empty=True),
                       platforms=[text(p, "work.platforms[]", pattern=PLATFORM_NAME) for p in platforms],
                       branch=text(fields.get("branch", ""), "work.branch", pattern=BRANCH, limit=200, empty=True))
