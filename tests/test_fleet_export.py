"""The fleet's collector with `--export`: what it stores also lands in a real redis-server with the
real RedisTimeSeries module (tests/timeseries_server.py), read back with TS.MRANGE by labels —
every stored run once, its values, the verdicts; and a result delivered again to a restarted
collector writes nothing new. Real fleet Redis (AOF), real collector / `fleet local` processes,
real SQLite."""

from __future__ import annotations

import json
import re
import sqlite3
import time

import pytest

from conftest import REPO

from redline.export import scheme
from redline.fleet import keys
from redline.core.run import Run
from tests.fleet_helpers import (QUICK, SERVER, client, finished, fleet_local, query, redis_with_aof, redline_process,
                                 stop, submit, wait_for)
from tests.test_fleet_collector import done, one_job_work, result
from timeseries_server import TimeSeriesServer

OPS = "metric=ALL_STATS.Totals.Ops/sec"
BRANCH = "fleet-branch"


@pytest.fixture
def timeseries(tmp_path):
    server = TimeSeriesServer(tmp_path / "timeseries")
    yield server
    server.stop()


def mrange(ts, *filters) -> dict[str, tuple[dict, dict[int, float]]]:
    reply = ts.ts().mrange("-", "+", list(filters), with_labels=True)
    return {key: (dict(labels), {int(at): float(value) for at, value in samples})
            for entry in reply for key, (labels, samples) in entry.items()}


def by_branch(ts, *filters) -> dict[int, float]:
    """The samples of the one by.branch series the filters find."""
    found = {key: samples for key, (_, samples) in mrange(ts, *filters, f"branch={BRANCH}").items()
             if key.startswith("ci.benchmarks.redis/by.branch/")}
    (samples,) = found.values()
    return samples


def total_samples(ts) -> int:
    return sum(len(samples) for _, samples in mrange(ts, "exporter=redline").values())


def exported_lines(log) -> list[dict]:
    """The `exported` log lines of the collector, as {field: value}."""
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in log.read_text().splitlines() if ": exported " in line]


def assert_fleet_dashboard_reads_this_fleet(r) -> None:
    """Each query of grafana/dashboards/redline-fleet.json, run on a fleet Redis that has done a work
    item: the platform variable lists its platform, every XINFO STREAM finds its stream."""
    board = json.loads((REPO / "grafana" / "dashboards" / "redline-fleet.json").read_text())
    (variable,) = board["templating"]["list"]
    platforms = r.execute_command(*variable["query"].split())
    assert platforms
    for platform in platforms:
        for panel in board["panels"]:
            (target,) = panel["targets"]
            key = target["keyName"].replace("$platform", platform)
            if target["command"] == "xinfoStream":
                assert r.xinfo_stream(key)["groups"] == 1, panel["title"]
            else:
                r.xrevrange(key, count=target["count"])        # a stream, or no key yet (no dead job)


def measured_runs(seed: float) -> list[dict]:
    """A job's runs as an agent publishes them: both sides, two runs each, distinct starts."""
    return [Run(test="quick-set-sadd", target=SERVER, side=side, run_index=index, status="ok", started_at=seed + step,
                finished_at=seed + step + 1, metrics={"ops_per_sec": 1000.0 + 10 * step}).to_json()
            for step, (side, index) in enumerate((s, i) for i in range(2) for s in ("baseline", "comparison"))]


def test_a_result_delivered_again_after_a_collector_restart_writes_nothing_new(tmp_path, timeseries):
    """The collector stores and exports a job; a restarted collector is given the same entry again
    (pending for it, as when it was killed between its export and its XACK) and a second agent's
    result for the same job: the first is exported again without one new sample, the second is
    neither stored nor exported."""
    store, log = tmp_path / "fleet.db", tmp_path / "collector.log"
    collector_argv = ("collector", "--store", store, "--export", timeseries.url, "--branch", BRANCH)
    ts = timeseries.client()
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        work_id, job_id = one_job_work(r)
        documents = measured_runs(time.time() - 3600)
        entry = result(work_id, job_id, runs=json.dumps(documents))
        process = redline_process(*collector_argv, "--redis", url, log=log)
        try:
            r.xadd(keys.RESULTS.key(), entry)
            wait_for(lambda: r.xlen(keys.RESULTS.key()) == 0 and done(r, work_id), "the job stored and the item done")
        finally:
            assert stop(process) == 0
        first = exported_lines(log)
        assert [line.get("job") for line in first] == [job_id, None]      # the job, then the complete work item
        assert first[0]["runs"] == "4" and int(first[0]["written"]) > 0 and first[0]["present"] == "0"
        # the complete work item: its verdicts written, the job's runs already there
        assert (first[1]["work"], first[1]["written"], first[1]["present"]) == (work_id, first[1]["verdicts"],
                                                                                first[0]["written"])
        expected = {round(d["started_at"] * 1000): d["ops_per_sec"] for d in documents}
        assert by_branch(ts, OPS, "running_platform=p") == expected
        verdicts = mrange(ts, f"comparison_kind={scheme.COMPARE_BY}", "stat=verdict")
        assert len(verdicts) == query(store, "SELECT count(*) FROM comparisons")[0][0] > 0
        before, keys_before = total_samples(ts), sorted(ts.scan_iter(count=1000))
        assert_fleet_dashboard_reads_this_fleet(r)

        r.xadd(keys.RESULTS.key(), entry)
        assert r.xreadgroup(keys.COLLECTOR_GROUP, "collector", {keys.RESULTS.key(): ">"}, count=1)  # pending, no ACK
        rerun = [{**d, "ops_per_sec": 1.0, "uid": f"other-{n}"} for n, d in enumerate(measured_runs(0))]
        r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(rerun), agent="second"))
        process = redline_process(*collector_argv, "--redis", url, log=log)
        try:
            wait_for(lambda: r.xlen(keys.RESULTS.key()) == 0, "both entries handled")
        finally:
            assert stop(process) == 0
    again = exported_lines(log)[len(first):]
    assert [(line["job"], line["runs"], line["written"], line["present"]) for line in again] == [
        (job_id, "4", "0", first[0]["written"]),      # the same entry: every sample already there
        (job_id, "0", "0", "0")]                      # the second agent's runs: not stored, not exported
    assert total_samples(ts) == before and sorted(ts.scan_iter(count=1000)) == keys_before
    assert by_branch(ts, OPS, "running_platform=p") == expected
    assert query(store, "SELECT count(*) FROM runs")[0][0] == 4


