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


def format_duration(seconds: float | None) -> str:
    """1h05m, 3m20s, 45s; a question mark for an unknown time."""
    if seconds is None:
        return "?"
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
