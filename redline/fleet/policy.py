"""What a fleet's jobs may name on an agent: the owner's allow-list, checked before anything runs.

A job is text from Redis; running it means starting a program (`bin:`), building and starting
one (`git:`, `src:` — a build runs the tree's Makefile), reading a suite file, or sending load to
an endpoint (`tcp://`). An agent runs only what its owner allowed with `--allow-target` (and
`--allow-targets-file`):

  bin:PATH       that server binary (compared after resolving links)
  git:DIR        repositories at or under DIR (any ref)
  src:DIR        source trees at or under DIR
  suite:DIR      suite files under DIR (redline's built-in suites are always allowed)
  tcp://HOST:PORT  that endpoint

Without any, the redis-server on PATH is the one target allowed. Whatever the list, a job may not
load code into a server (`loadmodule`), set what redline owns (redline.suites.owned), or name a
build variant by file (a variant file names the compiler): only the shipped variants. A job that
names anything else is refused with the reason and dead-lettered unrun.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from redline.core.errors import UsageError
from redline.suites.owned import owned_server_parameter

if TYPE_CHECKING:
    from redline.engine.job import Job

SCHEMES = ("bin:", "git:", "src:", "suite:", "tcp://")
CODE_LOADING = {"loadmodule"}          # server configuration that runs code named by the job


class Refused(Exception):
    """The job names something this agent's owner did not allow: the reason."""


@dataclass(frozen=True)
class Allowance:
    scheme: str           # one of SCHEMES
    value: str            # a resolved absolute path, or host:port

    def __str__(self) -> str:
        return f"{self.scheme}{self.value}"


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def allowance(text: str) -> Allowance:
    """One --allow-target pattern (argparse type: a bad one is a usage error)."""
    scheme = next((s for s in SCHEMES if text.startswith(s)), None)
    body = text[len(scheme):] if scheme else ""
    if scheme is None or not body.strip():
        raise UsageError(f"--allow-target {text!r}: expected bin:PATH, git:DIR, src:DIR, suite:DIR or tcp://HOST:PORT")
    if scheme == "tcp://":
        return Allowance(scheme, _endpoint(text) or _bad(text, "needs HOST:PORT"))
    if not os.path.isabs(os.path.expanduser(body)):
        _bad(text, "needs an absolute path")
    return Allowance(scheme, _real(body))


def _bad(text: str, why: str):
    raise UsageError(f"--allow-target {text!r}: {why}")


def _endpoint(text: str) -> str | None:
    try:
        parts = urlsplit(text)
        return f"{parts.hostname}:{parts.port}" if parts.hostname and parts.port else None
    except ValueError:
        return None


def allowances_file(path: Path) -> list[Allowance]:
    """--allow-targets-file: one pattern a line; blank lines and '#' comments are skipped."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--allow-targets-file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    found = []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if line and not line.startswith("#"):
            try:
                found.append(allowance(line))
            except UsageError as exc:
                raise UsageError(f"{path}:{number}: {exc}") from None
    return found


class TargetPolicy:
    def __init__(self, allowed: list[Allowance]):
        self.allowed = list(allowed) or default_allowances()

    @classmethod
    def from_arguments(cls, patterns: list[Allowance] | None, files: list[Path] | None) -> TargetPolicy:
        return cls([*(patterns or []), *(a for f in files or [] for a in allowances_file(f))])

    def describe(self) -> str:
        return ", ".join(map(str, self.allowed))

    def check(self, job: Job) -> None:
        """Refused(reason) unless every side, the configuration, the variant and the suite are allowed."""
        for side in job.sides:
            self._target(side.target)
            for name, _ in side.config:
                if name.strip().lower() in CODE_LOADING:
                    raise Refused(f"server configuration {name} loads code named by the job: never allowed")
                owned = owned_server_parameter(name)
                if owned:
                    raise Refused(f"server configuration {name}: redline sets this parameter itself ({owned})")
            if side.variant is not None and ("/" in side.variant or side.variant.endswith((".yml", ".yaml"))):
                raise Refused(f"build variant {side.variant!r} is a file: a job may name only the shipped variants")
        self._suite(job.suite)

    def _target(self, target: str) -> None:
        if target.startswith("tcp://"):
            endpoint = _endpoint(target)
            if endpoint and Allowance("tcp://", endpoint) in self.allowed:
                return
        else:
            scheme = next((s for s in ("bin:", "git:", "src:") if target.startswith(s)), None)
            path = target[len(scheme):] if scheme else ""
            if scheme == "git:":
                path = path.rpartition("@")[0] if "@" in path else path
            if scheme and path and os.path.isabs(os.path.expanduser(path)):
                real = _real(path)
                for allowed in self.allowed:
                    if allowed.scheme != scheme:
                        continue
                    if real == allowed.value or (scheme != "bin:" and Path(real).is_relative_to(allowed.value)):
                        return
        raise Refused(f"target {target[:200]!r} is not allowed on this agent (allowed: {self.describe()}; "
                      "the agent's owner adds others with --allow-target)")

    def _suite(self, suite: str) -> None:
        from redline.engine.job import BUILTIN
        from redline.suites.discovery import builtin_suites_dir
        builtin = builtin_suites_dir()
        if suite.startswith(BUILTIN):
            if Path(_real(str(builtin / suite[len(BUILTIN):]))).is_relative_to(builtin):
                return
        elif os.path.isabs(suite):
            real = _real(suite)
            if any(a.scheme == "suite:" and Path(real).is_relative_to(a.value) for a in self.allowed):
                return
        raise Refused(f"suite {suite[:200]!r} is not allowed on this agent (built-in suites, and suite:DIR "
                      "patterns of --allow-target)")


def default_allowances() -> list[Allowance]:
    """Without --allow-target: the redis-server on PATH (the default baseline of `submit`)."""
    found = shutil.which("redis-server")
    return [Allowance("bin:", _real(found))] if found else []