def test_fleet_local_with_export_puts_every_stored_run_in_redistimeseries_once(tmp_path, timeseries):
    """`fleet local --export`: a work item of one test measured by a real agent; TS.MRANGE by labels
    finds every stored run once with its stored value, under the fleet platform, and its verdicts."""
    store, log = tmp_path / "fleet.db", tmp_path / "fleet.log"
    process, url = fleet_local("--agents", 1, "--store", store, "--platform", "ci", "--dir", tmp_path / "redis",
                               "--export", timeseries.url, "--branch", BRANCH, "--triggering-env", "fleet", log=log)
    try:
        work = submit(url, "--platform", "ci", "--baseline", SERVER, "--comparison", SERVER, "--name", "set-sadd",
                      *QUICK)
        wait_for(lambda: finished(url, work["work_id"]), "the work item done")
    finally:
        assert stop(process) == 0
    db = sqlite3.connect(store)
    runs = db.execute("SELECT r.started_at, m.value FROM runs r JOIN metrics m ON m.run_id = r.id "
                      "WHERE m.name='ops_per_sec' AND r.status='ok' AND r.purpose='measure'").fetchall()
    assert len(runs) == 4
    ts = timeseries.client()
    assert by_branch(ts, OPS, "test_name=quick-set-sadd", "running_platform=ci", "triggering_env=fleet") == {
        round(started * 1000): value for started, value in runs}
    (key,) = mrange(ts, "metric=redline.run_index", f"branch={BRANCH}", "hash==")
    assert key.startswith("ci.benchmarks.redis/by.branch/fleet/redis/redis/quick-set-sadd/prebuilt/ci/")
    verdicts = mrange(ts, f"comparison_kind={scheme.COMPARE_BY}", "stat=verdict", "running_platform=ci")
    stored = dict(db.execute("SELECT metric, verdict FROM comparisons").fetchall())
    assert {labels["redline_metric"]: samples for labels, samples in verdicts.values()}.keys() == stored.keys()
    for labels, samples in verdicts.values():
        assert list(samples.values()) == [scheme.VERDICT_CODES[stored[labels["redline_metric"]]]]
    assert ts.smembers("ci.benchmarks.redis/fleet/redis/redis:platforms") == {"ci"}


def test_the_verdicts_of_a_work_item_on_two_platforms_go_under_each_platform(timeseries):
    """The collector names a test `KEY on PLATFORM` in the comparisons of a work item that ran on
    several platforms; each platform's runs and verdicts are exported under that platform."""
    from redline.export.redistimeseries import RedisTimeSeriesExporter, connect
    from redline.analysis.comparison import TestComparison
    from redline.analysis.stats import MetricComparison
    from redline.export.runs import PlacementRules
    from redline.store.session import SessionDocument
    from redline.fleet.collector import verdict_label
    from redline.fleet.export import FleetExport
    said = []
    exporter = RedisTimeSeriesExporter(connect(timeseries.url), rules=PlacementRules(branch=BRANCH))
    link = FleetExport(exporter, timeseries.url, store_path="fleet.db", say=lambda event, **fields: said.append(event))
    documents = {"a": measured_runs(time.time() - 60), "b": measured_runs(time.time() - 30)}
    runs = {platform: [Run.from_json(d) for d in docs] for platform, docs in documents.items()}
    platform_of = {run.uid: platform for platform, mine in runs.items() for run in mine}
    rows = [TestComparison(verdict_label("quick-set-sadd", platform, 2), "ops_per_sec",
                           MetricComparison(1000.0, 1000.0 * (1 + delta / 100), delta, delta - 1, delta + 1, 0.001,
                                            verdict, 2.0, 1.0, 7, 7, True, "", True), survives_fdr=True)
            for platform, verdict, delta in (("a", "regression", -5.0), ("b", "no_change", 0.5))]
    session = SessionDocument(7, "fleet", [], {}, "here", time.time() - 90, None, "finished", runs["a"] + runs["b"],
                              rows)
    link.work_complete("w", session, platform_of, lambda key, platform: verdict_label(key, platform, 2))
    assert said == ["exported", "exported"]
    ts = timeseries.client()
    verdicts = mrange(ts, f"comparison_kind={scheme.COMPARE_BY}", "stat=verdict")
    assert {labels["running_platform"]: list(samples.values()) for labels, samples in verdicts.values()} == {
        "a": [scheme.VERDICT_CODES["regression"]], "b": [scheme.VERDICT_CODES["no_change"]]}
    for platform, docs in documents.items():
        assert by_branch(ts, OPS, f"running_platform={platform}") == {
            round(d["started_at"] * 1000): d["ops_per_sec"] for d in docs}
