"""`1key-geo-60M-elements` as a loadable dataset: plan, preload, validate."""

from __future__ import annotations

from typing import Iterator

import redis

from . import geo
from .base import Dataset, DatasetError, DatasetPlan, Progress, check_scale
from .bulkload import BulkLoadError, LoadStats, bulk_load
from .places import load_places
from .resp import Batch, geoadd_batches

DEFAULT_SEED = 1
MEMBERS_PER_COMMAND = 1000
GENERATION_CHUNK = 1 << 16


class GeoDataset(Dataset):
    """One GEO key `key` with round(60,841,557 * scale) OSM-like points (see geo.py)."""

    name = geo.DATASET_NAME

    def __init__(self, model: geo.GeoModel = geo.DEFAULT_MODEL) -> None:
        self.model = model
        self.last_stats: LoadStats | None = None

    def plan(self, scale: float, *, seed: int | None = None) -> DatasetPlan:
        scale = check_scale(scale)
        seed = DEFAULT_SEED if seed is None else int(seed)
        parts = geo.model_fingerprint_parts(self.model, load_places())
        return DatasetPlan(
            name=self.name,
            scale=scale,
            key_count=1,
            element_count=geo.point_count(scale),
            seed=seed,
            definition=";".join(f"{k}={v}" for k, v in sorted(parts.items())),
        )

    def batches(self, plan: DatasetPlan, *, members_per_command: int) -> Iterator[Batch]:
        generator = geo.GeoPointGenerator(
            count=plan.element_count, seed=plan.seed, model=self.model
        )
        for chunk in generator.chunks(GENERATION_CHUNK):
            yield from geoadd_batches(
                key=geo.KEY_NAME,
                first_member=chunk.first_member,
                lon_e6=chunk.lon_e6,
                lat_e6=chunk.lat_e6,
                members_per_command=members_per_command,
            )

    def load(
        self,
        *,
        host: str,
        port: int,
        scale: float,
        progress: Progress | None = None,
        seed: int | None = None,
        connections: int = 2,
        members_per_command: int = MEMBERS_PER_COMMAND,
        replace: bool = False,
    ) -> DatasetPlan:
        """Preload the key; refuses (DatasetError) if `key` exists unless replace=True."""
        plan = self.plan(scale, seed=seed)
        client = redis.Redis(host=host, port=port, socket_timeout=600)
        try:
            where = f"{host}:{port}"
            try:
                exists = client.exists(geo.KEY_NAME)
            except redis.RedisError as exc:
                raise DatasetError(f"{self.name}: cannot talk to the server at {where}: {exc}")
            if exists and not replace:
                raise DatasetError(
                    f"{self.name}: key {geo.KEY_NAME!r} already exists on {where}; "
                    "load into an empty database (or pass replace=True)"
                )
            if exists:
                client.delete(geo.KEY_NAME)
            try:
                self.last_stats = bulk_load(
                    self.batches(plan, members_per_command=members_per_command),
                    host=host,
                    port=port,
                    total_elements=plan.element_count,
                    connections=connections,
                    progress=progress,
                )
            except BulkLoadError as exc:
                raise DatasetError(f"{self.name} (scale {plan.scale:g}) on {where}: {exc}") from exc
            self.validate(client=client, plan=plan, where=where)
        finally:
            client.close()
        return plan

    def validate(self, *, client: redis.Redis, plan: DatasetPlan, where: str) -> None:
        key_type = client.type(geo.KEY_NAME).decode()
        found = client.zcard(geo.KEY_NAME)
        if key_type != "zset" or found != plan.element_count:
            raise DatasetError(
                f"{self.name} on {where}: expected key {geo.KEY_NAME!r} (zset) with "
                f"{plan.element_count:,} members, found type {key_type} with {found:,}"
            )
