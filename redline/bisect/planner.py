"""The round planner of a bisection: which commits to measure next, from what is known so far.

Pure logic on path indices (GOOD is -1, BAD is the last index): no commit, build or run. A scheduler
that can measure k commits at once (k counted lanes on one machine, k fleet agents) asks for k per
round; k = 1 is the sequential bisection.

**Places.** Every commit is measured against an end of the whole range (GOOD or BAD), so its value
has a *place* on the endpoints' change, per followed test: in log terms, the share of GOOD→BAD it
has reached, 0 at GOOD, 1 at BAD, with the interval of its measurement (`place_of`). Two commits'
places are comparable whichever end each was measured against. (A ratio taken against a commit
decided earlier, compared with the half-way point of the whole change, is not: that mixed the
ends and named a commit without a change, issue #34.)

**A search** looks for the commit at which the value crosses a half-way point h between two decided
commits lo < hi (the whole range: GOOD, BAD, h = 0.5 for every test). A measured commit lies
*before* when its place's interval lies entirely on lo's side of h for every test, *beyond* when
entirely on hi's side, else it cannot be placed for this search and is passed over (git bisect
skip); so is a commit that does not build or has no place. The first commit beyond and the last
before it are the boundary; the undecided commits between them are what is left.

**Rounds.** A round takes up to k undecided commits that split what is left into k + 1 parts
(k = 1: the commit nearest the middle, as `git bisect`). n commits take ⌈log_{k+1}(n + 1)⌉ rounds.

**Each step** (`each_step`): a change made by several commits crosses h at one of them. Once a
search ends at a boundary, the parts on either side (lo .. the last commit before, the first
commit beyond .. hi) are searched too, each for the crossing of its own half-way point, when
their ends' places differ by more than a step resolves (`least_share`) with disjoint intervals;
recursively, until no part's ends differ. The rounds then serve every open search at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

BEFORE, BEYOND = "before", "beyond"


@dataclass(frozen=True)
class Place:
    """Where a commit's value lies on the endpoints' change, in log terms: 0 at GOOD, 1 at BAD."""

    share: float
    low: float
    high: float

    def as_json(self) -> dict:
        return {"share": self.share, "low": self.low, "high": self.high}


GOOD_PLACE, BAD_PLACE = Place(0.0, 0.0, 0.0), Place(1.0, 1.0, 1.0)


def place_of(ratio: tuple[float, float, float] | None, step: float, against_bad: bool) -> Place | None:
    """The place of a commit measured against GOOD (or BAD, `against_bad`) as (ratio, interval's low
    ratio, interval's high ratio), on a change of `step` (BAD/GOOD); None without a usable ratio."""
    if ratio is None or step <= 0 or step == 1 or any(r is None or r <= 0 for r in ratio):
        return None
    scale, offset = math.log(step), 1.0 if against_bad else 0.0
    share, a, b = (offset + math.log(r) / scale for r in ratio)
    return Place(share, min(a, b), max(a, b))


@dataclass(frozen=True)
class Mark:
    """What is known of one measured commit: its place per followed test, or why it has none
    (does not build, its runs failed, no interval)."""

    places: dict[str, Place] = field(default_factory=dict)
    why: str | None = None


def _side(place: Place | None, half: float, rising: bool) -> str | None:
    if place is None:
        return None
    if place.high < half:
        return BEFORE if rising else BEYOND
    if place.low > half:
        return BEYOND if rising else BEFORE
    return None


@dataclass
class Search:
    """The search for the crossing of `halves` (test → half-way point) between the decided commits
    `lo` and `hi`, resolved against the marks: `before`/`beyond` bound what is left (`open`);
    `passed` are the commits between them that could not be placed."""

    lo: int
    hi: int
    halves: dict[str, float]
    rising: dict[str, bool]           # test → whether hi's place is above lo's
    before: int = 0
    beyond: int = 0
    open: list[int] = field(default_factory=list)
    passed: list[int] = field(default_factory=list)
    against_the_grain: list[int] = field(default_factory=list)   # placed before, but after a commit beyond

    def sides(self, mark: Mark | None) -> dict[str, str | None]:
        """Each followed test's side of the half-way point for the commit (None: its interval
        straddles the point, or no place)."""
        places = mark.places if mark else {}
        return {test: _side(places.get(test), half, self.rising[test]) for test, half in self.halves.items()}

    @property
    def leader(self) -> str | None:
        """The test that decides where the followed tests disagree: the first of `halves`, which
        are in the order of the endpoints' changes, largest first (redline.bisect.search)."""
        return next(iter(self.halves), None)

    def side(self, mark: Mark | None) -> str | None:
        """before / beyond when every followed test puts the commit on that side; when they do not
        (a range with several steps that moved the tests at different commits, or a test that
        cannot place it), the leader's side; None when the leader cannot place it either."""
        sides = self.sides(mark)
        agreed = set(sides.values())
        return agreed.pop() if len(agreed) == 1 else sides.get(self.leader)

    def resolve(self, marks: dict[int, Mark]) -> Search:
        sides = {i: self.side(marks[i]) for i in range(self.lo + 1, self.hi) if i in marks}
        self.beyond = min([i for i, s in sides.items() if s == BEYOND], default=self.hi)
        self.before = max([i for i, s in sides.items() if s == BEFORE and i < self.beyond], default=self.lo)
        between = range(self.before + 1, self.beyond)
        self.open = [i for i in between if i not in marks]
        self.passed = [i for i in between if i in marks]
        self.against_the_grain = [i for i, s in sides.items() if s == BEFORE and i > self.beyond]
        return self

    @property
    def done(self) -> bool:
        return not self.open

    @property
    def culprit(self) -> int | None:
        """The first commit beyond the half-way point, when nothing unplaced sits before it."""
        return self.beyond if self.done and not self.passed else None

    def reference_is_good(self, index: int) -> bool:
        """Whether `index` is nearer the search's lower bound (ties: yes): it is then measured
        against GOOD, else against BAD."""
        return index - self.before <= self.beyond - index

    def picks(self, count: int, taken: set[int]) -> list[int]:
        """`count` open commits that split what is left into count + 1 parts: the open commit
        nearest each of before + ⌊(beyond - before) · j / (count + 1)⌋ (ties: the lower)."""
        chosen: list[int] = []
        for j in range(1, count + 1):
            target = self.before + (self.beyond - self.before) * j // (count + 1)
            left = [i for i in self.open if i not in taken and i not in chosen]
            if left:
                chosen.append(min(left, key=lambda i: (abs(i - target), i)))
        return sorted(chosen)

    def as_json(self) -> dict:
        return {"lo": self.lo, "hi": self.hi, "halves": self.halves, "before": self.before, "beyond": self.beyond,
                "open": len(self.open), "passed": self.passed, "against_the_grain": self.against_the_grain}


def rounds_needed(candidates: int, per_round: int = 1) -> int:
    """Rounds a search of `candidates` undecided commits takes with `per_round` commits a round
    (without skips): ⌈log_{k+1}(n + 1)⌉."""
    rounds, left = 0, candidates
    while left > 0:
        left = math.ceil((left + 1) / (per_round + 1)) - 1
        rounds += 1
    return rounds


@dataclass
class Plan:
    """The next round (path indices, each with the search that asked for it) and every search as
    resolved by the marks; no next round: the bisection is over."""

    round: list[tuple[int, Search]]
    searches: list[Search]

    @property
    def over(self) -> bool:
        return not self.round


class RoundPlanner:
    """The next k commits to measure, from the ancestry path's length and the marks so far.
    Stateless between calls: the marks are the whole state, so a bisection can be resumed, or
    continued by another machine, from its stored steps."""

    def __init__(self, size: int, tests: list[str], *, per_round: int = 1, each_step: bool = False,
                 least_share: dict[str, float] | None = None):
        if per_round < 1:
            raise ValueError(f"per_round must be at least 1, got {per_round}")
        self.size, self.tests, self.per_round, self.each_step = size, list(tests), per_round, each_step
        self.least_share = least_share or {}

    def place(self, index: int, marks: dict[int, Mark], test: str) -> Place | None:
        if index < 0:
            return GOOD_PLACE
        if index == self.size - 1:
            return BAD_PLACE
        mark = marks.get(index)
        return mark.places.get(test) if mark else None

    def searches(self, marks: dict[int, Mark]) -> list[Search]:
        """The whole range's search, and with each_step the searches of the parts on either side
        of every boundary found, in the order they were opened."""
        found = [Search(-1, self.size - 1, {t: 0.5 for t in self.tests}, {t: True for t in self.tests}).resolve(marks)]
        queue = list(found) if self.each_step else []
        while queue:
            search = queue.pop(0)
            if not search.done:
                continue
            for lo, hi in ((search.lo, search.before), (search.beyond, search.hi)):
                part = self._part(lo, hi, marks)
                if part is not None:
                    found.append(part.resolve(marks))
                    queue.append(part)
        return found

    def _part(self, lo: int, hi: int, marks: dict[int, Mark]) -> Search | None:
        """The search of lo..hi, following the tests whose places at lo and hi differ by more than
        a step resolves; None when none does (or lo..hi is no range)."""
        if hi <= lo:
            return None
        halves, rising = {}, {}
        for test in self.tests:
            a, b = self.place(lo, marks, test), self.place(hi, marks, test)
            if a is None or b is None:
                continue
            apart = b.low > a.high or a.low > b.high
            if apart and abs(b.share - a.share) >= self.least_share.get(test, 0.0):
                halves[test], rising[test] = (a.share + b.share) / 2, b.share > a.share
        return Search(lo, hi, halves, rising) if halves else None

    def plan(self, marks: dict[int, Mark]) -> Plan:
        """Up to per_round open commits: the slots go one by one to the open search whose parts
        would stay largest, and each search's commits split what it has left evenly."""
        searches = self.searches(marks)
        live = [s for s in searches if not s.done]
        slots = {id(s): 0 for s in live}
        for _ in range(self.per_round):
            worth = [s for s in live if slots[id(s)] < len(s.open)]
            if not worth:
                break
            best = max(worth, key=lambda s: len(s.open) / (slots[id(s)] + 1))
            slots[id(best)] += 1
        taken: set[int] = set()
        chosen: list[tuple[int, Search]] = []
        for search in live:
            for index in search.picks(slots[id(search)], taken):
                taken.add(index)
                chosen.append((index, search))
        return Plan(sorted(chosen, key=lambda pair: pair[0]), searches)
