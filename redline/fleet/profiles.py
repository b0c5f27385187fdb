"""A profiled run's folded stacks across the fleet: what lets a fleet bisection name the moved
functions of the culprit's own change and draw its differential flame graph (#34).

The agent ships the stacks inside the run document, bounded (`shipped`: entries.PROFILE_BOUNDS,
the heaviest stacks kept, the rest merged into one `[other]` stack, so every kept leaf's share of
the total is unchanged; frame names made printable and cut). The collector checks them like every
field it reads (entries.profile_document) and writes them as the run's folded file next to its
store (`kept`), so that redline's own code — redline.analysis.comparison.profile_differences: the
moved symbols, inferno's differential flame graph — reads a fleet run's profile as it reads a
local one. Data, not a rendered SVG: an agent's markup would be untrusted inside a report page; the
collector renders its own.
"""

from __future__ import annotations

from pathlib import Path

from redline.core.errors import UsageError
from redline.core.run import Run
from redline.fleet.entries import PROFILE_BOUNDS
from redline.profile.folding import bounded_stacks, read_folded, write_folded
from redline.store.results import Store

KEPT_IN = "fleet-profiles"       # the collector's folded files: STORE-artifacts/fleet-profiles/UID.folded.gz


def shipped(run: Run) -> dict:
    """The document an agent publishes for a run: a profiled run's profile carries its bounded
    stacks (`stacks`: [stack, count] pairs, heaviest first; `stacks_merged`: how many went into
    [other]); a profile whose folded file cannot be read says why, without stacks."""
    document = run.to_json()
    profile = run.profile
    if run.purpose != "profile" or not profile or not profile.get("folded_path"):
        return document
    try:
        stacks = read_folded(Path(profile["folded_path"]))
    except UsageError as exc:
        document["profile"] = {**profile, "stacks_unread": str(exc)[:500]}
        return document
    kept, merged = bounded_stacks(stacks, PROFILE_BOUNDS)
    document["profile"] = {**profile, "stacks": [[stack, count] for stack, count in kept.items()],
                           "stacks_merged": merged}
    return document


def kept(run: Run, store: Store) -> Run:
    """On the collector: a checked profile's stacks written as the run's folded file (by the run's
    uid, so a result stored again writes the same file); its profile then names that file, as a
    local profiled run's does."""
    profile = run.profile
    if not profile or "stacks" not in profile:
        return run
    place = store.artifacts(KEPT_IN)
    place.mkdir(parents=True, exist_ok=True)
    folded = write_folded(profile["stacks"], place / f"{run.uid}.folded.gz")
    run.profile = {"folded_path": str(folded), "svg_path": "", "event": profile["event"],
                   "samples": profile["samples"], "stacks_merged": profile["stacks_merged"], "shipped": True}
    return run
