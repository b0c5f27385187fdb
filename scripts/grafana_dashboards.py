"""redline's Grafana dashboards as code: writes grafana/dashboards/*.json with the Grafana Foundation
SDK (PyPI `grafana-foundation-sdk`, a test extra).

    .venv/bin/python scripts/grafana_dashboards.py            # (re)write the JSON
    .venv/bin/python scripts/grafana_dashboards.py --check    # exit 1 if the committed JSON is stale

Three dashboards on the RedisTimeSeries data written by `redline export redistimeseries` or
`--export` (docs/export.md), through Grafana's Redis data source plugin (`redis-datasource`,
provisioned by grafana/provisioning/ with the uid below):

- history: every run of a test as a point, by branch, version or hash; the change points
  `redline history` finds; server CPU per operation;
- compare: the verdicts of compare sessions, their deltas with confidence intervals;
- fleet: the fleet's queues, read from the fleet's own Redis (a second data source, uid below) under
  the names of redline.fleet.keys: jobs per platform, results, dead letters, comments.

Every query of history and compare is a TS.MRANGE/TS.MGET label filter on labels the exporter writes
(redline.export.scheme); every key of the fleet dashboard comes from redline.fleet.keys;
tests/test_export.py checks both, and that this script's output is what is committed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import statetimeline, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redline.core import metrics  # noqa: E402
from redline.export import scheme  # noqa: E402
from redline.fleet import keys as fleet_keys  # noqa: E402

OUT = REPO / "grafana" / "dashboards"
DATASOURCE = model.DataSourceRef(type_val="redis-datasource", uid="redline-redistimeseries")
FLEET_DATASOURCE = model.DataSourceRef(type_val="redis-datasource", uid="redline-fleet")
PROJECT = "triggering_env=$env github_org=$org github_repo=$repo"
ENTRIES_SHOWN = 20


class RedisQuery(cogvariants.Dataquery):
    """A query of the Redis data source plugin (its RedisQuery): a RedisTimeSeries command with a
    label filter (type timeSeries), or a plain command on one key (type command)."""

    def __init__(self, ref_id: str, command: str, *, filter_text: str | None = None, key: str | None = None,
                 legend: str | None = None, count: int | None = None, source: model.DataSourceRef = DATASOURCE):
        self.ref_id, self.command, self.filter_text, self.key, self.legend = ref_id, command, filter_text, key, legend
        self.count, self.source = count, source

    def to_json(self) -> dict[str, object]:
        payload: dict[str, object] = {"refId": self.ref_id, "datasource": self.source, "command": self.command,
                                      "type": "timeSeries" if self.filter_text is not None else "command"}
        optional = {"filter": self.filter_text, "keyName": self.key, "legend": self.legend, "count": self.count}
        payload.update({name: value for name, value in optional.items() if value is not None})
        return payload


class Query(cogbuilder.Builder[RedisQuery]):
    def __init__(self, ref_id: str, command: str, **fields):
        self._internal = RedisQuery(ref_id, command, **fields)

    def build(self) -> RedisQuery:
        return self._internal


def mrange(ref_id: str, filter_text: str, legend: str | None = None) -> Query:
    return Query(ref_id, "ts.mrange", filter_text=f"exporter=redline {PROJECT} {filter_text}", legend=legend)


def custom(name: str, label: str, values: list[str]) -> dash.CustomVariable:
    return dash.CustomVariable(name).label(label).values(",".join(values)).current(
        model.VariableOption(text=values[0], value=values[0], selected=True))


def from_set(name: str, label: str, set_name: str) -> dash.QueryVariable:
    """A variable listing one of upstream's secondary sets (SMEMBERS)."""
    return (dash.QueryVariable(name).label(label).datasource(DATASOURCE)
            .query(f"SMEMBERS ci.benchmarks.redis/$env/$org/$repo:{set_name}")
            .refresh(model.VariableRefresh.ON_DASHBOARD_LOAD))


