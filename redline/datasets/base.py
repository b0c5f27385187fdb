"""What every dataset generator provides: a plan (what would be loaded) and a loader."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Callable

Progress = Callable[[int, int], None]

MAX_SCALE = 10.0


class DatasetError(Exception):
    """A dataset could not be loaded or the server's data does not match its plan."""


@dataclass(frozen=True)
class DatasetPlan:
    """What a dataset at a given scale consists of; recorded with every result.

    `definition` identifies the generator and its constants (version, model digest, source
    data) so that the fingerprint changes whenever the generated data would.
    """

    name: str
    scale: float
    key_count: int
    element_count: int
    seed: int
    definition: str = ""

    def fingerprint(self) -> str:
        """Stable hash of the definition (same plan -> same data -> same snapshot)."""
        text = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def check_scale(scale: float) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError(f"dataset scale must be a number, got {scale!r}")
    scale = float(scale)
    if not math.isfinite(scale) or not 0.0 < scale <= MAX_SCALE:
        raise ValueError(f"dataset scale must be in (0, {MAX_SCALE:g}], got {scale!r}")
    return scale


class Dataset:
    """Base class of the generators in the registry (see redline.datasets.lookup)."""

    name: str = ""

    def plan(self, scale: float, *, seed: int | None = None) -> DatasetPlan:
        raise NotImplementedError

    def load(
        self,
        *,
        host: str,
        port: int,
        scale: float,
        progress: Progress | None = None,
        seed: int | None = None,
    ) -> DatasetPlan:
        raise NotImplementedError
