"""Remembered file digests, keyed by what stat() says (as git's index does), so hashing an
unchanged source tree again reads no file contents: a src: cache hit stays well under a second.

An entry is trusted only while size, mtime, ctime, inode and mode are all unchanged, and is
stored only for files last changed more than RACY_S before hashing (a file rewritten within
the same clock tick as its hashing could otherwise keep a stale digest).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

RACY_S = 2.0
UNKNOWN = object()


def _signature(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_mode]


class DigestMemo:
    def __init__(self, *, store: Path | None, directory: Path):
        self.path = None
        if store is not None:
            name = hashlib.sha256(str(directory).encode()).hexdigest()[:24]
            self.path = store / f"{name}.json"
        self.entries: dict[str, list] = {}
        self.fresh: dict[str, list] = {}
        self.changed = False
        self.now_ns = time.time_ns()
        if self.path is not None:
            try:
                loaded = json.loads(self.path.read_text())
                if isinstance(loaded, dict) and loaded.get("directory") == str(directory):
                    self.entries = loaded.get("files", {})
            except (OSError, ValueError):
                self.entries = {}
        self.directory = directory

    def get(self, name: str, info: os.stat_result):
        """The remembered digest (None: a skipped binary), or UNKNOWN."""
        entry = self.entries.get(name)
        if entry is not None and entry[0] == _signature(info):
            self.fresh[name] = entry
            return entry[1]
        return UNKNOWN

    def put(self, name: str, info: os.stat_result, digest: str | None) -> None:
        changed_ns = max(info.st_mtime_ns, info.st_ctime_ns)
        if self.now_ns - changed_ns > RACY_S * 1e9:
            self.fresh[name] = [_signature(info), digest]
            self.changed = True

    def save(self) -> None:
        """Keep the entries seen in this scan (files gone from the tree are forgotten)."""
        if self.path is None or (not self.changed and len(self.fresh) == len(self.entries)):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staged = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        staged.write_text(json.dumps({"directory": str(self.directory), "files": self.fresh}))
        os.replace(staged, self.path)
