"""A branch's pushes as `redline history` series, for the closed loop's second trigger (#34).

The fleet's pushes of one branch form a history: each push's work item measured its pushed head
(the comparison side) in a store session of its own. A series here is what `redline history`
calls one (test × topology × target), with the target being the branch — its repository, its
build variant and configuration, the platform that measured it — instead of one commit's label:
a point is one push's work item, every comparison-side run of it, in the order the pushes' first
results came in. Its change points come from `redline history`'s own detector
(redline.analysis.history `load_series` and `analyse_all`: the same noise model, the same p-value
and minimum effect), on the metrics compare judges.

A change point's two builds are the pushed heads of the work items before and after it, so they
are named as the work items' `comparison` targets (`git:REPO@SHA` for the webhook's pushes). Its
identity is the pair of builds on the platform (`key`): the same change seen by a later check,
or after a restart, has the same key, whatever tests or metrics moved there.

What was decided for each change point seen is recorded in the store, as a session document
(`history_change_points`) of the push's work item whose completion ran the check: `seen` is the
union of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from redline.analysis import history
from redline.analysis.comparison import COMPARED_METRICS
from redline.core.run import run_key
from redline.engine.job import suite_reference
from redline.fleet import entries
from redline.store.fleet_ledger import Ledger
from redline.store.results import Store

SEEN = "history_change_points"      # the session document recording what each check decided
WINDOW = 100                        # the newest pushes of a branch a check looks at (older ones were checked before)


@dataclass
class Push:
    work: entries.WorkSummary
    session: int


@dataclass
class Found:
    """One change point of a branch's history: the builds around it and what moved there."""

    key: str                      # the platform and the two builds around it: the change point's identity
    platform: str
    before: entries.WorkSummary   # the push whose head is the last build before the change point
    after: entries.WorkSummary    # the push whose head is the first build after it
    metric: str
    keys: list[str]               # the test keys that moved on `metric` there
    tests: list[list[str]]        # [suite reference, test name] of each
    topologies: list[str]
    series: list[str]             # the series' names (as `redline history` prints them)
    time: str                     # when the first session after it ran (ISO 8601, UTC)
    delta_pct: float              # the first series' change
    p_value: float

    def origin(self, checked_by: str) -> dict:
        """The bisection's origin as its state and report name it."""
        return {"kind": "history", "key": self.key, "series": self.series, "metric": self.metric,
                "time": self.time, "delta_pct": self.delta_pct, "p_value": self.p_value,
                "before": self.before.work_id, "after": self.after.work_id, "checked_by": checked_by}


def source_of(target: str) -> str:
    """The branch's build source: a git: target without its commit; any other target as it is."""
    return target[:target.rindex("@")] if target.startswith("git:") and "@" in target else target


def pushes_of(ledger: Ledger, work: entries.WorkSummary, say) -> list[Push]:
    """The finished push work items of `work`'s branch (same branch, same build source), oldest first.
    Each stored work hash is checked again (entries.work_summary); one that is not well formed is one
    log line and is left out."""
    found = []
    for work_id, session, document in ledger.finished_work():
        if document.get("source") != "push" or document.get("branch") != work.branch:
            continue
        try:
            push = entries.work_summary(document, work_id)
        except entries.Malformed as exc:
            say("history: stored work hash left out", work=work_id, error=str(exc))
            continue
        if source_of(push.comparison) == source_of(work.comparison):
            found.append(Push(push, session))
    return found


def _series_label(push: entries.WorkSummary, platform: str) -> str:
    side = next((s for s in push.sides if s.name == "comparison"), None)
    label = f"{source_of(push.comparison)} branch {push.branch}"
    if side is not None and side.variant:
        label += f" variant {side.variant}"
    if side is not None and side.config:
        label += " [" + " ".join(f"{k}={v}" for k, v in side.config) + "]"
    return f"{label} on {platform}"


