"""Whether two sides of a comparison measured the same server state, read from their runs' state
facts (redline.bench.state records them): the way each side reached its state (restored from
which snapshot, or prepared), the memory each held at run start, and whether each side's state
was prepared only once."""

from __future__ import annotations

import statistics

from redline.core.run import PREPARED, RESTORED

MEMORY_DIFFERENCE = 0.05       # sides whose used_memory at run start differ more than this are flagged


def _how(state: dict | None) -> str:
    if not state:
        return "not recorded"
    if state.get("origin") == RESTORED:
        return f"restored from snapshot {state.get('snapshot_key', '?')[:12]}"
    return str(state.get("origin"))


def state_refusal(states: dict[str, list[dict | None]]) -> str | None:
    """Why no verdict may be put on these sides (side name → the state facts of its runs): they
    reached their server state in different ways, or one side in more than one way. None: same."""
    ways = {side: sorted({_how(s) for s in runs}) for side, runs in states.items() if runs}
    if len({tuple(w) for w in ways.values()}) <= 1 and all(len(w) == 1 for w in ways.values()):
        return None
    told = "; ".join(f"{side}: {' and '.join(w)}" for side, w in ways.items())
    return f"the sides reached their server state differently ({told}): no verdict on different data layouts"


def memory_flag(states: dict[str, list[dict | None]]) -> str | None:
    """A warning when the sides' median used_memory at run start differ by more than 5% on the
    same data (an allocator or encoding difference, or data that is not the same after all)."""
    medians = {}
    for side, runs in states.items():
        values = [s["at_run_start"]["used_memory"] for s in runs
                  if s and s.get("at_run_start") and s["at_run_start"].get("used_memory")]
        if values:
            medians[side] = statistics.median(values)
    if len(medians) < 2:
        return None
    low, high = min(medians.values()), max(medians.values())
    if high <= low * (1 + MEMORY_DIFFERENCE):
        return None
    told = ", ".join(f"{side} {value / 2**20:.1f} MiB" for side, value in medians.items())
    return f"used_memory at run start differs by {high / low - 1:.1%} ({told})"


def prepared_once_flag(states: dict[str, list[dict | None]]) -> str | None:
    """A warning when every run of every side measured one server kept from a single preparation
    (no snapshot to restore it from, and the test only reads, so the server is not restarted): a
    preload of many concurrent connections leaves each preparation its own memory layout, and the
    runs repeat the load, not the preparation, so their interval leaves out how much two
    preparations differ. The catalogue A/A's one false verdict, a cluster read test, was this
    (docs/gate.md)."""
    if sum(1 for side_runs in states.values() if side_runs) < 2:
        return None
    if any(not state or state.get("origin") != PREPARED or state.get("restart_per_run") is not False
           for side_runs in states.values() for state in side_runs):
        return None
    return ("each side's data was prepared once and kept for all its runs (no snapshot to restore): the "
            "interval holds the spread between runs, not between preparations, so a difference in layout "
            "between the two preparations can read as a change")
