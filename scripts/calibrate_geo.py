#!/usr/bin/env python3
"""Calibrate the generated `1key-geo-60M-elements` data against the upstream BYBOX query.

The upstream suite says `GEOSEARCH key FROMLONLAT 7.0 55.0 BYBOX 200 200 KM` returns about
11,000 of the 60,841,557 points. This script:

1. computes the *expected* fraction of points inside that box for the model in
   redline/datasets/geo.py, analytically (per place: Gaussian mass inside the box on the
   local tangent plane; background: the box's share of the sphere's area), and solves for the
   Europe continent weight that makes the expectation 11,000 at full scale (bisection);
2. with --sample SCALE, generates the data at that scale and counts, with the server's own
   formulas (geomath.py), what the upstream queries return (BYBOX and BYRADIUS 200 km), next
   to the target, plus where the points are (share per continent-like region).

The solved weight is printed; geo.CALIBRATED_EUROPE_WEIGHT holds the value in use.

    .venv/bin/python scripts/calibrate_geo.py                 # solve, using the analytic model
    .venv/bin/python scripts/calibrate_geo.py --sample 0.1    # and check by generating 6.1M points
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redline.datasets import geo  # noqa: E402
from redline.datasets.geomath import (  # noqa: E402
    EARTH_RADIUS_M,
    KM_PER_DEGREE,
    MAX_LATITUDE,
    Box,
    Circle,
    haversine_m,
    in_box,
    in_circle,
)
from redline.datasets.places import load_places  # noqa: E402


QUASI_MC_OFFSETS = np.random.Generator(np.random.PCG64(12345)).standard_normal((2, 512))
NEAR_KM = 650.0


def _background_fraction(region: Box | Circle) -> float:
    """Share of the sphere (|lat| <= MAX_LATITUDE) inside the region."""
    band = 2.0 * np.sin(np.radians(MAX_LATITUDE))
    if isinstance(region, Circle):
        return float((1.0 - np.cos(region.radius_km * 1000.0 / EARTH_RADIUS_M)) / band)
    half_lat = region.height_km / 2.0 / KM_PER_DEGREE
    lat = np.linspace(region.lat - half_lat, region.lat + half_lat, 20001)
    half_m = region.width_km * 500.0
    s = np.sin(half_m / (2.0 * EARTH_RADIUS_M)) / np.cos(np.radians(lat))
    lon_width = 2.0 * np.degrees(2.0 * np.arcsin(np.minimum(s, 1.0)))
    strip = lon_width / 360.0 * np.cos(np.radians(lat))
    integral = float(np.sum((strip[1:] + strip[:-1]) / 2.0 * np.diff(np.radians(lat))))
    return integral / band


def _contains(region: Box | Circle, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    return in_circle(lon, lat, region) if isinstance(region, Circle) else in_box(lon, lat, region)


@dataclass
class PlaceMasses:
    """Per place near a region: the share of its Gaussian cloud inside the region."""

    near: np.ndarray  # bool mask over all places
    core: np.ndarray
    halo: np.ndarray
    countryside: np.ndarray
    background: float


_SETTLEMENT_CACHE: dict = {}


def place_masses(model: geo.GeoModel, region: Box | Circle) -> PlaceMasses:
    places = load_places()
    near = haversine_m(region.lon, region.lat, places.lon, places.lat) < NEAR_KM * 1000.0
    lon, lat = places.lon[near][:, None], places.lat[near][:, None]
    cos_lat = np.maximum(np.cos(np.radians(lat)), 0.02)
    core = model.core_sigma_km * (places.population[near] / 1e4) ** model.sigma_population_exponent

    def mass(sigma_km: np.ndarray) -> np.ndarray:
        sigma = np.broadcast_to(np.asarray(sigma_km, dtype=float), (lon.shape[0],))[:, None]
        p_lat = np.clip(lat + QUASI_MC_OFFSETS[1] * sigma / KM_PER_DEGREE, -90, 90)
        p_lon = lon + QUASI_MC_OFFSETS[0] * sigma / (KM_PER_DEGREE * cos_lat)
        return _contains(region, p_lon, p_lat).mean(axis=1)

    # Settlement clouds do not depend on the knobs being solved: computed once per region.
    key = (region, model.core_sigma_km, model.sigma_population_exponent, model.halo_factor)
    if key not in _SETTLEMENT_CACHE:
        _SETTLEMENT_CACHE[key] = (mass(core), mass(core * model.halo_factor))
    core_mass, halo_mass = _SETTLEMENT_CACHE[key]
    return PlaceMasses(
        near=near,
        core=core_mass,
        halo=halo_mass,
        countryside=mass(model.countryside_sigma_km),
        background=_background_fraction(region),
    )


def expected_fraction(model: geo.GeoModel, masses: PlaceMasses) -> float:
    """Expected share of all points inside the region the masses were computed for."""
    places = load_places()
    weights = model.continent_weights()[places.continent.astype(np.int64)]
    settlement_w = weights * places.population**model.population_exponent
    near = masses.near
    settlement = (
        settlement_w[near]
        * ((1 - model.halo_share) * masses.core + model.halo_share * masses.halo)
    ).sum() / settlement_w.sum()
    countryside = (weights[near] * masses.countryside).sum() / weights.sum()
    return float(
        model.settlement_share * settlement
        + model.countryside_share * countryside
        + model.background_share * masses.background
    )


def _bisect(
    f, lo: float, hi: float, target: float, what: str, geometric: bool, iterations: int = 40
) -> float:
    f_lo, f_hi = f(lo), f(hi)
    increasing = f_hi > f_lo
    if not min(f_lo, f_hi) <= target <= max(f_lo, f_hi):
        raise SystemExit(
            f"{what}: target {target:.4g} outside the reachable {f_lo:.4g} .. {f_hi:.4g}; "
            "change the other model constants"
        )
    for _ in range(iterations):
        mid = math.sqrt(lo * hi) if geometric else (lo + hi) / 2.0
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi) if geometric else (lo + hi) / 2.0


def solve_europe_weight(model: geo.GeoModel, box_masses: PlaceMasses, target: float) -> float:
    def f(weight: float) -> float:
        return expected_fraction(dataclasses.replace(model, europe_weight=weight), box_masses)

    return _bisect(f, 0.01, 500.0, target, "Europe weight for BYBOX", geometric=True)


def solve(model: geo.GeoModel, *, box_target: float, circle_target: float) -> geo.GeoModel:
    """Countryside width for the BYRADIUS target, with the Europe weight set for BYBOX."""

    def calibrated(sigma_km: float) -> geo.GeoModel:
        m = dataclasses.replace(model, countryside_sigma_km=sigma_km)
        weight = solve_europe_weight(m, place_masses(m, geo.UPSTREAM_BOX), box_target)
        return dataclasses.replace(m, europe_weight=weight)

    def circle_fraction(sigma_km: float) -> float:
        m = calibrated(sigma_km)
        return expected_fraction(m, place_masses(m, geo.UPSTREAM_CIRCLE))

    sigma = _bisect(circle_fraction, 15.0, 90.0, circle_target, "countryside width", False, 22)
    return calibrated(sigma)


REGIONS = {
    "Europe (lon -25..45, lat 35..72)": (-25, 45, 35, 72),
    "North America (lon -170..-50, lat 15..75)": (-170, -50, 15, 75),
    "South America (lon -90..-30, lat -56..15)": (-90, -30, -56, 15),
    "Asia (lon 45..150, lat 0..75)": (45, 150, 0, 75),
    "Africa (lon -20..52, lat -35..35)": (-20, 52, -35, 35),
}


def sample(scale: float, seed: int) -> None:
    count = geo.point_count(scale)
    generator = geo.GeoPointGenerator(count=count, seed=seed)
    started = time.perf_counter()
    box = circle = 0
    regions = dict.fromkeys(REGIONS, 0)
    for chunk in generator.chunks(1 << 20):
        lon, lat = chunk.lon, chunk.lat
        box += int(in_box(lon, lat, geo.UPSTREAM_BOX).sum())
        circle += int(in_circle(lon, lat, geo.UPSTREAM_CIRCLE).sum())
        for name, (x0, x1, y0, y1) in REGIONS.items():
            regions[name] += int(((lon >= x0) & (lon < x1) & (lat >= y0) & (lat < y1)).sum())
    elapsed = time.perf_counter() - started
    print(f"\nsampled scale {scale} (seed {seed}): {count:,} points in {elapsed:.1f} s")
    print(
        f"  GEOSEARCH key FROMLONLAT 7.0 55.0 BYBOX 200 200 KM : {box:,} "
        f"(target {geo.UPSTREAM_BOX_RESULTS_AT_FULL_SCALE * scale:,.0f}; "
        f"{box / scale:,.0f} per full scale)"
    )
    print(
        f"  GEOSEARCH key FROMLONLAT 7.0 55.0 BYRADIUS 200 KM  : {circle:,} "
        f"({circle / scale:,.0f} per full scale)"
    )
    for name, n in regions.items():
        print(f"  share in {name}: {n / count:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--sample", type=float, default=0.0, help="also generate at this scale")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    box_target = geo.UPSTREAM_BOX_RESULTS_AT_FULL_SCALE / geo.FULL_SCALE_POINTS
    circle_target = geo.UPSTREAM_CIRCLE_RESULTS_AT_FULL_SCALE / geo.FULL_SCALE_POINTS
    model = geo.DEFAULT_MODEL
    for name, region in (("BYBOX 200x200 km", geo.UPSTREAM_BOX), ("BYRADIUS 200 km", geo.UPSTREAM_CIRCLE)):
        expected = expected_fraction(model, place_masses(model, region)) * geo.FULL_SCALE_POINTS
        print(f"model in use, expected {name:17s} at full scale: {expected:,.0f}")
    started = time.perf_counter()
    solved = solve(model, box_target=box_target, circle_target=circle_target)
    print(
        f"solved in {time.perf_counter() - started:.1f} s for BYBOX "
        f"{geo.UPSTREAM_BOX_RESULTS_AT_FULL_SCALE:,} and BYRADIUS "
        f"{geo.UPSTREAM_CIRCLE_RESULTS_AT_FULL_SCALE:,}:\n"
        f"  CALIBRATED_EUROPE_WEIGHT = {solved.europe_weight:.4f}\n"
        f"  CALIBRATED_COUNTRYSIDE_SIGMA_KM = {solved.countryside_sigma_km:.3f}"
    )
    if args.sample > 0:
        sample(args.sample, args.seed)


if __name__ == "__main__":
    main()
