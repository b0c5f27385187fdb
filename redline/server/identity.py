"""What build a run measured: the server's own words, the binary's digest, the commit.

Recorded with every run (facts["identity"]) so that `redline history` can name the builds on
each side of a change point: for bin: targets the version, git sha and build id from
INFO server and the sha256 of the binary; for git: targets also the commit (sha, subject,
date) the binary was built from.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from redline.core.errors import UsageError

INFO_FIELDS = {"version": ("redis_version", 0), "git_sha1": ("redis_git_sha1", 8),
               "git_dirty": ("redis_git_dirty", 0), "build_id": ("redis_build_id", 0)}


def server_identity(info: dict, binary: Path | None, build_facts: dict | None) -> dict:
    """The identity of the server behind one run. info: its INFO server section; binary: the
    executable redline started (None for tcp:// targets); build_facts: how redline built it."""
    identity = {name: _info_text(info.get(field), width) for name, (field, width) in INFO_FIELDS.items()}
    identity["binary_sha256"] = binary_digest(Path(binary)) if binary else None
    source = (build_facts or {}).get("source") or ""
    if source.startswith("git:"):
        identity["commit"] = _commit(*source[len("git:"):].rsplit("@", 1))
    return identity


def _info_text(value, width: int) -> str | None:
    """INFO values as the server wrote them (the client turns all-digit hex like 00000000 into 0)."""
    if value is None:
        return None
    return str(value).zfill(width) if isinstance(value, int) else str(value)


def binary_digest(path: Path) -> str:
    """sha256 of the executable's content (following symlinks), cached while the file is unchanged."""
    resolved = path.resolve()
    stat = resolved.stat()
    return _digest(resolved, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _digest(path: Path, size: int, mtime_ns: int) -> str:
    content = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            content.update(block)
    return content.hexdigest()


@functools.lru_cache(maxsize=256)
def _commit(repo: str, sha: str) -> dict:
    from redline.builder.sources import commit_summary
    try:
        return commit_summary(Path(repo), sha)
    except UsageError as exc:  # the repository moved since the build: the sha still names the commit
        return {"sha": sha, "subject": None, "date": None, "unavailable": str(exc)}
