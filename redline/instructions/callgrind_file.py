"""One callgrind dump (the text format of `valgrind --tool=callgrind`, written uncompressed with
--compress-strings=no --compress-pos=no) → its event totals, each function's self cost and the
call arcs with their inclusive cost.

The parts of the format read here (valgrind's docs, "Callgrind Format Specification"):
`events:` names the cost columns; `ob=`/`fn=` open a function; a cost line ("position cost
cost …", trailing zero columns left out) after `fn=` is that function's own cost; `cob=`/`cfn=`
then `calls=COUNT POSITION` then one cost line is a call arc from the current function to `cfn`
and that line is the callee's inclusive cost for these calls; `totals:` (last line) is the sum of
every own cost in the file. Function names may carry callgrind's suffixes: contexts
(`name'caller'caller…` with --separate-callers) and the recursion level (`name'2` is an
activation of `name` entered while another one was active: callgrind's --separate-recs, default
2); `base_name` strips both, `recursion_level` reads the level.

**The total is `totals:`, not `summary:`.** callgrind computes `summary:` as its running counter
minus the counter at the previous dump, in unsigned 64-bit arithmetic, and `instrumentation on`
restarts the counter from 0 without resetting the previous dump's mark: the first dump after an
instrumentation restart on a process that has dumped before reports 2^64 - (L - cost) (L: the
counter at that earlier dump). A call that was active when instrumentation came on gets the same
mark as its entry cost ("lasting since the last dump", callgrind's bbcc.c), so its arc wraps too.
redline zeroes the counters right after every restart (redline.instructions.callgrind), which
resets the mark; the parser still refuses a dump in which an arc costs more than the whole dump,
naming file:line, so a wrapped count can never become a metric. An arc over the whole by a few
events is not a wrap: a call active across the zeroing (aeMain → aeProcessEvents) was seen to carry
1 data write more than its 131,353-write dump, one run in ten in a test's bisection; such an arc
(over by at most `ARC_SLACK` events, or one in 10,000) is taken as the whole. Nor is an arc
between two recursion activations (`msort_with_tmp'2 → msort_with_tmp'2`): callgrind folds every
level from --separate-recs down into one name, so that arc sums the inclusive cost of calls nested
in one another, and a deep recursion sums past the whole (SORT of 1,000 numbers at pipeline 10:
271.7M instructions in such an arc of a 232M dump); only a wrapped count is refused there.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from redline.core.errors import RunError


@dataclass
class CallgrindDump:
    path: Path
    events: tuple[str, ...]
    summary: dict[str, int]                                       # event → total of the dump (`totals:`)
    self_cost: dict[str, list[int]] = field(default_factory=dict)  # function → its own cost per event
    calls: dict[tuple[str, str], list[int]] = field(default_factory=dict)   # (caller, callee) → inclusive cost
    call_counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def total(self, event: str) -> int:
        return self.summary.get(event, 0)

    def column(self, event: str) -> int | None:
        return self.events.index(event) if event in self.events else None

    def inclusive(self, function: str, event: str = "Ir") -> int | None:
        """The cost spent inside the outermost activations of `function` and everything they
        called: the arcs into its first recursion level from another function. An activation
        entered while another was active (a Lua script's redis.call() or EXEC's commands inside
        `call`, callgrind's `call'2`) is inside the outer one's cost already and is not added
        again. None when the dump never saw the function called."""
        column = self.column(event)
        if column is None:
            return None
        found, cost = False, 0
        for (caller, callee), costs in self.calls.items():
            if base_name(callee) == function:
                found = True
                if _outermost(caller, callee, function):
                    cost += costs[column]
        return cost if found else None

    def calls_of(self, function: str) -> int:
        """How often an outermost activation of `function` was entered (nested ones not counted)."""
        return sum(count for (caller, callee), count in self.call_counts.items()
                   if base_name(callee) == function and _outermost(caller, callee, function))


def base_name(function: str) -> str:
    """The function's name without callgrind's caller-context and recursion suffixes
    ("call'processCommand" → "call", "call'2" → "call")."""
    return function.split("'", 1)[0]


def recursion_level(function: str) -> int:
    """callgrind's recursion level of a function name: "call'2" → 2, "call" → 1 (a C name never
    starts with a digit, so a trailing 'N is the level)."""
    _, quote, last = function.rpartition("'")
    return int(last) if quote and last.isdigit() else 1


def _outermost(caller: str, callee: str, function: str) -> bool:
    """An arc into an outermost activation of `function`: the callee at recursion level 1, called
    from another function (a direct self-call is nested even where levels are not separated)."""
    return recursion_level(callee) == 1 and base_name(caller) != function


def _costs(fields: list[str], width: int, where: str) -> list[int]:
    try:
        values = [int(value) for value in fields[:width]]
    except ValueError:
        raise RunError(f"{where}: a cost line that is not numbers") from None
    return values + [0] * (width - len(values))


def parse_callgrind(path: Path) -> CallgrindDump:
    """Read one dump; RunError naming file:line when it is not callgrind's uncompressed format."""
    path = Path(path)
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise RunError(f"cannot read the callgrind dump {path}: {exc.strerror}") from exc
    events: tuple[str, ...] = ()
    summary: list[int] | None = None
    totals: list[int] | None = None
    arc_lines: dict[tuple[str, str], int] = {}
    self_cost: dict[str, list[int]] = defaultdict(list)
    calls: dict[tuple[str, str], list[int]] = {}
    call_counts: dict[tuple[str, str], int] = defaultdict(int)
    function = callee = None
    call_pending = 0
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}"
        if not line or line[0] == "#":
            continue
        head = line[0]
        if head.isdigit() or head in "+-*":
            if not events:
                raise RunError(f"{where}: a cost line before the events: line (not a callgrind dump?)")
            costs = _costs(line.split()[1:], len(events), where)
            if call_pending and function is not None and callee is not None:
                key = (function, callee)
                previous = calls.get(key)
                calls[key] = costs if previous is None else [a + b for a, b in zip(previous, costs)]
                call_counts[key] += call_pending
                arc_lines.setdefault(key, number)
                call_pending = 0
            elif function is not None:
                own = self_cost[function]
                self_cost[function] = costs if not own else [a + b for a, b in zip(own, costs)]
            continue
        name, _, value = line.partition("=")
        if name == "fn":
            function, callee, call_pending = value, None, 0
        elif name == "cfn":
            callee = value
        elif name == "calls":
            try:
                call_pending = int(value.split()[0])
            except (ValueError, IndexError):
                raise RunError(f"{where}: calls= without a count") from None
        elif line.startswith("events:"):
            events = tuple(line.split(":", 1)[1].split())
        elif line.startswith("summary:"):
            summary = _costs(line.split(":", 1)[1].split(), len(events), where)
        elif line.startswith("totals:"):
            totals = _costs(line.split(":", 1)[1].split(), len(events), where)
    if not events or (summary is None and totals is None):
        raise RunError(f"{path}: no events:/summary: line — not a complete callgrind dump")
    total = totals if totals is not None else summary
    _check_arcs(path, events, total, calls, arc_lines)
    return CallgrindDump(path=path, events=events, summary=dict(zip(events, total)),
                         self_cost=dict(self_cost), calls=calls, call_counts=dict(call_counts))


ARC_SLACK = 16      # events an arc may cost over its whole dump without being a wrap (module docstring)


def _check_arcs(path: Path, events: tuple[str, ...], total: list[int], calls: dict[tuple[str, str], list[int]],
                lines: dict[tuple[str, str], int]) -> None:
    """No call arc can cost more than the whole dump; one that does by more than a few events
    (`ARC_SLACK`, or one in 10,000) holds a difference that wrapped below zero (see the module
    docstring): RunError at its first line. One over by a few is taken as the whole."""
    for (caller, callee), costs in calls.items():
        nested = recursion_level(caller) > 1 and recursion_level(callee) > 1
        for index, (event, cost, whole) in enumerate(zip(events, costs, total)):
            if nested and cost < 2 ** 63:
                continue        # summed over nested activations (module docstring): over the whole is no wrap
            if whole < cost <= whole + max(ARC_SLACK, whole // 10_000):
                costs[index] = whole
            elif cost > whole:
                wrapped = f" (2^64 - {2 ** 64 - cost:,}: a difference that wrapped below zero)" if cost >= 2 ** 63 else ""
                raise RunError(f"{path}:{lines[(caller, callee)]}: callgrind counts {cost:,} {event} for the calls "
                               f"{caller} → {callee}, more than the whole dump's {whole:,}{wrapped}")
