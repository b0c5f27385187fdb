"""Simulated histories for the change-point tests and experiments/changepoint/simulate.py.

Noise model (log scale): a run = level + session offset + run noise. Run noise: normal with sd
`within`, or ("heavy") Student t with 4 degrees of freedom scaled to the same sd. Session offsets
(drift between sessions on a shared machine): AR(1) with correlation `phi` and marginal sd
`between` (phi 0: independent sessions).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Scenario:
    name: str
    sessions: int
    runs: int
    steps: dict[int, float] = field(default_factory=dict)  # first session of a new level -> factor
    within: float = 0.03
    between: float = 0.0
    phi: float = 0.0
    heavy: bool = False


def simulate(s: Scenario, seed: int, *, level: float = 3000.0) -> list[np.ndarray]:
    """The runs of each session, oldest first."""
    rng = np.random.default_rng(seed)
    offsets = np.empty(s.sessions)
    offsets[0] = rng.normal(0, s.between)
    for i in range(1, s.sessions):
        offsets[i] = s.phi * offsets[i - 1] + rng.normal(0, s.between * np.sqrt(1 - s.phi ** 2))
    levels = np.zeros(s.sessions)
    for index, factor in s.steps.items():
        levels[index:] += np.log(factor)
    if s.heavy:
        noise = rng.standard_t(4, (s.sessions, s.runs)) * s.within / np.sqrt(2.0)
    else:
        noise = rng.normal(0, s.within, (s.sessions, s.runs))
    return [level * np.exp(levels[i] + offsets[i] + noise[i]) for i in range(s.sessions)]
