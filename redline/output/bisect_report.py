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


def _next_commands(doc: dict) -> list[str]:
    """The two bisections that would find the rest of a change split over commits."""
    base = ["redline", "bisect", f"git:{doc['repository']}", *doc["selection"], "--metric", doc["metric"],
            "--variant", doc["variant"], *_measure_arguments(doc)]
    culprit, good, bad = doc["culprit"]["sha"][:12], doc["endpoints"]["good"]["sha"][:12], doc["endpoints"]["bad"]["sha"][:12]
    return [shlex.join([*base[:2], "--good", good, "--bad", f"{culprit}^", *base[2:]]),
            shlex.join([*base[:2], "--good", culprit, "--bad", bad, *base[2:]])]


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


def summary(doc: dict) -> list[str]:
    """The answer in sentences: no change, the culprit and what it explains, or the candidates."""
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
        lines.append("  counted under callgrind: every step is one run of the commit against the counts of the "
                     "decided end, its ratio taken to within " + "; ".join(
                         f"±{endpoints['changes'][test]['step_tolerance_pct']:.1f}% on {test}"
                         for test in endpoints["moved"] if endpoints["changes"][test].get("step_tolerance_pct")))
    lines += _too_close(doc)
    still = [t for t in endpoints["changes"] if t not in endpoints["moved"] and t not in (endpoints.get("too_close") or {})]
    for test in still:
        lines.append(f"  not followed, did not move: {test} {endpoints['changes'][test]['verdict']}, "
                     f"{_interval(endpoints['changes'][test])}")
    if doc["culprit"]:
        lines.append(f"culprit: {_commit(doc['culprit'])}")
        remainder = doc["remainder"]
        if remainder:
            for test, change in remainder["changes"].items():
                share, at_most = remainder["explained"].get(test), remainder["explained_at_most"].get(test)
                lines.append(f"  {test}: {_interval(change)} against {remainder['before']['sha'][:12]}"
                             + (f", {share:.0%} of the good→bad change" if share is not None else "")
                             + (f" (interval: up to {at_most:.0%})" if at_most is not None else ""))
                if change.get("moved_symbols"):
                    lines.append("    moved: " + ", ".join(describe_move(m) for m in change["moved_symbols"]))
                if change.get("diff_flamegraph"):
                    lines.append(f"    differential flame graph: {change['diff_flamegraph']}")
            if remainder["large"]:
                lines.append("  a large part of the change is elsewhere; the next bisections:")
                lines += [f"    {command}" for command in _next_commands(doc)]
    elif doc["candidates"]:
        lines.append("the first bad commit is one of these (commits that could not be decided are in the way):")
        lines += [f"  {_commit(c)}" for c in doc["candidates"]]
    elif doc["steps"] is not None:
        lines.append("bisection unfinished")
    return lines


def step_rows(doc: dict) -> list[list[str]]:
    """step, commit, subject, against, test, change [interval], verdict, runs, outcome."""
    rows = []
    for step in doc["steps"]:
        commit = step["candidate"]
        against = (f"{step['reference_state']} {step['reference']['sha'][:12]}" if step["reference"] else "–")
        changes = step["changes"] or {"": None}
        for test, change in changes.items():
            rows.append([str(step["number"]), commit["sha"][:12], commit["subject"], against, test,
                         _interval(change) if change else "–", change["verdict"] if change else "–",
                         str(change["runs"]) if change else "–", step["outcome"]])
    return rows


STEP_HEADER = ["step", "commit", "subject", "against", "test", "change [interval]", "verdict", "runs", "outcome"]


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
    out = [f"## redline bisect: {doc['metric']}", ""]
    if doc.get("measure") == "instructions":
        out += ["Counted under callgrind: the endpoints by interleaved runs, every other commit by one run.", ""]
    out += [f"    {line}" if line.startswith("    redline") else line for line in summary(doc)]
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
