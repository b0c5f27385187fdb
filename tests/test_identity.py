"""redline.server.identity: what a run records about the build it measured (real git, real files)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from redline.server.identity import binary_digest, server_identity

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_COMMITTER_DATE": "2022-12-16T10:00:00+02:00",
           "GIT_AUTHOR_DATE": "2022-12-16T10:00:00+02:00"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_git_targets_record_the_commit_subject_and_date(tmp_path):
    repo = tmp_path / "redis"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "server.c").write_text("int main(void) { return 0; }\n")
    _git(repo, "add", "server.c")
    _git(repo, "commit", "-q", "-m", "Speed up GEOSEARCH BYBOX\n\nlonger body")
    sha = _git(repo, "rev-parse", "HEAD")
    info = {"redis_version": "7.0.7", "redis_git_sha1": sha[:8], "redis_git_dirty": 0, "redis_build_id": "abc"}
    identity = server_identity(info, None, {"source": f"git:{repo}@{sha}"})
    assert identity["commit"] == {"sha": sha, "subject": "Speed up GEOSEARCH BYBOX",
                                  "date": "2022-12-16T10:00:00+02:00"}
    assert identity["version"] == "7.0.7" and identity["git_sha1"] == sha[:8] and identity["git_dirty"] == "0"
    assert identity["binary_sha256"] is None            # tcp:// and unbuilt targets have no binary


def test_a_moved_repository_keeps_the_sha_and_says_why(tmp_path):
    identity = server_identity({}, None, {"source": f"git:{tmp_path / 'gone'}@{'a' * 40}"})
    assert identity["commit"]["sha"] == "a" * 40 and identity["commit"]["subject"] is None
    assert "gone" in identity["commit"]["unavailable"]


def test_info_values_are_kept_as_the_server_wrote_them():
    # the client turns all-digit hex into numbers: 00000000 -> 0, 01234567 -> 1234567
    identity = server_identity({"redis_version": "7.0.15", "redis_git_sha1": 1234567, "redis_build_id": 9876}, None, None)
    assert identity["git_sha1"] == "01234567" and identity["build_id"] == "9876"
    assert "commit" not in identity


def test_binary_digest_follows_symlinks_and_notices_a_rebuild(tmp_path):
    binary = tmp_path / "redis-check-rdb"
    binary.write_bytes(b"\x7fELF one build")
    link = tmp_path / "redis-server"
    link.symlink_to(binary.name)
    assert binary_digest(link) == hashlib.sha256(b"\x7fELF one build").hexdigest()
    binary.write_bytes(b"\x7fELF another build, longer")   # rebuilt in place: size and mtime change
    assert binary_digest(link) == hashlib.sha256(b"\x7fELF another build, longer").hexdigest()
