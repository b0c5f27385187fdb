"""The one check of the files a command will write (--json, --markdown, …), made before anything
starts: a path that cannot be written is a usage error now, not a traceback after an hour of
measuring."""

from __future__ import annotations

import json
import os
from pathlib import Path

from redline.core.errors import RunError, UsageError


def check_output_paths(paths: dict[str, Path | None]) -> None:
    """Each given output path ({flag: path}) can be opened for writing, and no two flags name
    the same file. Nothing is truncated: an existing file is opened for appending, a new one is
    created and removed again (so a read-only filesystem or a missing directory shows here,
    whoever runs redline)."""
    seen: dict[Path, str] = {}
    for flag, path in paths.items():
        if path is None:
            continue
        if str(path) == "":
            raise UsageError(f"{flag}: an empty path")
        resolved = path.resolve()
        if resolved in seen:
            raise UsageError(f"{flag} {path}: the same file as {seen[resolved]}")
        seen[resolved] = flag
        _check_writable(path, flag)


def _check_writable(path: Path, flag: str) -> None:
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror})") from None
    if not existed:
        path.unlink(missing_ok=True)


def write_output(path: Path, text: str) -> None:
    """Writes a result file whole or not at all (a temporary file beside it, then renamed), so a
    full disk leaves no half file; a failure is one line (exit 1) — the runs are already stored."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise RunError(f"cannot write {path}: {exc.strerror or exc}; the runs are stored and can be "
                       "read again with redline history or the store") from None


def write_json(path: Path, document) -> None:
    write_output(path, json.dumps(document, indent=2) + "\n")
