"""Deterministic datasets for the upstream suites' `dbconfig.dataset_name`, with fast preload.

    from redline import datasets
    dataset = datasets.lookup(test.db.dataset_name)     # None: no generator for that name
    if dataset is not None:
        plan = dataset.load(host="127.0.0.1", port=port, scale=0.01, progress=bar)

`plan` (a DatasetPlan: name, scale, key and element counts, seed) is recorded with the result;
`plan.fingerprint()` identifies the data for a snapshot cache.
"""

from __future__ import annotations

from .base import Dataset, DatasetError, DatasetPlan, Progress
from .bulkload import BulkLoadError, LoadStats
from .geo_dataset import GeoDataset

_REGISTRY: dict[str, Dataset] = {}


def register(dataset: Dataset) -> None:
    if not dataset.name:
        raise ValueError("a dataset needs a name")
    if dataset.name in _REGISTRY:
        raise ValueError(f"dataset {dataset.name!r} is registered twice")
    _REGISTRY[dataset.name] = dataset


def lookup(dataset_name: str) -> Dataset | None:
    """The generator for an upstream `dataset_name`, or None if we have none."""
    return _REGISTRY.get(dataset_name)


def names() -> list[str]:
    """Every dataset name we can generate."""
    return sorted(_REGISTRY)


register(GeoDataset())

__all__ = [
    "BulkLoadError",
    "Dataset",
    "DatasetError",
    "DatasetPlan",
    "GeoDataset",
    "LoadStats",
    "Progress",
    "lookup",
    "names",
    "register",
]
