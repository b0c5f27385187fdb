"""Redis' GEOSEARCH membership tests, re-done in numpy.

Used to calibrate and describe generated geo data without a server. The formulas follow the
server's own (src/geohash_helper.c): haversine on a sphere of radius 6372797.560856 m; BYBOX
compares the latitude distance with height/2 and the east-west distance, measured along the
point's own latitude, with width/2. (The server tests the 52-bit geohash cell centre of each
point, which moves a point by well under a metre: counts agree except for points right on the
border.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EARTH_RADIUS_M = 6372797.560856
KM_PER_DEGREE = EARTH_RADIUS_M * np.pi / 180.0 / 1000.0  # along a meridian
MAX_LATITUDE = 85.05112878  # the server refuses points beyond this


@dataclass(frozen=True)
class Box:
    lon: float
    lat: float
    width_km: float
    height_km: float


@dataclass(frozen=True)
class Circle:
    lon: float
    lat: float
    radius_km: float


def haversine_m(lon1, lat1, lon2, lat2) -> np.ndarray:
    lon1r, lat1r = np.radians(lon1), np.radians(lat1)
    lon2r, lat2r = np.radians(lon2), np.radians(lat2)
    u = np.sin((lat2r - lat1r) / 2.0)
    v = np.sin((lon2r - lon1r) / 2.0)
    a = u * u + np.cos(lat1r) * np.cos(lat2r) * v * v
    return 2.0 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def in_box(lon: np.ndarray, lat: np.ndarray, box: Box) -> np.ndarray:
    """Boolean mask: which points GEOSEARCH ... FROMLONLAT BYBOX would return."""
    lat_distance = EARTH_RADIUS_M * np.abs(np.radians(lat) - np.radians(box.lat))
    lon_distance = haversine_m(box.lon, lat, lon, lat)
    return (lat_distance <= box.height_km * 500.0) & (lon_distance <= box.width_km * 500.0)


def in_circle(lon: np.ndarray, lat: np.ndarray, circle: Circle) -> np.ndarray:
    """Boolean mask: which points GEOSEARCH ... FROMLONLAT BYRADIUS would return."""
    return haversine_m(circle.lon, circle.lat, lon, lat) <= circle.radius_km * 1000.0
