"""The one session document: what a stored session was and what it gave, as every output and
exporter reads it (`Store.load_session`).

A session is one invocation (run, compare, calibrate, bisect, a fleet work item, a gate): its
argv and machine, its runs in the order they ran (interleaved A B B A for compare), the verdicts
it stored (`comparisons`, the `TestComparison`s that compare printed), and its named documents
(`documents`: a bisection's endpoints, steps and culprit under "bisection", a calibration's noise
floors under "noise_floors", …), each a JSON object the command that made it wrote."""

from __future__ import annotations

from dataclasses import dataclass, field

from redline.analysis.comparison import TestComparison
from redline.core.run import Run

SESSION_KINDS = ("run", "compare", "calibrate", "bisect", "fleet", "gate")


@dataclass
class SessionDocument:
    session_id: int
    kind: str                        # one of SESSION_KINDS
    argv: list[str]
    machine: dict
    host: str
    started_at: float
    finished_at: float | None
    status: str                      # running | finished | interrupted
    runs: list[Run] = field(default_factory=list)
    comparisons: list[TestComparison] = field(default_factory=list)
    documents: dict[str, dict] = field(default_factory=dict)

    @property
    def measured(self) -> list[Run]:
        return [r for r in self.runs if r.purpose == "measure"]

    @property
    def profiled(self) -> list[Run]:
        return [r for r in self.runs if r.purpose == "profile"]

    @property
    def bisection(self) -> dict | None:
        return self.documents.get("bisection")

    def side_label(self, side: str) -> str | None:
        """The target label of a side ('baseline' / 'comparison'), as compare named it."""
        return next((r.target for r in self.runs if r.side == side), None)
