"""`--json`: every run (run, calibrate), or the comparisons and every run (compare)."""

from __future__ import annotations

from pathlib import Path

from redline.analysis.comparison import TestComparison
from redline.core.run import Run
from redline.output.files import write_json
from redline.output.verdicts import sorted_comparisons


def write_runs_json(path: Path, records: list[Run]) -> None:
    write_json(path, [r.to_json() for r in records])


def write_comparison_json(path: Path, comparisons: list[TestComparison], records: list[Run]) -> None:
    write_json(path, {"comparisons": [c.as_json() for c in sorted_comparisons(comparisons)],
                      "runs": [r.to_json() for r in records]})
