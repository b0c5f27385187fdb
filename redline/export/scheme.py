"""The key and label scheme of the Redis Benchmarks Specification's RedisTimeSeries data sink,
and where redline's metrics go in it: the one place that knows it.

Facts taken from the upstream exporter (PyPI `redis-benchmarks-specification`,
`__common__/timeseries.py` and `__common__/runner.py`, read, not copied):

- a result series is `ci.benchmarks.redis/by.{branch|version|hash}/{triggering_env}/{org}/{repo}/
  {test}/{build_variant}/{running_platform}/{deployment_type}[/{deployment_name}]/{value}/{metric}`
  (the deployment name only when it differs from the type);
- a metric's name is its memtier JSON path without `$.`, quotes and brackets, spaces as `_`:
  `ALL_STATS.Totals.Ops/sec`, `ALL_STATS.Totals.Percentile_Latencies.p50.00`;
- its labels: github_org, github_repo, github_org/github_repo, deployment_type, deployment_name,
  triggering_env, build_variant, running_platform, the by-label (`branch`, `version` or `hash`)
  with `deployment_name+{by}` and `target+{by}`, test_name, test_name:build_variant, metric,
  metric_name, metric_context_path, test_name:metric_context_path, metric_jsonpath; a by.hash
  series also carries `branch` and `version`; a by.branch or by.version series has no `hash`
  label (redis-benchmarks-compare filters on `hash==` unless it compares hashes);
- INFO memory at the end of a benchmark: `ci.benchmarks.redis/{env}/{org}/{repo}/{test}/
  by.{by}/{value}/benchmark_end/{platform}/{deployment}/memory_used_memory`;
- the sets compare and the dashboards list from: `ci.benchmarks.redis/{env}/{org}/{repo}:testcases`,
  `…:branches`, `…:versions`, `…:platforms`, `…:build_variants` (each also as `…:zset`), and
  `…:deployment_names`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "ci.benchmarks.redis"
BY_KINDS = ("branch", "version", "hash")
UNSTABLE_VERSION = "255.255.255"     # upstream keeps this version only for the `unstable` branch
EXPORTER_LABEL = ("exporter", "redline")


@dataclass(frozen=True)
class UpstreamMetric:
    """A redline metric under its upstream name: the memtier JSON path it corresponds to."""

    redline: str              # name in redline.core.metrics
    jsonpath: str             # memtier_benchmark JSON path without `$.`
    context_path: str         # the path of the value's parent, as upstream's jsonpath library prints it

    @property
    def name(self) -> str:
        return upstream_metric_name(self.jsonpath)


# One memtier run is what memtier calls "ALL STATS": redline's run-level numbers are those totals.
# Not mapped, because redline does not measure the same thing: "Latency" (memtier's mean),
# "Misses/sec" (memtier counts nil replies; redline counts INFO keyspace_misses, other commands too).
UPSTREAM_METRICS: tuple[UpstreamMetric, ...] = (
    UpstreamMetric("ops_per_sec", '"ALL STATS".Totals."Ops/sec"', "Totals"),
    UpstreamMetric("p50_ms", '"ALL STATS".Totals."Percentile Latencies"."p50.00"', "'Percentile Latencies'"),
    UpstreamMetric("p90_ms", '"ALL STATS".Totals."Percentile Latencies"."p90.00"', "'Percentile Latencies'"),
    UpstreamMetric("p99_ms", '"ALL STATS".Totals."Percentile Latencies"."p99.00"', "'Percentile Latencies'"),
    UpstreamMetric("p999_ms", '"ALL STATS".Totals."Percentile Latencies"."p99.90"', "'Percentile Latencies'"),
)
UPSTREAM_BY_REDLINE = {m.redline: m for m in UPSTREAM_METRICS}
MEMORY_METRIC = ("used_memory_bytes", "memory_used_memory")   # INFO used_memory at the window's end
REDLINE_METRIC_PREFIX = "redline."        # redline's own series: redline.server_cpu_us_per_op, …
RUN_INDEX_METRIC = "redline.run_index"    # value = the run's index in its session, at the run's timestamp
SESSION_METRIC = "redline.session"        # value = the run's session id in the store it came from
COMPARE_BY = "redline.compare"            # verdict series: by.redline.compare/{baseline}..{comparison}
VERDICT_CODES = {"regression": -1.0, "no_change": 0.0, "improvement": 1.0, "inconclusive": 2.0}
VERDICT_STATS = ("delta_pct", "ci_low_pct", "ci_high_pct", "p_value")
CHANGE_POINT_BY = "redline.changepoint"   # `redline history`'s change points: by.redline.changepoint/{target}
HISTORY_P_VALUE = 0.001                   # as `redline history`'s default


def upstream_metric_name(jsonpath: str) -> str:
    """Upstream's cleaning of a JSON path into a metric name."""
    name = jsonpath[2:] if jsonpath.startswith("$.") else jsonpath
    for character in "'\"()":
        name = name.replace(character, "")
    return name.replace(" ", "_")


