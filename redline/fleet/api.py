"""`redline api`: GitHub webhooks in, work items out (starlette on uvicorn).

POST /webhook (or /), checked in this order, each refusal one status and one log line:
  413  body larger than MAX_BODY (GitHub sends at most 25 MB; a push or PR event is kilobytes)
  401  X-Hub-Signature-256 missing or not HMAC-SHA256 of the body with the secret (constant-time)
  400  no X-GitHub-Delivery / X-GitHub-Event, a body that is not a JSON object (or nested too
       deeply to read), an event whose fields do not have GitHub's shape (a pull_request that is
       not an object, a commit that is not a sha)
  409  a signed body seen before (replay: the key is the body's sha256, what the signature covers —
       a new X-GitHub-Delivery id on the same body is still a replay; kept 7 days, SET NX in Redis)
  422  an event this endpoint does not handle (anything but push, pull_request, ping)
  503  Redis is unreachable, or the work item could not be enqueued (the body is forgotten: a
       redelivery is welcome)
  200  handled but nothing to do (another branch, a PR without the label, a closed PR, a deleted branch)
  202  a work item was enqueued: {"work_id": …, "jobs": N}
The signature is checked before the body is recorded, so an unsigned request cannot use up a
real one. Anything else unexpected is a 500 with one log line, never a traceback.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import redis
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from redline.core.errors import RunError, UsageError
from redline.engine.job import SideSpec
from redline.fleet import keys, work
from redline.fleet.process import log

MAX_BODY = 1024 * 1024
DELIVERY_KEPT_S = 7 * 24 * 3600
ZERO_SHA = "0" * 40
PR_ACTIONS = {"opened", "synchronize", "reopened", "labeled"}


@dataclass
class Settings:
    secret: bytes
    repository: str                  # the agents' path of the git repository: git:PATH@COMMIT
    branches: list[str] | None       # None: the repository's default branch
    label: str
    platforms: list[str] | None
    tests: list                      # TestSpecs, selected once at start
    run_settings: work.Settings
    variant: str | None
    github_repository: str | None = None     # OWNER/NAME whose events this endpoint takes (None: any)


def signature_ok(secret: bytes, body: bytes, header: str | None) -> bool:
    if not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode())


def say(event: str, **fields) -> None:
    log("api", event, **fields)


def answer(status: int, message: str, delivery: str | None = None, **extra) -> JSONResponse:
    say(message, status=status, delivery=delivery, **{k: v for k, v in extra.items() if not isinstance(v, list)})
    return JSONResponse({"status": status, "message": message, **extra}, status_code=status)


async def read_body(request: Request) -> bytes | None:
    """The body, or None once it passes MAX_BODY (a lying or missing Content-Length included)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    return bytes(body)


class BadPayload(ValueError):
    """The event's fields do not have GitHub's shape: 400 with the reason."""


class NotOurs(ValueError):
    """A well-formed event this endpoint cannot benchmark — another repository's, or commits its
    repository does not hold: 422 with the reason, one log line, no work item (a webhook pointed at
    the wrong endpoint shows as failed deliveries on GitHub instead of dead jobs on the fleet)."""


def make_app(client: redis.Redis, settings: Settings) -> Starlette:
    async def webhook(request: Request):
        try:
            return await handle(request)
        except Exception as exc:        # noqa: BLE001 — one log line and a 500, never a traceback
            return answer(500, f"internal error: {type(exc).__name__}: {exc}")

    async def handle(request: Request):
        body = await read_body(request)
        if body is None:
            return answer(413, f"body larger than {MAX_BODY} bytes")
        if not signature_ok(settings.secret, body, request.headers.get("x-hub-signature-256")):
            return answer(401, "bad or missing X-Hub-Signature-256")
        delivery, event = request.headers.get("x-github-delivery"), request.headers.get("x-github-event")
        if not delivery or not event:
            return answer(400, "X-GitHub-Delivery and X-GitHub-Event are required")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        if not isinstance(payload, dict):
            return answer(400, "the body is not a JSON object (or is nested too deeply)", delivery)
        seen = keys.DELIVERY.key(body_sha256=hashlib.sha256(body).hexdigest())
        try:
            first = await run_in_threadpool(client.set, seen, delivery, nx=True, ex=DELIVERY_KEPT_S)
        except redis.RedisError as exc:
            return answer(503, f"Redis unavailable: {exc}", delivery)
        if not first:
            return answer(409, "this signed body was delivered before (replay)", delivery)
        if event == "ping":
            return answer(200, "pong", delivery)
        if event not in ("push", "pull_request"):
            return answer(422, f"event {event!r} is not handled (push, pull_request)", delivery)
        try:
            wanted = await run_in_threadpool(push_request if event == "push" else pull_request, payload, settings)
        except BadPayload as exc:
            return answer(400, f"not a GitHub {event} event: {exc}", delivery)
        except NotOurs as exc:
            return answer(422, f"not benchmarked here: {exc}", delivery)
        if isinstance(wanted, str):
            return answer(200, f"nothing to do: {wanted}", delivery)
        try:
            work_id, jobs = await run_in_threadpool(_enqueue, client, settings, *wanted)
        except (redis.RedisError, RunError, UsageError) as exc:      # GitHub may deliver it again
            try:
                await run_in_threadpool(client.delete, seen)
            except redis.RedisError:
                pass
            return answer(503, f"not enqueued: {exc}", delivery)
        return answer(202, "enqueued", delivery, work_id=work_id, jobs=jobs)

    return Starlette(routes=[Route("/webhook", webhook, methods=["POST"]), Route("/", webhook, methods=["POST"])])


