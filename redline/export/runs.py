"""What the exporter reads from the store, and where each run goes in the upstream scheme.

A session comes from the store as its one document (`Store.load_session`); `history_series` gives
the change points as `redline history` finds them.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass

from redline.core.run import Run
from redline.export.scheme import Placement, slug
from redline.store.results import Store

SHA_LIKE = re.compile(r"^[0-9a-fA-F]{7,40}$")
NO_SHA = re.compile(r"^0+$")
COMPILER_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)\s*(?:\[|$)")


def timestamp_ms(run: Run) -> int:
    """A run's samples are at its start, in ms: fixed by the store, so exporting again finds them."""
    return int(round(run.started_at * 1000))


def measured_on(run: Run) -> str:
    """The host the run was measured on (its machine facts; this machine for a run without them)."""
    return (run.facts.get("machine") or {}).get("hostname") or platform.node()


def history_series(store: Store, metric: str, tests: set[str]) -> list:
    """`redline history`'s series of `metric` for these tests (this machine's runs), analysed for
    change points as `redline history` does by default."""
    from redline.analysis import history
    from redline.export.scheme import HISTORY_P_VALUE
    floors = store.noise_floors()
    found = [s for s in history.load_series(store.history(metric), None) if s.test in tests]
    for series in found:
        history.analyse(series, p_threshold=HISTORY_P_VALUE, noise_floor_pct=floors.get((series.test, metric)))
    return found


@dataclass(frozen=True)
class PlacementRules:
    """What the user tells the exporter that a run cannot: the machine's name in the scheme, and a
    branch for runs whose target names none."""

    running_platform: str | None = None       # default: the host the run was measured on
    branch: str | None = None


def placement_of(run: Run, rules: PlacementRules) -> Placement:
    identity = run.facts.get("identity") or {}
    config = target_config(run.target)
    return Placement(
        test=run.test,
        build_variant=build_variant(run.target, run.facts.get("build")),
        running_platform=slug(rules.running_platform or measured_on(run)),
        deployment_type=run.topology,
        deployment_name=run.topology + (f"-{slug(config)}" if config else ""),
        branch=target_branch(run.target) or rules.branch,
        version=identity.get("version") or run.facts.get("server_version"),
        hash=commit_hash(identity),
    )


def target_spec(label: str) -> str:
    """The target as the user named it (a label is `SPEC [name=value …]`)."""
    return label[:label.index(" [")] if label.endswith("]") and " [" in label else label


def target_config(label: str) -> str:
    """The side's own server configuration in its label (`appendonly=yes …`), or ''."""
    return label[label.index(" [") + 2:-1] if label.endswith("]") and " [" in label else ""


def target_branch(label: str) -> str | None:
    """REF of a `git:REPO@REF` target when it reads as a branch (not a commit, not an expression
    like HEAD~2)."""
    spec = target_spec(label)
    if not spec.startswith("git:") or "@" not in spec:
        return None
    ref = spec.rsplit("@", 1)[1]
    if not ref or SHA_LIKE.match(ref) or any(c in ref for c in "~^:") or ref == "HEAD":
        return None
    return ref


def commit_hash(identity: dict) -> str | None:
    """The commit a build came from: the git: target's commit, else the sha the server reports."""
    commit = identity.get("commit") or {}
    if commit.get("sha"):
        return commit["sha"]
    sha = identity.get("git_sha1")
    return sha if sha and not NO_SHA.match(sha) else None


def build_variant(label: str, build: dict | None) -> str:
    """`{compiler}:{version}-{variant}` for binaries redline built, as upstream names its builds;
    `prebuilt` for a bin: target, `external` for tcp://."""
    if build:
        compiler = build.get("compiler_version") or ""
        name = compiler.split()[0] if compiler else "cc"
        version = COMPILER_VERSION.search(compiler)
        variant = (build.get("variant") or {}).get("name") or "default"
        return slug(f"{name}:{version.group(1)}-{variant}" if version else f"{name}-{variant}")
    return "external" if target_spec(label).startswith("tcp://") else "prebuilt"
