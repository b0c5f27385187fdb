"""Symbol shares from folded stacks: self (leaf) time and total (inclusive) time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SymbolShares:
    samples: int
    self_share: dict[str, float]    # share of samples where the symbol is the leaf
    total_share: dict[str, float]   # share of samples where the symbol is anywhere on the stack

    def top_self(self, count: int = 20) -> list[tuple[str, float]]:
        return _top(self.self_share, count)

    def top_total(self, count: int = 20) -> list[tuple[str, float]]:
        return _top(self.total_share, count)


def _top(shares: Mapping[str, float], count: int) -> list[tuple[str, float]]:
    return sorted(shares.items(), key=lambda item: (-item[1], item[0]))[:count]


def symbol_shares(stacks: Mapping[str, int]) -> SymbolShares:
    """Self and total shares; a recursive symbol counts once per stack in its total."""
    samples = sum(stacks.values())
    self_counts: Counter[str] = Counter()
    total_counts: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")
        self_counts[frames[-1]] += count
        for symbol in set(frames):
            total_counts[symbol] += count
    if samples == 0:
        return SymbolShares(samples=0, self_share={}, total_share={})
    return SymbolShares(samples=samples,
                        self_share={s: c / samples for s, c in self_counts.items()},
                        total_share={s: c / samples for s, c in total_counts.items()})
