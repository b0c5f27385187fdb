"""The build cache: one directory per (source, variant, compiler), published atomically.

Layout under the cache root ($REDLINE_CACHE, else $XDG_CACHE_HOME/redline, else
~/.cache/redline):

    builds/<key>/redis-server     the artifact (valkey trees: valkey-server)
    builds/<key>/redis-cli        when the tree builds one
    builds/<key>/build.log        make's output
    builds/<key>/build.json       what was built, how, with which compiler, how long it took
    builds/.locks/<key>.lock      flock: one build per key at a time
    builds/.tmp/<key>.*/          builds in progress (renamed to builds/<key> when done)
    builds/failed/<key>.log       the log of the last failed build of a key
    builds/.ccache/               ccache's object cache, when ccache is installed (nearby commits
                                  recompile only what changed); $REDLINE_CCACHE_DIR puts it
                                  elsewhere (one object cache shared by several cache roots)
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from redline.system.cache_dir import cache_root

MANIFEST = "build.json"
LOG = "build.log"


@dataclass(frozen=True)
class BuildCache:
    root: Path

    @classmethod
    def default(cls) -> "BuildCache":
        return cls(root=cache_root() / "builds")

    def entry(self, key: str) -> Path:
        return self.root / key

    @property
    def ccache_dir(self) -> Path:
        shared = os.environ.get("REDLINE_CCACHE_DIR")
        return Path(shared).expanduser() if shared else self.root / ".ccache"

    def failed_log(self, key: str) -> Path:
        return self.root / "failed" / f"{key}.log"

    def lookup(self, key: str) -> dict | None:
        """The manifest of a finished build, or None. A directory appears only by an atomic
        rename of a complete build, so a manifest that is there is whole."""
        try:
            return json.loads((self.entry(key) / MANIFEST).read_text())
        except FileNotFoundError:
            return None

    @contextmanager
    def locked(self, key: str, *, on_wait=None):
        """Hold the key's lock; while another process builds the same key, call on_wait() once
        and wait for it."""
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with open(locks / f"{key}.lock", "a+") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def workspace(self, key: str) -> Path:
        """A fresh private directory for building `key` (call with the key's lock held: then any
        older workspace of the key was left by a killed build and is removed)."""
        scratch = self.root / ".tmp"
        scratch.mkdir(parents=True, exist_ok=True)
        for stale in scratch.glob(f"{key}.*"):
            shutil.rmtree(stale, ignore_errors=True)
        return Path(tempfile.mkdtemp(prefix=f"{key}.", dir=scratch))

    def publish(self, *, key: str, staged: Path) -> Path:
        """Atomically move a complete build directory into place."""
        target = self.entry(key)
        if target.exists() and self.lookup(key) is None:
            shutil.rmtree(target)   # an incomplete entry someone made by hand: replace it
        os.rename(staged, target)
        return target

    def keep_failed_log(self, *, key: str, log: Path) -> Path:
        kept = self.failed_log(key)
        kept.parent.mkdir(parents=True, exist_ok=True)
        staged = kept.with_suffix(".log.tmp")
        shutil.copyfile(log, staged)
        os.replace(staged, kept)
        return kept
