"""Deterministic OpenStreetMap-like geo points for the upstream dataset `1key-geo-60M-elements`.

The upstream dataset is one GEO key named `key` holding 60,841,557 OpenStreetMap points; the
suites query it with GEOSEARCH (FROMLONLAT 7.0 55.0, BYBOX 200x200 km and BYRADIUS 200 km),
GEODIST key 1 2, GEOPOS key 1 and GEOHASH key 1. Its RDB lives on S3, out of reach here, so
we generate an equivalent key:

* members are the decimal numbers "1", "2", ... "N" (unique; "1" and "2" exist, as the
  GEODIST/GEOPOS/GEOHASH suites need);
* points are a mixture of three parts (see `GeoModel`):
  - settlements: a GeoNames place (>= 1,000 inhabitants) drawn with probability
    proportional to population**0.7 times a continent weight, then a Gaussian offset whose
    width grows with the population (a core plus a wider halo for suburbs);
  - countryside: a place drawn by continent weight alone (every village counts the same),
    with a wide Gaussian offset, so land between towns is covered where places are dense;
  - background: uniform over the sphere (up to the server's +-85.05 degree latitude limit);
* continent weights make Europe dense and the rest sparser, as in OSM; the Europe weight is
  the one calibrated constant (scripts/calibrate_geo.py) so that the BYBOX query returns
  about 11,000 * scale points.

Coordinates are kept as integer micro-degrees (0.11 m at the equator, finer than the
server's 52-bit geohash), so a point's text form is exact and identical on every machine.

Determinism: points are drawn in fixed blocks of BLOCK_SIZE, each from its own numpy
Generator seeded with (seed, block index); the data for a smaller count is a prefix of the
data for a larger one. Any chunk size the caller asks for is cut out of
the same block stream, so the data never depends on it; memory is bounded by the chunk size.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Iterator

import numpy as np

from .geomath import KM_PER_DEGREE, MAX_LATITUDE, Box, Circle
from .places import CONTINENTS, Places, load_places

DATASET_NAME = "1key-geo-60M-elements"
FULL_SCALE_POINTS = 60_841_557
KEY_NAME = "key"
BLOCK_SIZE = 1 << 16
GENERATOR_VERSION = "geo-osm-like/1"

# The upstream suites' queries (memtier_benchmark-1key-geo-60M-elements-*.yml).
UPSTREAM_BOX = Box(lon=7.0, lat=55.0, width_km=200.0, height_km=200.0)
UPSTREAM_CIRCLE = Circle(lon=7.0, lat=55.0, radius_km=200.0)
UPSTREAM_BOX_RESULTS_AT_FULL_SCALE = 11_000  # "a very large (~11K) number of elements"
UPSTREAM_CIRCLE_RESULTS_AT_FULL_SCALE = 100_000  # "(~100K) number of elements"

# Calibrated by scripts/calibrate_geo.py (see docs/datasets.md): the continent weight of
# Europe (North America = 1) and the width of the countryside clouds that make, in
# expectation at full scale, UPSTREAM_BOX hold 11,000 points and UPSTREAM_CIRCLE 100,000.
CALIBRATED_EUROPE_WEIGHT = 0.1761
CALIBRATED_COUNTRYSIDE_SIGMA_KM = 65.318


@dataclass(frozen=True)
class GeoModel:
    """The knobs of the point distribution (all part of the dataset fingerprint)."""

    settlement_share: float = 0.60
    countryside_share: float = 0.35
    background_share: float = 0.05
    population_exponent: float = 0.7
    core_sigma_km: float = 1.2  # for a place of 10,000 inhabitants
    sigma_population_exponent: float = 0.35
    halo_share: float = 0.3
    halo_factor: float = 4.0
    countryside_sigma_km: float = CALIBRATED_COUNTRYSIDE_SIGMA_KM
    europe_weight: float = CALIBRATED_EUROPE_WEIGHT
    # continent weights other than Europe, in CONTINENTS order after "EU"
    other_continent_weights: tuple[tuple[str, float], ...] = field(
        default=(("NA", 0.35), ("SA", 0.15), ("AS", 0.12), ("AF", 0.1), ("OC", 0.3), ("AN", 0.05))
    )

    def __post_init__(self) -> None:
        shares = (self.settlement_share, self.countryside_share, self.background_share)
        if min(shares) < 0 or abs(sum(shares) - 1.0) > 1e-9:
            raise ValueError(f"GeoModel shares must be >= 0 and sum to 1, got {shares}")

    def continent_weights(self) -> np.ndarray:
        """Weight per CONTINENTS index, plus a last entry for places of unknown continent."""
        table = dict(self.other_continent_weights)
        table["EU"] = self.europe_weight
        return np.array([table.get(code, 0.0) for code in CONTINENTS] + [0.0])

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_MODEL = GeoModel()


@dataclass(frozen=True)
class GeoChunk:
    """Consecutive points: member names first_member, first_member + 1, ..."""

    first_member: int
    lon_e6: np.ndarray  # int64 micro-degrees
    lat_e6: np.ndarray

    def __len__(self) -> int:
        return int(self.lon_e6.shape[0])

    @property
    def lon(self) -> np.ndarray:
        return self.lon_e6 / 1e6

    @property
    def lat(self) -> np.ndarray:
        return self.lat_e6 / 1e6

    def members(self) -> list[str]:
        return [str(i) for i in range(self.first_member, self.first_member + len(self))]


@dataclass(frozen=True)
class _PlaceTables:
    lon: np.ndarray
    lat: np.ndarray
    cos_lat: np.ndarray
    core_sigma_km: np.ndarray
    settlement_cdf: np.ndarray  # normalised to end at 1
    countryside_cdf: np.ndarray


def _place_tables(places: Places, model: GeoModel) -> _PlaceTables:
    weights = model.continent_weights()[places.continent.astype(np.int64)]  # -1 -> last
    settlement = weights * places.population**model.population_exponent
    countryside = weights.copy()
    if settlement.sum() <= 0 or countryside.sum() <= 0:
        raise ValueError("GeoModel gives every place weight 0")
    return _PlaceTables(
        lon=places.lon,
        lat=places.lat,
        cos_lat=np.maximum(np.cos(np.radians(places.lat)), 0.02),
        core_sigma_km=model.core_sigma_km
        * (places.population / 1e4) ** model.sigma_population_exponent,
        settlement_cdf=np.cumsum(settlement) / settlement.sum(),
        countryside_cdf=np.cumsum(countryside) / countryside.sum(),
    )


def _pick(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    return np.minimum(np.searchsorted(cdf, u, side="right"), cdf.shape[0] - 1)


class GeoPointGenerator:
    """Generates `count` points for `seed`, block by block."""

    def __init__(
        self,
        *,
        count: int,
        seed: int,
        model: GeoModel = DEFAULT_MODEL,
        places: Places | None = None,
    ) -> None:
        if count < 0:
            raise ValueError(f"point count must be >= 0, got {count}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.count = count
        self.seed = seed
        self.model = model
        self.places = places if places is not None else load_places()
        self._tables = _place_tables(self.places, model)

    @property
    def block_count(self) -> int:
        return (self.count + BLOCK_SIZE - 1) // BLOCK_SIZE

    def block(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Micro-degree (lon, lat) arrays of block `index`; depends only on (seed, index)."""
        if not 0 <= index < self.block_count:
            raise IndexError(f"block {index} out of range 0..{self.block_count - 1}")
        keep = min(BLOCK_SIZE, self.count - index * BLOCK_SIZE)
        n = BLOCK_SIZE  # always draw a full block: a smaller count gives a prefix of the data
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence(entropy=self.seed, spawn_key=(index,)))
        )
        # A fixed set of draws per point, whatever part it ends up in.
        part_u = rng.random(n)
        place_u = rng.random(n)
        halo_u = rng.random(n)
        normal = rng.standard_normal((2, n))
        sphere_u = rng.random((2, n))

        m, t = self.model, self._tables
        settlement = part_u < m.settlement_share
        countryside = ~settlement & (part_u < m.settlement_share + m.countryside_share)
        background = ~settlement & ~countryside

        place = np.where(
            settlement, _pick(t.settlement_cdf, place_u), _pick(t.countryside_cdf, place_u)
        )
        sigma = np.where(
            settlement,
            t.core_sigma_km[place] * np.where(halo_u < m.halo_share, m.halo_factor, 1.0),
            m.countryside_sigma_km,
        )
        lat = t.lat[place] + normal[1] * sigma / KM_PER_DEGREE
        lon = t.lon[place] + normal[0] * sigma / (KM_PER_DEGREE * t.cos_lat[place])

        max_sin = np.sin(np.radians(MAX_LATITUDE))
        lon = np.where(background, sphere_u[0] * 360.0 - 180.0, lon)
        lat = np.where(
            background, np.degrees(np.arcsin((2.0 * sphere_u[1] - 1.0) * max_sin)), lat
        )

        lat = np.clip(lat, -MAX_LATITUDE, MAX_LATITUDE)
        lon = np.remainder(lon + 180.0, 360.0) - 180.0
        lon_e6 = np.rint(lon[:keep] * 1e6).astype(np.int64)
        lat_e6 = np.rint(lat[:keep] * 1e6).astype(np.int64)
        return lon_e6, lat_e6

    def chunks(self, chunk_size: int = 1 << 20) -> Iterator[GeoChunk]:
        """All points in order, `chunk_size` at a time (the last chunk may be shorter)."""
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be > 0, got {chunk_size}")
        pending_lon: list[np.ndarray] = []
        pending_lat: list[np.ndarray] = []
        pending = 0
        next_member = 1
        for index in range(self.block_count):
            lon_e6, lat_e6 = self.block(index)
            pending_lon.append(lon_e6)
            pending_lat.append(lat_e6)
            pending += lon_e6.shape[0]
            if pending < chunk_size and index + 1 < self.block_count:
                continue
            lon_all = np.concatenate(pending_lon)
            lat_all = np.concatenate(pending_lat)
            full = pending if index + 1 == self.block_count else pending - pending % chunk_size
            for start in range(0, full, chunk_size):
                stop = min(start + chunk_size, full)
                yield GeoChunk(next_member, lon_all[start:stop], lat_all[start:stop])
                next_member += stop - start
            pending_lon, pending_lat = [lon_all[full:]], [lat_all[full:]]
            pending -= full


def point_count(scale: float) -> int:
    """Points at `scale`: round(60,841,557 * scale), at least 1."""
    return max(1, round(FULL_SCALE_POINTS * scale))


def model_fingerprint_parts(model: GeoModel, places: Places) -> dict[str, str]:
    return {"generator": GENERATOR_VERSION, "model": model.digest(), "places": places.source}
