"""The one check of the files a command will write (--json, --markdown, …), made before anything
starts: a path that cannot be written is a usage error now, not a traceback after an hour of
measuring."""

from __future__ import annotations

from pathlib import Path

from redline.errors import UsageError


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