@dataclass(frozen=True)
class Project:
    """What the scheme needs and a run does not say: where the results belong."""

    github_org: str = "redis"
    github_repo: str = "redis"
    triggering_env: str = "redline"

    @property
    def prefix(self) -> str:
        return f"{PREFIX}/{self.triggering_env}/{self.github_org}/{self.github_repo}"


@dataclass(frozen=True)
class Placement:
    """Where one run's results go: the build it measured (branch, version, hash, how it was
    built), the machine and the deployment."""

    test: str
    build_variant: str
    running_platform: str
    deployment_type: str        # the topology (oss-standalone, oss-cluster-03-primaries, …)
    deployment_name: str        # the topology and the side's server configuration, if any
    branch: str | None = None
    version: str | None = None
    hash: str | None = None

    def by_values(self) -> dict[str, str]:
        """by-kind → value, for the kinds this run can be filed under (upstream's rules)."""
        values = {"branch": self.branch, "version": self.version, "hash": self.hash}
        if self.version == UNSTABLE_VERSION and self.branch != "unstable":
            values["version"] = None
        return {kind: value for kind, value in values.items() if value}

    @property
    def deployment_path(self) -> str:
        if self.deployment_name == self.deployment_type:
            return self.deployment_type
        return f"{self.deployment_type}/{self.deployment_name}"

    @property
    def ref(self) -> str:
        """The shortest name of the build: branch, else version, else hash (verdict series)."""
        values = self.by_values()
        name = next((values[kind] for kind in BY_KINDS if kind in values), "unknown")
        return name if self.deployment_name == self.deployment_type else f"{name}@{self.deployment_name}"


def series_key(project: Project, placement: Placement, by: str, value: str, metric: str) -> str:
    return (f"{PREFIX}/by.{by}/{project.triggering_env}/{project.github_org}/{project.github_repo}/"
            f"{placement.test}/{placement.build_variant}/{placement.running_platform}/"
            f"{placement.deployment_path}/{value}/{metric}")


def project_labels(project: Project, placement: Placement) -> dict[str, str]:
    return {
        "github_org": project.github_org,
        "github_repo": project.github_repo,
        "github_org/github_repo": f"{project.github_org}/{project.github_repo}",
        "deployment_type": placement.deployment_type,
        "deployment_name": placement.deployment_name,
        "triggering_env": project.triggering_env,
        "build_variant": placement.build_variant,
        "running_platform": placement.running_platform,
        EXPORTER_LABEL[0]: EXPORTER_LABEL[1],
    }


def by_labels(project: Project, placement: Placement, by: str, value: str) -> dict[str, str]:
    labels = {by: value,
              f"deployment_name+{by}": f"{placement.deployment_name} {value}",
              f"target+{by}": f"{value} {project.github_repo}"}
    if by == "hash":        # upstream extends its by.hash series with what else it knows
        labels.update({kind: v for kind, v in placement.by_values().items() if kind != "hash"})
    return labels


