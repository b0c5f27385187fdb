"""What one run gave: its identity, status, metrics (every name in redline.metrics), flags, error,
profile and how its server state was reached — as the outputs and the comparison read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from redline import metrics


@dataclass
class RunRecord:
    run_id: int
    test: str
    target: str
    side: str | None
    run_index: int
    status: str
    metrics: dict[str, float | None] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    error: str | None = None
    purpose: str = "measure"             # or "profile": never part of a metric
    profile: dict | None = None
    topology: str = "oss-standalone"
    state: dict | None = None            # how the run's server state was reached (redline.state)

    @property
    def key(self) -> str:
        """What a result is a result of: the test, and its topology unless standalone."""
        return self.test if self.topology == "oss-standalone" else f"{self.test}@{self.topology}"

    def as_json(self) -> dict:
        out = {"test": self.test, "target": self.target, "run_index": self.run_index, "status": self.status,
               "topology": self.topology}
        if self.side:
            out["side"] = self.side
        if self.purpose != "measure":
            out["purpose"] = self.purpose
            out["profile"] = self.profile
        out.update({name: self.metrics.get(name) for name in metrics.NAMES})
        out["flags"] = self.flags
        if self.error:
            out["error"] = self.error
        if self.state:
            out["state"] = self.state
        return out