def project_variables(board: dash.Dashboard) -> dash.Dashboard:
    project = scheme.Project()
    return (board.with_variable(custom("env", "triggering_env", [project.triggering_env, "ci"]))
            .with_variable(custom("org", "github_org", [project.github_org]))
            .with_variable(custom("repo", "github_repo", [project.github_repo])))


def legend() -> common_builders.VizLegendOptions:
    return (common_builders.VizLegendOptions().display_mode(common.LegendDisplayMode.LIST)
            .placement(common.LegendPlacement.BOTTOM).show_legend(True))


def points(panel: timeseries.Panel) -> timeseries.Panel:
    """Every sample a point (each run is one), joined by a thin line."""
    return (panel.legend(legend()).draw_style(common.GraphDrawStyle.LINE).line_width(1).show_points(common.VisibilityMode.ALWAYS)
            .point_size(6).span_nulls(True).datasource(DATASOURCE))


def history_dashboard() -> dash.Dashboard:
    compared = [m.name for m in metrics.COMPARED]
    board = (dash.Dashboard("redline — per-test history").uid("redline-history").tags(["redline", "benchmarks"])
             .time("now-90d", "now").refresh("").timezone("utc").editable())
    board = project_variables(board)
    board = (board.with_variable(from_set("test", "test", "testcases"))
             .with_variable(from_set("platform", "running_platform", "platforms"))
             .with_variable(custom("metric", "metric", compared))
             .with_variable(custom("by", "by", ["branch", "version", "hash"])))
    every_run = (points(timeseries.Panel().title("$test: every run of $metric, by $by").span(24).height(10))
                 .description("One point per run at its start (several runs per session or commit are several "
                              "points); one line per $by.")
                 .with_target(mrange("A", "test_name=$test redline_metric=$metric running_platform=$platform "
                                          "$by!= deployment_type=oss-standalone", legend="$by")))
    steps = (timeseries.Panel().title("$test: change points of $metric (step in %)").span(12).height(8)
             .description("Where `redline history` finds a new level (first session of it), on this platform; "
                          "one series per target.")
             .legend(legend()).draw_style(common.GraphDrawStyle.BARS).show_points(common.VisibilityMode.ALWAYS).unit("percent")
             .datasource(DATASOURCE)
             .with_target(mrange("A", f"comparison_kind={scheme.CHANGE_POINT_BY} test_name=$test "
                                      "redline_metric=$metric running_platform=$platform", legend="target")))
    cpu = (points(timeseries.Panel().title("$test: server CPU per operation").span(12).height(8).unit("µs"))
           .with_target(mrange("A", "test_name=$test redline_metric=server_cpu_us_per_op running_platform=$platform "
                                    "$by!=", legend="$by")))
    return board.with_panel(every_run).with_panel(steps).with_panel(cpu)


VERDICT_COLOURS = {"regression": "red", "no_change": "green", "improvement": "blue", "inconclusive": "text"}


def verdict_mappings() -> list[model.ValueMapping]:
    return [model.ValueMap(options={str(int(code)): model.ValueMappingResult(text=name.replace("_", " "),
                                                                             color=VERDICT_COLOURS[name])})
            for name, code in scheme.VERDICT_CODES.items()]


def compare_dashboard() -> dash.Dashboard:
    compared = [m.name for m in metrics.COMPARED]
    board = (dash.Dashboard("redline — compare verdicts").uid("redline-compare").tags(["redline", "benchmarks"])
             .time("now-30d", "now").refresh("").timezone("utc").editable())
    board = project_variables(board)
    board = board.with_variable(from_set("test", "test", "testcases")).with_variable(custom("metric", "metric",
                                                                                            compared))
    verdicts = (statetimeline.Panel().title("verdicts of $metric, every test").span(24).height(10)
                .description("One row per test and baseline..comparison pair; one cell per compare session.")
                .legend(legend()).show_value(common.VisibilityMode.AUTO).fill_opacity(70).line_width(0)
                .mappings(verdict_mappings())
                .datasource(DATASOURCE)
                .with_target(mrange("A", f"comparison_kind={scheme.COMPARE_BY} stat=verdict redline_metric=$metric",
                                    legend="test_name")))
    delta = (points(timeseries.Panel().title("$test: $metric change (comparison vs baseline) and its interval")
                    .span(24).height(9).unit("percent"))
             .description("The median's change and its confidence interval (redline compare), one point per "
                          "session; nothing is drawn for inconclusive sessions without an estimate.")
             .with_target(mrange("A", f"comparison_kind={scheme.COMPARE_BY} test_name=$test redline_metric=$metric "
                                      "stat=(delta_pct,ci_low_pct,ci_high_pct)", legend="stat")))
    latest = (table.Panel().title("latest verdict per test and metric").span(24).height(10).show_header(True)
              .datasource(DATASOURCE)
              .mappings(verdict_mappings())
              .with_target(Query("A", "ts.mget", filter_text=f"exporter=redline {PROJECT} "
                                                             f"comparison_kind={scheme.COMPARE_BY} stat=verdict")))
    return board.with_panel(verdicts).with_panel(delta).with_panel(latest)


