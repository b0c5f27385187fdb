"""Where redline finds the external programs profiling needs: perf, inferno, chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from redline.core.errors import RunError

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_BIN = REPO_ROOT / ".tools" / "bin"


def find_perf() -> str:
    perf = shutil.which("perf")
    if perf is None:
        raise RunError("perf is not installed (Debian package linux-perf); profiling needs it")
    return perf


def find_inferno(name: str) -> Path:
    """An inferno command (inferno-flamegraph, inferno-diff-folded): <repo>/.tools/bin first
    (where setup.sh installs it), then $REDLINE_TOOLS_BIN, then PATH."""
    candidates = [TOOLS_BIN / name]
    if os.environ.get("REDLINE_TOOLS_BIN"):
        candidates.insert(0, Path(os.environ["REDLINE_TOOLS_BIN"]) / name)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise RunError(f"{name} not found in {TOOLS_BIN} or on PATH; install it with "
                   f"'cargo install inferno --locked --root {REPO_ROOT / '.tools'}' (setup.sh does this)")
