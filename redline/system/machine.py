"""Facts about this machine and this redline, recorded with every run so it can be trusted later."""

from __future__ import annotations

import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

import redline


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def cpu_governor() -> str | None:
    return _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")


@lru_cache(maxsize=1)
def redline_commit() -> str | None:
    """The git commit of the redline checkout this code runs from, with '+dirty' if modified."""
    root = Path(redline.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def facts() -> dict:
    """Everything about the environment that can move a benchmark number."""
    load1, load5, load15 = os.getloadavg()
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cpus": sorted(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "load_avg": [round(load1, 2), round(load5, 2), round(load15, 2)],
        "cpu_governor": cpu_governor(),
        "hostname": platform.node(),
        "python": platform.python_version(),
        "redline_version": redline.__version__,
        "redline_commit": redline_commit(),
    }
