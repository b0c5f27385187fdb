"""A bisection's report (terminal lines and markdown) from its stored document (redline/bisect/search.py's
Outcome.as_json() plus the command's context), so a stored session reads the same as the live one."""

from __future__ import annotations

import shlex

from redline.profile.compare import describe_move

SKIPPED_TAIL_SHOWN = 3        # build log lines of a skipped step in the terminal (all in markdown)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}%"


def _interval(change: dict) -> str:
    if change.get("ci_low_pct") is None:
        return change.get("note") or "no interval"
    return f"{_pct(change['delta_pct'])} [{_pct(change['ci_low_pct'])}, {_pct(change['ci_high_pct'])}]"


def _commit(commit: dict) -> str:
    return f"{commit['sha'][:12]} {commit['subject']} ({commit['date'][:10]})"


def _bisect_command(doc: dict, good: str, bad: str) -> str:
    base = ["redline", "bisect", f"git:{doc['repository']}", *doc["selection"], "--metric", doc["metric"],
            "--variant", doc["variant"], *_measure_arguments(doc)]
    return shlex.join([*base[:2], "--good", good, "--bad", bad, *base[2:]])


def _share_text(share: float | None) -> str:
    return "–" if share is None else f"{round(share, 2) + 0.0:.0%}"      # + 0.0: never "-0%"


SHARE_WORTH_A_BISECTION = 0.05     # a part of the range holding less of the change is not offered


def _rest(doc: dict, remainder: dict) -> list[str]:
    """Where the part of the change this commit did not make lies: before it (GOOD .. the commit
    before it) and after it (it .. BAD), by the places the steps measured, with the bisections
    that would find it."""
    endpoints, commit, before = doc["endpoints"], remainder["commit"], remainder["before"]
    good, bad = endpoints["good"]["sha"][:12], endpoints["bad"]["sha"][:12]
    lines, commands = [], []
    for test in endpoints["moved"]:
        own = remainder["explained"].get(test)
        ahead = (remainder.get("place_before") or {}).get(test)
        behind = 1 - (remainder.get("place_after") or {}).get(test, 1.0)
        parts = [f"{_share_text(ahead)} before it, between good {good} and {before['sha'][:12]}"] if ahead else []
        parts += [f"{_share_text(behind)} after it, between {commit['sha'][:12]} and bad {bad}"] if behind else []
        larger = [share for share in (ahead, behind) if share is not None and own is not None and share > own]
        verdict = ("a larger step may lie in the " + " or the ".join(f"{s:.0%}" for s in larger) if larger
                   else "the largest single step in the range")
        lines.append(f"  the change splits over several commits ({test}): {commit['sha'][:12]} made "
                     f"{_share_text(own)} of it ({verdict}); the rest lies " + (" and ".join(parts) or "nowhere measured"))
        if ahead is not None and ahead >= SHARE_WORTH_A_BISECTION:
            commands.append(_bisect_command(doc, good, before["sha"][:12]))
        if behind >= SHARE_WORTH_A_BISECTION:
            commands.append(_bisect_command(doc, commit["sha"][:12], bad))
    commands = list(dict.fromkeys(commands))
    if commands:
        lines.append("  the next bisections:")
        lines += [f"    {command}" for command in commands]
    return lines


def _own_change(doc: dict, remainder: dict, quote=str) -> list[str]:
    """A commit's own change against the commit before it, per test, with its share."""
    lines = []
    for test, change in remainder["changes"].items():
        share, at_most = remainder["explained"].get(test), remainder["explained_at_most"].get(test)
        at_least = (remainder.get("explained_at_least") or {}).get(test)
        bounds = (f" (interval: {at_least:.0%} to {at_most:.0%})" if at_least is not None and at_most is not None
                  else f" (interval: up to {at_most:.0%})" if at_most is not None else "")
        lines.append(f"  {test}: {_interval(change)} against {remainder['before']['sha'][:12]}"
                     + (f", {share:.0%} of the good→bad change" if share is not None else "") + bounds)
        if change.get("moved_symbols"):
            lines.append("    moved: " + ", ".join(describe_move(m, quote) for m in change["moved_symbols"]))
        if change.get("diff_flamegraph"):
            lines.append(f"    differential flame graph: {change['diff_flamegraph']}")
    return lines