def fleet_stream(title: str, description: str, command: str, key: str, **fields) -> table.Panel:
    """A table of one of the fleet's streams: XINFO STREAM (length, groups, first and last entry) or
    its latest entries (XREVRANGE)."""
    return (table.Panel().title(title).description(description).span(12).height(8).show_header(True)
            .datasource(FLEET_DATASOURCE)
            .with_target(Query("A", command, key=key, source=FLEET_DATASOURCE, **fields)))


def fleet_dashboard() -> dash.Dashboard:
    """The fleet's queues as `redline fleet status` sees them, from the fleet's Redis; every key is
    one of redline.fleet.keys (the platform a variable listing the platforms that have a jobs stream)."""
    board = (dash.Dashboard("redline — fleet queues").uid("redline-fleet").tags(["redline", "fleet"])
             .time("now-24h", "now").refresh("30s").timezone("utc").editable())
    board = board.with_variable(
        dash.QueryVariable("platform").label("platform").datasource(FLEET_DATASOURCE)
        .query(f"SMEMBERS {fleet_keys.PLATFORMS.key()}").refresh(model.VariableRefresh.ON_DASHBOARD_LOAD))
    jobs = fleet_keys.JOBS.key(platform="$platform")
    panels = [
        fleet_stream(f"{jobs}: jobs of $platform", f"Jobs waiting or running on $platform (consumer group "
                     f"`{fleet_keys.AGENTS_GROUP}`); an entry leaves the stream when its result is published.",
                     "xinfoStream", jobs),
        fleet_stream(f"{fleet_keys.RESULTS.key()}: results not stored yet", "Results the agents published and the "
                     f"collector (group `{fleet_keys.COLLECTOR_GROUP}`) has not stored yet: near empty while it keeps up.",
                     "xinfoStream", fleet_keys.RESULTS.key()),
        fleet_stream(f"{fleet_keys.DEAD.key()}: jobs that failed on every attempt", "The latest dead-lettered jobs "
                     "with their error.", "xrevrange", fleet_keys.DEAD.key(), count=ENTRIES_SHOWN),
        fleet_stream(f"{fleet_keys.COMMENTS.key()}: latest comments", "The pull-request comment of each complete "
                     "work item (state done or failed).", "xrevrange", fleet_keys.COMMENTS.key(), count=ENTRIES_SHOWN),
    ]
    for panel in panels:
        board = board.with_panel(panel)
    return board


DASHBOARDS = {"redline-history.json": history_dashboard, "redline-compare.json": compare_dashboard,
              "redline-fleet.json": fleet_dashboard}


def rendered() -> dict[str, str]:
    return {name: json.dumps(make().build(), cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            for name, make in DASHBOARDS.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description="write redline's Grafana dashboards (grafana/dashboards/*.json)")
    parser.add_argument("--check", action="store_true", help="only compare with the committed files; exit 1 if stale")
    args = parser.parse_args()
    stale = []
    for name, content in rendered().items():
        path = OUT / name
        if args.check:
            if not path.exists() or path.read_text() != content:
                stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print(f"stale: {', '.join(stale)} (run scripts/grafana_dashboards.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
