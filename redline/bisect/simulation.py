"""Counted bisections on simulated counts: a CommitCounter (redline.bisect.measure) whose builds
count like real ones without building or running anything, for the fast tests and for
scripts/simulate_counted_bisect.py.

A commit's true count is `base` before the culprit and `base × step` from it on (commits from
`partial_from` on, before the culprit, count half the step in log terms: a change split over two
commits); or, with `changes` (commit index → factor), `base` times the factor of every change
at or before it (a change made by several commits). Each build has its own offset, uniform in ±`build_offset` (so two builds' counts sit up
to 2 × build_offset apart: the dictionaries' layout moved whole-process counts by up to 1.6%,
docs/measure-instructions.md "Sides that count differently"); each run its own noise, uniform in
±`run_noise`.
"""

from __future__ import annotations

import random

from redline.bisect.measure import Count, Counted
from redline.bisect.search import Commit, Unbuildable

RESTORED = {"origin": "restored", "snapshot_key": "simulated"}


class SimulatedCounter:
    def __init__(self, good: Commit, path: list[Commit], *, culprit: int | None = None, step: float = 1.0,
                 base: float = 4400.0, build_offset: float = 0.009, run_noise: float = 0.001,
                 partial_from: int | None = None, changes: dict[int, float] | None = None,
                 failing=(), broken=(), seed: int = 0):
        self.index = {commit.sha: i for i, commit in enumerate(path)}
        self.index[good.sha] = -1
        if changes is None:
            changes = {culprit: step} if partial_from is None else {partial_from: step ** 0.5, culprit: step ** 0.5}
        self.changes, self.base = dict(changes), base
        self.failing, self.broken = set(failing), set(broken)
        self.random = random.Random(seed)
        self.offsets = {sha: 1 + self.random.uniform(-build_offset, build_offset) for sha in self.index}
        self.run_noise = run_noise
        self.calls: list[tuple[list[str], int, bool]] = []    # (commits' shas, runs, profiled) per count()
        self.runs = 0

    def truth(self, index: int) -> float:
        value = self.base
        for at, factor in self.changes.items():
            value *= factor if index >= at else 1.0
        return value

    def count(self, commits: list[Commit], tests: list[str], *, runs: int, profile: bool = False,
              apart: bool = False) -> Counted:
        self.calls.append(([c.sha for c in commits], runs, profile))
        counted = Counted()
        for commit in commits:
            index = self.index[commit.sha]
            if index in self.broken:
                if not apart:
                    raise Unbuildable(commit, ["src/geo.c:1:2: error: #error this commit does not build"])
                counted.unbuildable[commit.sha] = ["src/geo.c:1:2: error: #error this commit does not build"]
                continue
            for test in tests:
                if index in self.failing:
                    counted.failures[(commit.sha, test)] = "1 runs failed: the server exited (signal 11)"
                    continue
                for _ in range(runs):
                    self.runs += 1
                    noise = 1 + self.random.uniform(-1, 1) * self.run_noise
                    counted.counts.setdefault((commit.sha, test), []).append(
                        Count(self.truth(index) * self.offsets[commit.sha] * noise, self.runs, RESTORED))
        if profile:
            counted.profiles = {test: ([{"symbol": "getGenericCommand"}], f"{test}.diff.svg") for test in tests}
        return counted


def commit_line(length: int) -> tuple[Commit, list[Commit]]:
    """GOOD and `length` commits after it (the last is BAD)."""
    return Commit("g" * 40, "good"), [Commit(f"{i:02x}" * 20, f"commit {i}") for i in range(length)]