def change_points(store: Store, work: entries.WorkSummary, *, preferred: str,
                  p_threshold: float = history.DEFAULT_P_VALUE, say=lambda event, **fields: None) -> list[Found]:
    """Every change point of the branch's series of the tests of `work` (over the branch's newest
    WINDOW pushes), grouped by the two builds around it; in each, the metric followed is `preferred`
    when it changed there, else the first compared metric that did."""
    ledger = Ledger(store)
    pushes = pushes_of(ledger, work, say)[-WINDOW:]
    if len(pushes) < 2 * history.MIN_SESSIONS:
        return []
    by_session = {push.session: push.work for push in pushes}
    own = [row for row in ledger.comparison_values([work.work_id], list(COMPARED_METRICS)) if row["suite_file"]]
    suites = {(row["test"], row["topology"]): row["suite_file"] for row in own}    # a job can name their suite
    rows = ledger.comparison_values([p.work.work_id for p in pushes], list(COMPARED_METRICS),
                                    sorted({test for test, _ in suites}))
    grouped: dict[str, dict] = {}
    floors = store.noise_floors()
    for metric in COMPARED_METRICS:
        of_metric = _rows_of_series(rows, pushes, metric, set(suites))
        platform_of = {row["target"]: row["platform"] for row in of_metric}
        for series in history.analyse_all(history.load_series(of_metric, None), floors=floors, metric=metric,
                                          p_threshold=p_threshold):
            for cp in series.change_points:
                before = by_session[series.points[cp.index - 1].session]
                after = by_session[series.points[cp.index].session]
                platform = platform_of[series.target]
                key = f"{platform}: {before.comparison} → {after.comparison}"
                group = grouped.setdefault(key, {"platform": platform, "before": before, "after": after,
                                                 "metrics": {}})
                group["metrics"].setdefault(metric, []).append((series, cp))
    return [_found(key, group, suites, preferred) for key, group in grouped.items()]


def _rows_of_series(rows, pushes: list[Push], metric: str, tests: set[tuple[str, str]]) -> list[dict]:
    """The rows of `metric` of the wanted (test, topology)s as `redline history` reads them, the target
    being the branch's series label, in push order (a push's runs together: one point each)."""
    order = {push.work.work_id: n for n, push in enumerate(pushes)}
    by_session = {push.session: push.work for push in pushes}
    chosen = sorted((row for row in rows if row["metric"] == metric and (row["test"], row["topology"]) in tests),
                    key=lambda row: (order[row["work_id"]], row["started_at"]))
    return [{**dict(row), "target": _series_label(by_session[row["session_id"]], row["platform"])}
            for row in chosen]


def _found(key: str, group: dict, suites: dict, preferred: str) -> Found:
    metrics = group["metrics"]
    metric = preferred if preferred in metrics else next(m for m in COMPARED_METRICS if m in metrics)
    moved = metrics[metric]
    keys = sorted({run_key(s.test, s.topology) for s, _ in moved})
    tests = sorted({(suite_reference(Path(suites[(s.test, s.topology)])), s.test) for s, _ in moved})
    first, cp = moved[0]
    started_at = first.points[cp.index].started_at
    return Found(key=key, platform=group["platform"], before=group["before"], after=group["after"], metric=metric,
                 keys=keys, tests=[list(t) for t in tests], topologies=sorted({s.topology for s, _ in moved}),
                 series=[s.name for s, _ in moved],
                 time=datetime.fromtimestamp(started_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 delta_pct=float(cp.delta_pct), p_value=float(cp.p_value))


def seen(store: Store) -> set[str]:
    """The keys of every change point a check has decided on already."""
    return {entry["key"] for _, document in store.documents_named(SEEN) for entry in document.get("change_points", [])}


def record(store: Store, work_id: str, decided: list[dict]) -> None:
    """What this check decided ({key, outcome, bisection, line} per change point), on the session of the
    push that ran it, beside what an earlier run of the same check decided."""
    if not decided:
        return
    session = Ledger(store).session_of(work_id, {})
    earlier = store.session_document(session, SEEN) or {"work_id": work_id, "change_points": []}
    store.save_session_document(session, SEEN, {**earlier, "change_points": earlier["change_points"] + decided})
