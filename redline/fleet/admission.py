"""The closed loop's admission (#34): whether a change's fleet bisection opens now, waits in its
repository's queue (and where), or is refused; and whether a repository's agent time leaves room
for another round. Pure decisions over the bisections' stored states (redline.fleet.bisection keeps
them in the store): `Loop.trigger` asks `Admission.admit`, and so does any other trigger that opens
a bisection, so that every change goes through one cap, one queue and one budget.

Per repository:
  slots       at most `max_concurrent` bisections hold a slot (stages in SLOT_STAGES: confirming,
              bisecting, checking, and `waiting` for agent time); `queued` and `stalled` ones do not
  queue       a change that cannot open now is `queued`, in arrival order (its bisection id: the
              store's session ids grow), at most `max_queued` of them; beyond, refused with one line.
              A change opens only when the queue before it is empty: a freed slot goes to the oldest
  agent time  the wall time agents spent on the repository's bisection work items over the last
              WINDOW_S (each pair's `agent_s`, counted when its answer was recorded, at `done_at`).
              When it reaches `agent_time_s` no bisection opens and none enqueues new pairs until
              the oldest of that time leaves the window — at most WINDOW_S later, so waiting ends
"""

from __future__ import annotations

from dataclasses import dataclass

from redline.core.numbers import format_duration

WINDOW_S = 24 * 3600.0              # the agent-time budget is per repository per rolling 24 hours
# a bisection's stages (the one list: the coordinator, admission and `fleet status` read them here)
QUEUED, WAITING, STALLED = "queued", "waiting", "stalled"
ACTIVE_STAGES = ("confirming", "bisecting", "checking")       # work items of it are in the stream
SLOT_STAGES = (*ACTIVE_STAGES, WAITING)                       # hold a slot of their repository
CLOSED_STAGES = ("reported", "not reproduced", "failed")
STAGES = (QUEUED, *ACTIVE_STAGES, WAITING, STALLED, *CLOSED_STAGES)    # in the order a bisection can pass them
DEFAULT_MAX_QUEUED = 10
DEFAULT_STALL_AFTER_S = 600.0


@dataclass(frozen=True)
class Limits:
    max_concurrent: int = 2             # open bisections per repository (0: the loop is off)
    max_queued: int = DEFAULT_MAX_QUEUED            # changes waiting for a slot per repository
    agent_time_s: float | None = None   # agent time per repository per WINDOW_S (None: no cap)
    stall_after_s: float = DEFAULT_STALL_AFTER_S    # no live agent of its platform this long: stalled

    def __post_init__(self):
        if self.max_concurrent < 0:
            raise ValueError(f"max_concurrent must be 0 or more, got {self.max_concurrent}")
        if self.max_queued < 0:
            raise ValueError(f"max_queued must be 0 or more, got {self.max_queued}")
        if self.agent_time_s is not None and self.agent_time_s <= 0:
            raise ValueError(f"agent_time_s must be positive or None, got {self.agent_time_s}")
        if self.stall_after_s <= 0:
            raise ValueError(f"stall_after_s must be positive, got {self.stall_after_s}")


@dataclass
class Admitted:
    """The admission's answer for a new change: `open` now, `queue` (at `position` of `length`, and
    why it cannot open now), or `refuse` (`line` says why)."""

    verdict: str
    line: str | None = None
    position: int = 0
    length: int = 0
    why: str = ""


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Admission:
    """The per-repository cap, queue and agent-time budget over the stored states (see the module
    docstring); `now` is always given (the loop's clock), never read here."""

    def __init__(self, limits: Limits):
        self.limits = limits

    # -- what the states say ------------------------------------------------------------------
    @staticmethod
    def holding(states: list[dict], repository: str) -> list[dict]:
        return [s for s in states if s["repository"] == repository and s["stage"] in SLOT_STAGES]

    @staticmethod
    def queue(states: list[dict], repository: str) -> list[dict]:
        """The repository's queued bisections, oldest first."""
        return sorted((s for s in states if s["repository"] == repository and s["stage"] == QUEUED),
                      key=lambda s: s["bisection"])

    @staticmethod
    def _spending(states: list[dict], repository: str, now: float) -> list[tuple[float, float]]:
        """(done_at, agent seconds) of every pair of the repository answered within the window, oldest first."""
        return sorted((pair["done_at"], pair["agent_s"]) for s in states if s["repository"] == repository
                      for pair in s["pairs"].values()
                      if pair.get("done_at") is not None and pair["done_at"] > now - WINDOW_S)

    def spent(self, states: list[dict], repository: str, now: float) -> float:
        return sum(seconds for _, seconds in self._spending(states, repository, now))

    def frees_at(self, states: list[dict], repository: str, now: float) -> float | None:
        """When the repository's agent time falls below the cap again (None: it is below now)."""
        cap = self.limits.agent_time_s
        spending = self._spending(states, repository, now)
        left = sum(seconds for _, seconds in spending)
        if cap is None or left < cap:
            return None
        for done_at, seconds in spending:
            left -= seconds
            if left < cap:
                return done_at + WINDOW_S
        return now        # unreachable: the sum of nothing is below a positive cap

    def has_agent_time(self, states: list[dict], repository: str, now: float) -> bool:
        return self.frees_at(states, repository, now) is None

    def may_open(self, states: list[dict], repository: str, now: float) -> bool:
        """A slot is free and the agent time leaves room."""
        return (len(self.holding(states, repository)) < self.limits.max_concurrent
                and self.has_agent_time(states, repository, now))

    def why_not_open(self, states: list[dict], repository: str, now: float) -> str:
        holding = len(self.holding(states, repository))
        if holding >= self.limits.max_concurrent:
            return (f"{holding} bisections of this repository are open, the cap "
                    f"(--bisect-max-concurrent) is {self.limits.max_concurrent}")
        if not self.has_agent_time(states, repository, now):
            return f"its agent time is spent ({self.agent_time_note(states, repository, now)})"
        return "earlier changes of this repository wait before it"

    def agent_time_note(self, states: list[dict], repository: str, now: float) -> str:
        """How much of the repository's agent time is spent, its cap, and when it frees."""
        frees = self.frees_at(states, repository, now)
        return (f"{format_duration(self.spent(states, repository, now))} spent in the last 24 h, the cap "
                f"(--bisect-agent-time) is {format_duration(self.limits.agent_time_s)}; frees in "
                f"{format_duration(max(0.0, (frees or now) - now))}")

    # -- a new change -------------------------------------------------------------------------
    def admit(self, states: list[dict], repository: str, now: float) -> Admitted:
        """Open now (a slot, the agent time, and no older change waiting), queue, or refuse."""
        if self.limits.max_concurrent == 0:
            return Admitted("refuse", "Not bisected: the collector's loop is off (--bisect-max-concurrent 0).")
        waiting = self.queue(states, repository)
        if not waiting and self.may_open(states, repository, now):
            return Admitted("open")
        why = self.why_not_open(states, repository, now)
        if len(waiting) >= self.limits.max_queued:
            return Admitted("refuse", f"Not bisected: {why}, and {len(waiting)} changes wait already (the queue's "
                                      f"bound, --bisect-max-queued, is {self.limits.max_queued}).")
        return Admitted("queue", position=len(waiting) + 1, length=len(waiting) + 1, why=why)
