"""Errors and findings produced while reading test-suite files."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SEVERITIES = ("error", "warning", "ignored")


def _location(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


class SpecError(Exception):
    """A fatal problem: the file cannot be turned into a test. str(e) == "path:line: message"."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path = Path(path)
        self.line = line
        self.message = message
        super().__init__(f"{_location(self.path, line)}: {message}")


@dataclass(frozen=True)
class Diagnostic:
    """A non-fatal finding about one place in a file."""

    path: Path
    line: int | None
    severity: str  # "error" | "warning" | "ignored"
    message: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}; expected one of {SEVERITIES}")

    @property
    def location(self) -> str:
        return _location(self.path, self.line)

    def __str__(self) -> str:
        return f"{self.location}: {self.severity}: {self.message}"
