"""Where redline keeps what it can make again (builds, snapshots, generated places, tools):
$REDLINE_CACHE, else $XDG_CACHE_HOME/redline, else ~/.cache/redline."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    configured = os.environ.get("REDLINE_CACHE")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "redline"