def _accounted(doc: dict) -> list[str]:
    """--each-step: how much of the change the steps found make together, per test."""
    resolved = [r for r in doc.get("found") or [] if r["resolved"]]
    lines = []
    for test in doc["endpoints"]["moved"]:
        total = sum(r["explained"].get(test) or 0 for r in resolved)
        rest = 1 - total
        lines.append(f"  the change splits over {len(resolved)} steps ({test}): together {_share_text(total)} of it"
                     + (f"; {_share_text(rest)} lies in no step found (steps smaller than one step resolves, or "
                        "commits passed over)" if abs(rest) >= SHARE_WORTH_A_BISECTION else ""))
    return lines


def _found(doc: dict) -> list[str]:
    """Every step of a bisection that looked for each (--each-step), with its own change's share."""
    found = doc.get("found") or []
    if not doc.get("each_step") or not found:
        return []
    lines = [f"steps found: {sum(1 for r in found if r['resolved'])} (each commit against the commit before it; "
             "share of the good→bad change in log terms)"]
    for remainder in found:
        shares = ", ".join(f"{test} {_interval(c)}, {_share_text(remainder['explained'].get(test))}"
                           for test, c in remainder["changes"].items())
        told = "" if remainder["resolved"] else " — its own change cannot be told from none: not a step"
        lines.append(f"  {_commit(remainder['commit'])}: {shares}{told}")
    return lines


def _measure_arguments(doc: dict) -> list[str]:
    return ["--measure", "instructions"] if doc.get("measure") == "instructions" else []


def _too_close(doc: dict) -> list[str]:
    """Tests that moved too little for a counted bisection's one-run steps, and what would follow them."""
    too_close = doc["endpoints"].get("too_close") or {}
    if not too_close:
        return []
    lines = [f"  not followed, moved too little for one run per commit: {test} {why}" for test, why in too_close.items()]
    finer = "" if doc["metric"] == "instructions_per_op_command" else \
        "--metric instructions_per_op_command (inside call(): changes from 2% are followed) or "
    lines.append(f"  to follow {'it' if len(too_close) == 1 else 'them'}: bisect with {finer}--measure time")
    return lines


def summary(doc: dict, quote=str) -> list[str]:
    """The answer in sentences: no change, the culprit and what it explains, or the candidates.
    `quote`: how a profile's function names are written (markdown: as literals, an agent's text)."""
    metric, endpoints = doc["metric"], doc["endpoints"]
    ends = f"{endpoints['good']['sha'][:12]} (good) → {endpoints['bad']['sha'][:12]} (bad)"
    lines = []
    if not endpoints["moved"] and endpoints.get("too_close"):
        lines.append(f"{metric} moved between {ends}, but too little to bisect one counted run per commit")
        return lines + _too_close(doc)
    if doc["no_change"]:
        unmeasured = [test for test, change in endpoints["changes"].items() if change.get("ci_low_pct") is None]
        lines.append(f"cannot tell whether {metric} moved between {ends}: the endpoint runs did not measure "
                     f"{', '.join(unmeasured)}" if unmeasured else
                     f"no change to bisect: {metric} did not move between {ends}")
        for test, change in endpoints["changes"].items():
            detectable = change.get("min_detectable_pct")
            lines.append(f"  {test}: {change['verdict']}, {_interval(change)}"
                         + (f"; minimum detectable change ±{detectable:.1f}%" if detectable is not None else ""))
        return lines
    lines.append(f"{metric} moved {ends}: " + "; ".join(
        f"{test} {_interval(endpoints['changes'][test])}" for test in endpoints["moved"]))
    if doc.get("measure") == "instructions":
        lines.append("  counted under callgrind: every step is one run of the commit against the endpoints' "
                     "counts, its ratio taken to within " + "; ".join(
                         f"±{endpoints['changes'][test]['step_tolerance_pct']:.1f}% on {test}"
                         for test in endpoints["moved"] if endpoints["changes"][test].get("step_tolerance_pct")))
    lines += _too_close(doc)
    still = [t for t in endpoints["changes"] if t not in endpoints["moved"] and t not in (endpoints.get("too_close") or {})]
    for test in still:
        lines.append(f"  not followed, did not move: {test} {endpoints['changes'][test]['verdict']}, "
                     f"{_interval(endpoints['changes'][test])}")
    lines += _found(doc)
    if doc["culprit"]:
        remainder = doc["remainder"]
        largest = " (the largest step found)" if doc.get("each_step") and len(doc.get("found") or []) > 1 else ""
        lines.append(f"culprit{largest}: {_commit(doc['culprit'])}")
        if remainder:
            lines += _own_change(doc, remainder, quote)
            if remainder["large"] and doc.get("each_step"):
                lines += _accounted(doc)
            elif remainder["large"]:
                lines += _rest(doc, remainder) if remainder.get("commit") else \
                    ["  a large part of the change is elsewhere"]
    elif doc.get("unresolved"):
        lines.append(f"no culprit named: {doc['unresolved']}")
        if doc.get("remainder"):
            lines += _own_change(doc, doc["remainder"], quote)
    elif doc["candidates"]:
        lines.append("the first bad commit is one of these (commits that could not be decided are in the way):")
        lines += [f"  {_commit(c)}" for c in doc["candidates"]]
    elif doc["steps"] is not None:
        lines.append("bisection unfinished")
    return lines


