"""The one way to format a number for people: counts, milliseconds, bytes, medians."""

from __future__ import annotations


def format_count(value: float | None) -> str:
    """12.35k, 1.20M; a dash for nothing."""
    if value is None:
        return "–"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{unit}"
    return f"{value:.0f}"


def format_ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def format_bytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def format_number(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"
