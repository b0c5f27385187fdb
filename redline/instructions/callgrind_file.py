"""One callgrind dump (the text format of `valgrind --tool=callgrind`, written uncompressed with
--compress-strings=no --compress-pos=no) → its event totals, each function's self cost and the
call arcs with their inclusive cost.

The parts of the format read here (valgrind's docs, "Callgrind Format Specification"):
`events:` names the cost columns; `summary:` is the total cost of the dump; `ob=`/`fn=` open a
function; a cost line ("position cost cost …", trailing zero columns left out) after `fn=` is
that function's own cost; `cob=`/`cfn=` then `calls=COUNT POSITION` then one cost line is a call
arc from the current function to `cfn` and that line is the callee's inclusive cost for these
calls. Function names may carry callgrind's context suffixes (`name'caller'caller…` with
--separate-callers); `base_name` strips them.
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
    summary: dict[str, int]                                       # event → total of the dump
    self_cost: dict[str, list[int]] = field(default_factory=dict)  # function → its own cost per event
    calls: dict[tuple[str, str], list[int]] = field(default_factory=dict)   # (caller, callee) → inclusive cost
    call_counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def total(self, event: str) -> int:
        return self.summary.get(event, 0)

    def column(self, event: str) -> int | None:
        return self.events.index(event) if event in self.events else None

    def inclusive(self, function: str, event: str = "Ir") -> int | None:
        """The cost spent inside `function` and everything it called, over every call from
        another function (recursive calls of it, or of one of its contexts, counted once).
        None when the dump never saw the function called."""
        column = self.column(event)
        if column is None:
            return None
        found, cost = False, 0
        for (caller, callee), costs in self.calls.items():
            if base_name(callee) == function:
                found = True
                if base_name(caller) != function:
                    cost += costs[column]
        return cost if found else None

    def calls_of(self, function: str) -> int:
        """How often `function` was entered from another function."""
        return sum(count for (caller, callee), count in self.call_counts.items()
                   if base_name(callee) == function and base_name(caller) != function)


def base_name(function: str) -> str:
    """The function's name without callgrind's caller-context suffix ("call'processCommand" →
    "call")."""
    return function.split("'", 1)[0]


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
    if not events or summary is None:
        raise RunError(f"{path}: no events:/summary: line — not a complete callgrind dump")
    return CallgrindDump(path=path, events=events, summary=dict(zip(events, summary)),
                         self_cost=dict(self_cost), calls=calls, call_counts=dict(call_counts))