def step_rows(doc: dict) -> list[list[str]]:
    """step, commit, subject, against, test, change [interval], verdict, runs, outcome, place (where
    the commit lies on the good→bad change, log terms)."""
    rows = []
    for step in doc["steps"]:
        commit = step["candidate"]
        against = (f"{step['reference_state']} {step['reference']['sha'][:12]}" if step["reference"] else "–")
        changes = step["changes"] or {"": None}
        places = step.get("places") or {}
        for test, change in changes.items():
            place = places.get(test)
            rows.append([str(step["number"]), commit["sha"][:12], commit["subject"], against, test,
                         _interval(change) if change else "–", change["verdict"] if change else "–",
                         str(change["runs"]) if change else "–", step["outcome"],
                         _share_text(place["share"]) if place else "–"])
    return rows


STEP_HEADER = ["step", "commit", "subject", "against", "test", "change [interval]", "verdict", "runs", "outcome",
               "place"]


def report_lines(doc: dict) -> list[str]:
    lines = [*summary(doc)]
    rows = step_rows(doc)
    if rows:
        widths = [max(len(r[i]) for r in [STEP_HEADER, *rows]) for i in range(len(STEP_HEADER))]
        lines.append("")
        for row in [STEP_HEADER, *rows]:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    for step in doc["steps"]:
        if step["note"]:
            note = step["note"].splitlines()
            errors = [line for line in note[1:] if "error" in line.lower()]
            shown = note[:1] + (errors or note[1:])[-SKIPPED_TAIL_SHOWN:]
            lines.append(f"step {step['number']} ({step['candidate']['sha'][:12]}): " + "\n    ".join(shown))
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report_markdown(doc: dict) -> str:
    from redline.output.markdown_text import literal
    out = [f"## redline bisect: {doc['metric']}", ""]
    if doc.get("measure") == "instructions":
        out += ["Counted under callgrind: the endpoints by interleaved runs, every other commit by one run.", ""]
    out += [f"    {line}" if line.startswith("    redline") else line for line in summary(doc, literal)]
    out.append("")
    rows = step_rows(doc)
    if rows:
        out.append("| " + " | ".join(STEP_HEADER) + " |")
        out.append("|" + "---|" * len(STEP_HEADER))
        out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
        out.append("")
    for step in doc["steps"]:
        if step["note"]:
            out += [f"Step {step['number']} ({step['candidate']['sha'][:12]}):", "", "```",
                    *step["note"].splitlines(), "```", ""]
    out.append(f"Variant `{doc['variant']}`, repository `{doc['repository']}`, store session {doc['session']}.")
    return "\n".join(out) + "\n"
