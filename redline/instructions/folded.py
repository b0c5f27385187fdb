"""A callgrind dump → folded stacks ("root;caller;leaf count", count = instructions), the input of
the same flame-graph path perf profiles take (redline.profile.flamegraph).

Callgrind records each function's own cost exactly and, per call arc, the callee's inclusive
cost; it does not record whole stacks (one level of caller). The stacks are therefore rebuilt
from the roots down: a function reached along one path with inflow `b` out of its total inflow
`I` shows `b / I` of its own cost on that path and passes `b / I` of each of its outgoing arcs'
costs on to its callees. Per-function self costs, and so the flame graph's leaves summed, are
exact; how a function shared by several callers is split among them follows the calls' costs.
A call back into a function already on the path (recursion) stays with that frame; a branch
below MIN_SHARE of the window is folded into its parent frame; together they keep the total
equal to the dump's instruction count.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from redline.instructions.callgrind_file import CallgrindDump, base_name
from redline.profile.folding import frame_name

MIN_SHARE = 1e-5           # branches smaller than this share of the window are not expanded
MAX_DEPTH = 128


def folded_stacks(dump: CallgrindDump, event: str = "Ir") -> Counter[str]:
    """Folded stacks of `event` costs (instructions by default)."""
    column = dump.column(event)
    if column is None:
        return Counter()
    children: dict[str, list[tuple[str, int]]] = defaultdict(list)
    inflow: Counter[str] = Counter()
    for (caller, callee), costs in dump.calls.items():
        if caller != callee and costs[column] > 0:
            children[caller].append((callee, costs[column]))
            inflow[callee] += costs[column]
    own = {function: costs[column] for function, costs in dump.self_cost.items()}
    functions = set(own) | set(children)
    total = sum(own.values())
    floor = max(total * MIN_SHARE, 1.0)
    stacks: Counter[str] = Counter()
    names = {function: frame_name(base_name(function), None) for function in functions | set(inflow)}

    def visit(function: str, path: tuple[str, ...], on_path: frozenset[str], budget: float) -> None:
        inclusive = own.get(function, 0) + sum(cost for _, cost in children.get(function, ()))
        reached = inflow.get(function) or inclusive
        share = min(1.0, budget / reached) if reached else 0.0
        stack = path + (names[function],)
        kept = own.get(function, 0) * share
        for callee, cost in children.get(function, ()):
            passed = cost * share
            if callee in on_path or passed < floor or len(stack) >= MAX_DEPTH:
                kept += passed
            else:
                visit(callee, stack, on_path | {callee}, passed)
        if kept >= 0.5:
            stacks[";".join(stack)] += round(kept)

    for root in sorted(function for function in functions if not inflow.get(function)):
        rooted = own.get(root, 0) + sum(cost for _, cost in children.get(root, ()))
        if rooted:
            visit(root, (), frozenset({root}), rooted)
    return stacks
