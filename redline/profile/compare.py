"""Which symbols' self share moved most between two profiles (baseline A, comparison B)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from redline.core.errors import UsageError
from redline.profile.folding import read_folded
from redline.profile.symbols import symbol_shares


class _HasFolded(Protocol):
    folded_path: Path


def _self_shares(profile: _HasFolded | Path | str) -> dict[str, float]:
    path = getattr(profile, "folded_path", profile)
    if not isinstance(path, (str, Path)):
        raise UsageError(f"expected a ProfileResult or a folded file path, got {type(profile).__name__}")
    return symbol_shares(read_folded(Path(path))).self_share


def moved_symbols(baseline: _HasFolded | Path, comparison: _HasFolded | Path, top: int = 5) -> list[dict]:
    """The `top` symbols whose self share changed most (either way), largest change first:
    [{"symbol", "baseline_share", "comparison_share"}], shares 0..1 (0 when absent)."""
    if top < 1:
        raise UsageError(f"moved_symbols: top must be at least 1, got {top}")
    base, comp = _self_shares(baseline), _self_shares(comparison)
    symbols = set(base) | set(comp)
    ranked = sorted(symbols, key=lambda s: (-abs(comp.get(s, 0.0) - base.get(s, 0.0)), s))
    return [{"symbol": s, "baseline_share": base.get(s, 0.0), "comparison_share": comp.get(s, 0.0)}
            for s in ranked[:top] if comp.get(s, 0.0) != base.get(s, 0.0)]


def describe_move(move: dict, quote=str) -> str:
    """'geohashGetDistanceIfInRectangle 48% → 12%' for terminal and markdown output; `quote` the
    symbol where it is untrusted text in markdown (a profile an agent sent)."""
    return f"{quote(move['symbol'])} {move['baseline_share']:.0%} → {move['comparison_share']:.0%}"