def result_labels(project: Project, placement: Placement, by: str, value: str, metric: str,
                  redline_metric: str, upstream: UpstreamMetric | None = None) -> dict[str, str]:
    """Every label of one result series."""
    labels = {**project_labels(project, placement), **by_labels(project, placement, by, value),
              "test_name": placement.test,
              "test_name:build_variant": f"{placement.test}:{placement.build_variant}",
              "metric": metric, "metric_name": metric, "redline_metric": redline_metric}
    if upstream is not None:
        labels.update({"metric_context_path": upstream.context_path,
                       "test_name:metric_context_path": f"{placement.test}:{upstream.context_path}",
                       "metric_jsonpath": upstream.jsonpath})
    return labels


def memory_key(project: Project, placement: Placement, by: str, value: str) -> str:
    return (f"{project.prefix}/{placement.test}/by.{by}/{value}/benchmark_end/{placement.running_platform}/"
            f"{placement.deployment_name}/{MEMORY_METRIC[1]}")


def memory_labels(project: Project, placement: Placement, by: str, value: str) -> dict[str, str]:
    labels = {**project_labels(project, placement), "test_name": placement.test, "metric": MEMORY_METRIC[1],
              "redline_metric": MEMORY_METRIC[0], by: value}
    del labels["build_variant"]          # upstream's benchmark_end series carry no build variant
    if by == "hash":
        labels.update({kind: v for kind, v in placement.by_values().items() if kind != "hash"})
    return labels


def verdict_key(project: Project, baseline: Placement, comparison: Placement, metric: str, stat: str) -> str:
    return (f"{PREFIX}/by.{COMPARE_BY}/{project.triggering_env}/{project.github_org}/{project.github_repo}/"
            f"{baseline.test}/{comparison.build_variant}/{comparison.running_platform}/{comparison.deployment_type}/"
            f"{baseline.ref}..{comparison.ref}/{REDLINE_METRIC_PREFIX}{metric}.{stat}")


def verdict_labels(project: Project, baseline: Placement, comparison: Placement, metric: str,
                   stat: str) -> dict[str, str]:
    return {**project_labels(project, comparison), "test_name": baseline.test,
            "comparison_kind": COMPARE_BY, "baseline": baseline.ref, "comparison": comparison.ref,
            "metric": f"{REDLINE_METRIC_PREFIX}{metric}.{stat}", "redline_metric": metric, "stat": stat}


def change_point_key(project: Project, test: str, platform: str, topology: str, target: str, metric: str) -> str:
    """One history series' change points (redline.analysis.history: a test × topology × target on one
    machine); a sample at the first session of each new level, its value the step in %."""
    return (f"{PREFIX}/by.{CHANGE_POINT_BY}/{project.triggering_env}/{project.github_org}/{project.github_repo}/"
            f"{test}/{platform}/{topology}/{slug(target)}/{REDLINE_METRIC_PREFIX}{metric}.change_pct")


def change_point_labels(project: Project, test: str, platform: str, topology: str, target: str,
                        metric: str) -> dict[str, str]:
    return {"github_org": project.github_org, "github_repo": project.github_repo,
            "triggering_env": project.triggering_env, "running_platform": platform,
            "deployment_name": topology, "deployment_type": topology, EXPORTER_LABEL[0]: EXPORTER_LABEL[1],
            "test_name": test, "target": slug(target), "comparison_kind": CHANGE_POINT_BY,
            "metric": f"{REDLINE_METRIC_PREFIX}{metric}.change_pct", "redline_metric": metric}


def set_keys(project: Project) -> dict[str, str]:
    """The secondary keys upstream keeps next to the series (what compare and dashboards list)."""
    return {name: f"{project.prefix}:{name}" for name in
            ("testcases", "branches", "versions", "platforms", "build_variants", "deployment_names")}


SLUG = re.compile(r"[^A-Za-z0-9_.:-]+")


def slug(text: str) -> str:
    """A piece of a key or a label value that needs no quoting in a TS filter: no spaces, commas,
    parentheses or '='."""
    return SLUG.sub("-", text).strip("-") or "-"