def _enqueue(client: redis.Redis, settings: Settings, source: str, baseline: str, comparison: str,
             github: str, branch: str) -> tuple[str, int]:
    sides = [SideSpec("baseline", baseline, (), settings.variant), SideSpec("comparison", comparison, (), settings.variant)]
    item = work.new_work(client, source=source, sides=sides, platforms=settings.platforms, tests=settings.tests,
                         topologies=None, settings=settings.run_settings, github=github, branch=branch)
    return item.work_id, work.enqueue(client, item)


SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")       # OWNER/NAME as GitHub spells a repository


def _object(document: dict, name: str) -> dict:
    value = document.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPayload(f"{name} is not an object")
    return value


def _text(document: dict, name: str) -> str:
    value = document.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadPayload(f"{name} is not text")
    return value


def _sha(document: dict, name: str, where: str) -> str:
    value = _text(document, name)
    if value and not SHA.match(value):
        raise BadPayload(f"{where}.{name} is not a commit sha")
    return value


def repository_of(payload: dict, settings: Settings) -> str:
    """The event's repository (OWNER/NAME, or "" when it names none); NotOurs when the endpoint takes
    another repository's events (`--github-repository`)."""
    name = _text(_object(payload, "repository"), "full_name")
    if name and not REPOSITORY.match(name):
        raise BadPayload("repository.full_name is not OWNER/NAME")
    wanted = settings.github_repository
    if wanted and name.lower() != wanted.lower():
        raise NotOurs(f"an event of {name or 'an unnamed repository'}; this endpoint benchmarks {wanted}")
    return name


def check_commits(settings: Settings, *shas: str) -> None:
    """NotOurs when the repository is on this machine and lacks one of the commits: the agents could
    not build it (they build from that repository and fetch nothing). A repository that is not here
    (the agents' path on other machines) is not checked."""
    where = Path(settings.repository)
    if not where.is_dir():
        return
    for sha in shas:
        try:
            found = subprocess.run(["git", "-C", str(where), "cat-file", "-e", f"{sha}^{{commit}}"],
                                   capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return
        if found.returncode != 0:
            raise NotOurs(f"commit {sha[:12]} is not in {settings.repository} (an event of another repository, "
                          "or a clone that has not fetched it yet)")


def push_request(payload: dict, settings: Settings) -> tuple[str, str, str, str, str] | str:
    """(source, baseline, comparison, github, branch) for a push to a benchmarked branch, else why not."""
    repository_of(payload, settings)
    ref = _text(payload, "ref")
    branch = ref.removeprefix("refs/heads/")
    wanted = settings.branches or [_text(_object(payload, "repository"), "default_branch")]
    if not ref.startswith("refs/heads/") or branch not in wanted:
        return f"push to {ref}, not to {', '.join(wanted)}"
    before, after = _sha(payload, "before", "push"), _sha(payload, "after", "push")
    if payload.get("deleted") or after == ZERO_SHA:
        return f"branch {branch} deleted"
    if before == ZERO_SHA or not before:
        return f"branch {branch} created: no previous commit to compare with"
    if not after:
        raise BadPayload("push.after is missing")
    check_commits(settings, before, after)
    # the branch names the fleet's history of it (a name outside the work hash's form: no history)
    return "push", _git(settings, before), _git(settings, after), "", branch if work.BRANCH.match(branch) else ""


def pull_request(payload: dict, settings: Settings) -> tuple[str, str, str, str, str] | str:
    action = payload.get("action")
    pr = _object(payload, "pull_request")
    labels = pr.get("labels") or []
    if not isinstance(labels, list):
        raise BadPayload("pull_request.labels is not a list")
    names = {label.get("name") for label in labels if isinstance(label, dict)}
    if action not in PR_ACTIONS:
        return f"pull request {str(action)[:40]}"
    if settings.label not in names:
        return f"pull request without the label {settings.label!r}"
    if action == "labeled" and _object(payload, "label").get("name") != settings.label:
        return "another label was added"
    head = _sha(_object(pr, "head"), "sha", "pull_request.head")
    base = _sha(_object(pr, "base"), "sha", "pull_request.base")
    if not head or not base:
        return "pull request without head and base commits"
    repository = repository_of(payload, settings)
    number = payload.get("number") or pr.get("number")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 10**9):
        raise BadPayload("number is not a pull request number")
    check_commits(settings, base, head)
    return ("pull_request", _git(settings, merge_base(settings.repository, base, head)), _git(settings, head),
            f"{repository}#{number}" if repository and number else "", "")


def merge_base(repository: str, base: str, head: str) -> str:
    """The PR's merge base when the repository is here and has both commits; else the base
    branch's tip at the event (what GitHub's own diff starts from when the base has not moved)."""
    try:
        done = subprocess.run(["git", "-C", repository, "merge-base", base, head], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return base
    found = done.stdout.strip()
    return found if done.returncode == 0 and len(found) == 40 else base


def _git(settings: Settings, commit: str) -> str:
    return f"git:{settings.repository}@{commit}"
