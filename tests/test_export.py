"""`redline export redistimeseries`: a real compare session (Debian's redis-server) exported into a
real redis-server with the real RedisTimeSeries module (tests/timeseries_server.py), read back
with TS.MRANGE by labels."""

import json
import os
import re
import sqlite3
import subprocess

import pytest

from conftest import REDLINE, REPO, start_redis_server
from redline.export import scheme
from redline.core.redaction import redact
from redline.export.runs import PlacementRules, build_variant, commit_hash, placement_of, target_branch
from redline.core.run import Run
from timeseries_server import TimeSeriesServer

COMPARE = ("compare", "--duration", "1s", "--warmup", "0s", "--runs", "2", "--max-runs", "2", "--name", "string-get")


def redline(*args, cwd, timeout=300):
    return subprocess.run([*REDLINE, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def compare_store(tmp_path_factory):
    """A store holding one real compare session: 3 tests × 2 sides × 2 runs."""
    directory = tmp_path_factory.mktemp("compare")
    store = directory / "r.db"
    proc = redline(*COMPARE, "--store", store, cwd=directory, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return store


@pytest.fixture
def timeseries(tmp_path):
    server = TimeSeriesServer(tmp_path / "timeseries")
    yield server
    server.stop()


def stored_runs(store):
    db = sqlite3.connect(store)
    db.row_factory = sqlite3.Row
    runs = db.execute("SELECT * FROM runs WHERE status='ok' AND purpose='measure' ORDER BY id").fetchall()
    values = {(r["run_id"], r["name"]): r["value"] for r in db.execute("SELECT run_id, name, value FROM metrics")}
    verdicts = db.execute("SELECT test, metric, verdict FROM comparisons").fetchall()
    return runs, values, verdicts


def mrange(client, *filters):
    """{key: (labels, {timestamp: value})} of every series matching the filters."""
    reply = client.ts().mrange("-", "+", list(filters), with_labels=True)
    return {key: (dict(labels), {int(ts): float(value) for ts, value in samples})
            for entry in reply for key, (labels, samples) in entry.items()}


def total_samples(client):
    return sum(len(samples) for _, samples in mrange(client, "exporter=redline").values())


def test_every_stored_run_is_there_once_with_its_values(compare_store, timeseries):
    proc = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store, "1",
                   cwd=compare_store.parent)
    assert proc.returncode == 0, proc.stderr
    runs, values, verdicts = stored_runs(compare_store)
    assert len(runs) == 3 * 2 * 2
    assert "12 runs" in proc.stderr and "15 verdicts" in proc.stderr
    client = timeseries.client()
    version = json.loads(runs[0]["facts"])["identity"]["version"]
    for test in {r["test"] for r in runs}:
        mine = {round(r["started_at"] * 1000): r for r in runs if r["test"] == test}
        for upstream in scheme.UPSTREAM_METRICS:
            series = mrange(client, f"test_name={test}", f"metric={upstream.name}", f"version={version}",
                            "deployment_name=oss-standalone", "triggering_env=redline")
            assert len(series) == 1, series.keys()     # one series per test and metric: what upstream compare needs
            (key, (labels, samples)), = series.items()
            assert key.startswith("ci.benchmarks.redis/by.version/redline/redis/redis/")
            assert key.endswith(f"/{version}/{upstream.name}")
            assert labels["metric_jsonpath"] == upstream.jsonpath and labels["test_name"] == test
            assert "hash" not in labels                # upstream compare filters by.version series on hash==
            assert set(samples) == set(mine)           # every run of the test once, at its start, nothing else
            for at, run in mine.items():
                assert samples[at] == values[(run["id"], upstream.redline)]
        indexes = mrange(client, f"test_name={test}", f"metric={scheme.RUN_INDEX_METRIC}")
        (_, index_samples), = indexes.values()
        assert index_samples == {at: float(run["run_index"]) for at, run in mine.items()}
        cpu = mrange(client, f"test_name={test}", "metric=redline.server_cpu_us_per_op")
        (_, cpu_samples), = cpu.values()
        assert cpu_samples == {at: values[(run["id"], "server_cpu_us_per_op")] for at, run in mine.items()}
    # no branch and no commit: Debian's binary reports git_sha1 00000000
    assert not mrange(client, "exporter=redline", "branch!=") and not mrange(client, "exporter=redline", "hash!=")
    verdict_series = mrange(client, f"comparison_kind={scheme.COMPARE_BY}", "stat=verdict")
    assert len(verdict_series) == len(verdicts) == 15
    for labels, samples in verdict_series.values():
        (code,) = samples.values()
        stored = {(v["test"], v["metric"]): v["verdict"] for v in verdicts}[(labels["test_name"], labels["redline_metric"])]
        assert code == scheme.VERDICT_CODES[stored]


def test_exporting_twice_writes_nothing_new(compare_store, timeseries):
    first = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store,
                    cwd=compare_store.parent)
    assert first.returncode == 0, first.stderr
    client = timeseries.client()
    before = total_samples(client)
    keys_before = sorted(client.scan_iter(count=1000))
    second = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store, "--since",
                     "2000-01-01", cwd=compare_store.parent)
    assert second.returncode == 0, second.stderr
    assert " 0 samples written" in second.stderr and f"{before} already there" in second.stderr
    assert total_samples(client) == before and sorted(client.scan_iter(count=1000)) == keys_before


def test_a_different_value_at_the_same_millisecond_is_a_conflict_not_overwritten(compare_store, timeseries):
    runs, values, _ = stored_runs(compare_store)
    run = runs[0]
    at = round(run["started_at"] * 1000)
    client = timeseries.client()
    redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store, cwd=compare_store.parent)
    (key,) = mrange(client, f"test_name={run['test']}", "metric=ALL_STATS.Totals.Ops/sec").keys()
    client.execute_command("TS.DEL", key, at, at)
    client.execute_command("TS.ADD", key, at, 1.5)                     # someone else's sample
    proc = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store,
                   cwd=compare_store.parent)
    assert proc.returncode == 1
    assert f"conflict, not written: {key} @ {at}: stored 1.5, this run {values[(run['id'], 'ops_per_sec')]}" in proc.stderr
    assert float(client.execute_command("TS.RANGE", key, at, at)[0][1]) == 1.5


def test_branch_platform_and_project_place_the_series_where_upstream_compare_looks(compare_store, timeseries):
    proc = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store,
                   "--branch", "feature-x", "--platform", "lab-box", "--github-org", "acme", "--triggering-env", "ci",
                   cwd=compare_store.parent)
    assert proc.returncode == 0, proc.stderr
    client = timeseries.client()
    # the filters redis-benchmarks-compare builds for a by.branch comparison
    found = mrange(client, "metric=ALL_STATS.Totals.Ops/sec", "github_repo=redis", "triggering_env=ci",
                   "branch=feature-x", "deployment_name=oss-standalone", "github_org=acme",
                   "running_platform=lab-box", "hash==")
    assert len(found) == 3
    for key, (labels, samples) in found.items():
        assert key.startswith("ci.benchmarks.redis/by.branch/ci/acme/redis/")
        assert f"/prebuilt/lab-box/oss-standalone/feature-x/ALL_STATS.Totals.Ops/sec" in key
        assert labels["deployment_name+branch"] == "oss-standalone feature-x" and len(samples) == 4
    assert client.smembers("ci.benchmarks.redis/ci/acme/redis:branches") == {"feature-x"}
    assert len(client.smembers("ci.benchmarks.redis/ci/acme/redis:testcases")) == 3


def test_bad_input_is_one_line(compare_store, tmp_path):
    cases = [(("--redis", "http://127.0.0.1:1"), 2, "expected redis://"),
             (("--redis", "redis://127.0.0.1:1", "1", "--since", "2026-01-01"), 2, "not both"),
             (("--redis", "redis://127.0.0.1:1", "--since", "yesterday"), 2, "not a date"),
             (("--redis", "redis://127.0.0.1:1", "99"), 1, "Connection refused"),
             (("--redis", "redis://u:s3cret@127.0.0.1:1"), 1, "redis://u:***@127.0.0.1:1")]
    for args, code, words in cases:
        proc = redline("export", "redistimeseries", "--store", compare_store, *args, cwd=tmp_path)
        assert proc.returncode == code and words in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "s3cret" not in proc.stderr, proc.stderr
    proc = redline("export", "redistimeseries", "--redis", "redis://127.0.0.1:1", "--store", tmp_path / "none.db",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "no result store" in proc.stderr


def test_a_server_without_the_module_is_named(compare_store, tmp_path):
    server = start_redis_server(tmp_path)
    try:
        proc = redline("export", "redistimeseries", "--redis", f"redis://127.0.0.1:{server.port}", "--store",
                       compare_store, cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 1 and "has no RedisTimeSeries module" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# -- pure logic -----------------------------------------------------------------------------------
def test_upstream_metric_names_follow_the_upstream_cleaning():
    assert scheme.upstream_metric_name('$."ALL STATS".Totals."Ops/sec"') == "ALL_STATS.Totals.Ops/sec"
    names = {m.redline: m.name for m in scheme.UPSTREAM_METRICS}
    assert names["p50_ms"] == "ALL_STATS.Totals.Percentile_Latencies.p50.00"
    assert names["p999_ms"] == "ALL_STATS.Totals.Percentile_Latencies.p99.90"


def test_what_identifies_a_build():
    assert target_branch("git:/src/redis@unstable") == "unstable"
    assert target_branch("git:/src/redis@feature/x [appendonly=yes]") == "feature/x"
    for label in ("git:/src/redis@HEAD~2", "git:/src/redis@0123abcd", "bin:/usr/bin/redis-server", "tcp://h:1"):
        assert target_branch(label) is None, label
    assert commit_hash({"git_sha1": "00000000"}) is None
    assert commit_hash({"git_sha1": "1a2b3c4d"}) == "1a2b3c4d"
    assert commit_hash({"git_sha1": "1a2b3c4d", "commit": {"sha": "f" * 40}}) == "f" * 40
    built = {"compiler_version": "gcc (Debian 12.2.0-14) 12.2.0 [/usr/bin/x86_64-linux-gnu-gcc-12]",
             "variant": {"name": "O3-lto"}}
    assert build_variant("git:/r@x", built) == "gcc:12.2.0-O3-lto"
    assert build_variant("bin:/usr/bin/redis-server", None) == "prebuilt"
    assert build_variant("tcp://127.0.0.1:6379", None) == "external"


def test_placement_of_a_run():
    run = Run(test="t", target="bin:/x [appendonly=yes]", side="comparison", run_index=0, status="ok",
              started_at=1.0, facts={"identity": {"version": "255.255.255", "git_sha1": "00000000"},
                                     "machine": {"hostname": "box one"}})
    placement = placement_of(run, PlacementRules(branch="feature"))
    assert placement.running_platform == "box-one"
    assert placement.deployment_name == "oss-standalone-appendonly-yes"
    assert placement.deployment_path == "oss-standalone/oss-standalone-appendonly-yes"
    assert placement.by_values() == {"branch": "feature"}     # 255.255.255 is kept only for unstable
    assert placement_of(run, PlacementRules(branch="unstable")).by_values() == {"branch": "unstable",
                                                                               "version": "255.255.255"}


def test_messages_never_show_the_password():
    assert redact("rediss://user:pw@host:6380/0") == "rediss://user:***@host:6380/0"
    assert redact("redis://:pw@host:1") == "redis://:***@host:1"
    assert redact("redis://host:1") == "redis://host:1"


# -- the live sink: --export on run and compare ---------------------------------------------------
def test_compare_with_export_writes_what_the_export_command_would(tmp_path, timeseries):
    store = tmp_path / "r.db"
    proc = redline("compare", "--duration", "1s", "--warmup", "0s", "--runs", "2", "--max-runs", "2", "--name",
                   "string-get-100B-pipeline-10$", "--store", store, "--export", timeseries.url, "--branch", "live",
                   cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"exported to {timeseries.url}: 4 runs" in proc.stderr and "5 verdicts" in proc.stderr
    runs, values, _ = stored_runs(store)
    client = timeseries.client()
    (labels, samples), = mrange(client, "metric=ALL_STATS.Totals.Ops/sec", "branch=live", "hash==").values()
    assert samples == {round(r["started_at"] * 1000): values[(r["id"], "ops_per_sec")] for r in runs}
    assert len(mrange(client, f"comparison_kind={scheme.COMPARE_BY}", "stat=verdict")) == 5
    again = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", store, "--branch", "live",
                    cwd=tmp_path)
    assert again.returncode == 0 and " 0 samples written" in again.stderr, again.stderr


def test_export_to_a_server_without_the_module_fails_before_measuring(tmp_path):
    server = start_redis_server(tmp_path)
    try:
        proc = redline("run", "--name", "string-get-100B-pipeline-10$", "--duration", "1s", "--warmup", "0s",
                       "--store", tmp_path / "r.db", "--export", f"redis://127.0.0.1:{server.port}", cwd=tmp_path)
    finally:
        server.stop()
    assert proc.returncode == 1 and "has no RedisTimeSeries module" in proc.stderr, proc.stderr
    assert not (tmp_path / "r.db").exists()


def test_a_server_lost_during_the_session_costs_no_run(compare_store, tmp_path):
    from redline.export.options import exporter_from
    from redline.export.sink import RedisTimeSeriesSink
    from redline.store.results import Store

    server = TimeSeriesServer(tmp_path / "timeseries")
    args = type("Args", (), {"github_org": "redis", "github_repo": "redis", "triggering_env": "redline",
                             "platform": None, "branch": None})()
    sink = RedisTimeSeriesSink(exporter_from(args, server.url), server.url, compare_store)
    store = Store(compare_store)
    runs = store.load_runs(1)
    sink.run_finished(runs[0])
    server.stop()                              # the RedisTimeSeries server goes away mid-session
    for run in runs[1:]:
        sink.run_finished(run)                 # never raises: the measurement goes on
    assert sink.counts.runs == 1 and "Connection refused" in sink.failure
    problem = sink.session_finished(store.load_session(1))    # but the command is told the export is incomplete
    assert problem.startswith("export incomplete: ") and "redline export redistimeseries 1" in problem


# -- change points --------------------------------------------------------------------------------
NOISE = [1.004, 0.997, 1.001, 0.999, 1.003, 0.996, 1.002, 0.998, 1.0, 1.001, 0.997, 1.003, 0.998, 1.002, 0.999, 1.004]


def _history(store_path):
    """16 sessions of 3 runs in a real store, throughput 10% lower from the 9th session on (the
    history the history tests use); returns the 9th session's start in ms."""
    from redline.store.results import Store
    store = Store(store_path)
    for number, factor in enumerate(NOISE):
        session = store.begin_session(kind="run", argv=[], machine={})
        for index in range(3):
            run = Run(test="t-set", target="bin:x", side=None, run_index=index, session_id=session,
                      started_at=1_700_000_000.0 + number * 60 + index * 5)
            store.run_started(run)
            run.metrics = {"ops_per_sec": 100_000 * factor * (0.9 if number >= 8 else 1.0) * (1 + 0.002 * (index - 1))}
            run.facts = {"identity": {"version": "7.0.15"}}
            run.finish("ok")
            store.run_finished(run)
        store.finish_session(session, "finished")
    return round((1_700_000_000.0 + 8 * 60) * 1000)


def test_history_change_points_are_exported_and_kept_in_step(tmp_path, timeseries):
    store = tmp_path / "r.db"
    at = _history(store)
    proc = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", store, "--since", "2000-01-01",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(" (run) → ") == 16
    client = timeseries.client()
    (key, (labels, samples)), = mrange(client, f"comparison_kind={scheme.CHANGE_POINT_BY}",
                                       "redline_metric=ops_per_sec").items()
    assert labels["test_name"] == "t-set" and list(samples) == [at] and -11 < samples[at] < -9
    client.execute_command("TS.ADD", key, at - 60_000, 5.0)       # a change point the history no longer shows
    again = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", store, "--since",
                    "2000-01-01", cwd=tmp_path)
    assert again.returncode == 0 and "0 written, 1 already there, 1 no longer found and removed" in again.stderr
    assert list(mrange(client, f"comparison_kind={scheme.CHANGE_POINT_BY}",
                       "redline_metric=ops_per_sec")[key][1]) == [at]


# -- Grafana dashboards (grafana/, scripts/grafana_dashboards.py) --------------------------------
GRAFANA = REPO / "grafana"


def _dashboards():
    return {path.name: json.loads(path.read_text()) for path in sorted((GRAFANA / "dashboards").glob("*.json"))}


def _queries(board):
    return [(panel, target) for panel in board["panels"] for target in panel.get("targets", [])]


def _generator():
    import importlib.util
    spec = importlib.util.spec_from_file_location("grafana_dashboards", REPO / "scripts" / "grafana_dashboards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_dashboards_are_what_the_sdk_generates_and_parse_back():
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    generated = _generator().rendered()
    assert sorted(generated) == sorted(_dashboards()) == ["redline-compare.json", "redline-fleet.json",
                                                           "redline-history.json"]
    register_default_plugins()
    for name, board in _dashboards().items():
        assert (GRAFANA / "dashboards" / name).read_text() == generated[name], f"{name} is stale"
        # the SDK's typed model reads every field back, and writes the same document
        assert json.loads(json.dumps(Dashboard.from_json(board), cls=JSONEncoder)) == board, name


def _labels_the_exporter_writes():
    project, placement = scheme.Project(), scheme.Placement("t", "b", "p", "oss-standalone", "oss-standalone",
                                                            branch="x", version="1", hash="h")
    upstream = scheme.UPSTREAM_METRICS[0]
    labels = set()
    for by in scheme.BY_KINDS:
        labels |= set(scheme.result_labels(project, placement, by, "v", "m", "r", upstream))
        labels |= set(scheme.memory_labels(project, placement, by, "v"))
    labels |= set(scheme.verdict_labels(project, placement, placement, "ops_per_sec", "verdict"))
    labels |= set(scheme.change_point_labels(project, "t", "p", "oss-standalone", "bin:x", "ops_per_sec"))
    return labels


def _provisioned_source(name):
    import yaml
    (source,) = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / name).read_text())["datasources"]
    return {"type": source["type"], "uid": source["uid"]}


FLEET_BOARD = "redline-fleet.json"


def test_dashboards_query_labels_the_exporter_writes_through_the_provisioned_data_source():
    import yaml
    source = _provisioned_source("redline-redistimeseries.yaml")
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "redline.yaml").read_text())["providers"]
    assert providers[0]["options"]["path"] == "${REDLINE_GRAFANA}/dashboards" and providers[0]["type"] == "file"
    written = _labels_the_exporter_writes()
    for name, board in _dashboards().items():
        if name == FLEET_BOARD:          # the fleet's own Redis: test_fleet_dashboard_reads_only_keys_of_the_fleet
            continue
        variables = {v["name"] for v in board["templating"].get("list", [])}
        uids = [panel["id"] for panel in board["panels"] if "id" in panel]
        assert len(uids) == len(set(uids)), name
        for panel in board["panels"]:
            assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24, (name, panel["title"])
            for used in re.findall(r"\$(\w+)", panel["title"]):
                assert used in variables, (name, panel["title"], used)
        for variable in board["templating"].get("list", []):
            if variable["type"] == "query":
                assert variable["datasource"]["uid"] == source["uid"]
                assert variable["query"].startswith("SMEMBERS ci.benchmarks.redis/$env/$org/$repo:")
        for panel, target in _queries(board):
            assert panel["datasource"] == target["datasource"] == source
            if target["type"] != "timeSeries":
                continue
            terms = target["filter"].split()
            assert any(re.fullmatch(r"[^=!]+=[^=$(]+", term) for term in terms), target   # TS needs one label=value
            for term in terms:
                label = re.split(r"!?=", term)[0]
                assert label in written or label in ("$by",), (name, term)
                for used in re.findall(r"\$(\w+)", term):
                    assert used in variables, (name, term)


def _resolved(filter_text, values):
    return [re.sub(r"\$(\w+)", lambda m: values[m.group(1)], term) for term in filter_text.split()]


def test_every_dashboard_query_finds_the_exported_compare_session(compare_store, timeseries):
    proc = redline("export", "redistimeseries", "--redis", timeseries.url, "--store", compare_store, "--branch",
                   "unstable", cwd=compare_store.parent)
    assert proc.returncode == 0, proc.stderr
    client = timeseries.client()
    test = sorted(client.smembers("ci.benchmarks.redis/redline/redis/redis:testcases"))[0]
    (platform,) = client.smembers("ci.benchmarks.redis/redline/redis/redis:platforms")
    values = {"env": "redline", "org": "redis", "repo": "redis", "test": test, "platform": platform,
              "metric": "ops_per_sec", "by": "branch"}
    details = [json.loads(row[0]) for row in sqlite3.connect(compare_store).execute(
        "SELECT detail FROM comparisons WHERE test=? AND metric='ops_per_sec'", (test,))]
    estimated = any(d["delta_pct"] is not None for d in details)   # 2 runs a side: usually no estimate
    for name, board in _dashboards().items():
        for panel, target in _queries(board):
            if target["type"] != "timeSeries":
                continue
            filters = _resolved(target["filter"], values)
            if target["command"] == "ts.mget":
                found = client.ts().mget(filters)
            elif scheme.CHANGE_POINT_BY in target["filter"]:
                continue                 # one session: no history to find a change in (tested above)
            else:
                found = client.ts().mrange("-", "+", filters)
            if "delta_pct" in target["filter"]:
                assert bool(found) == estimated, (name, panel["title"], filters)
            else:
                assert found, (name, panel["title"], filters)


def _fleet_name_of(key):
    """The entry of redline.fleet.keys whose pattern `key` is (a $variable standing for a placeholder)."""
    from redline.fleet import keys as fleet_keys
    for name in fleet_keys.TABLE:
        pattern = re.sub(r"\\{\w+\\}", r"[^:]+", re.escape(name.pattern))
        if re.fullmatch(pattern, key):
            return name
    return None


def test_fleet_dashboard_reads_only_keys_of_the_fleet():
    """Every stream or key the fleet dashboard queries (panels and variables) is one of
    redline.fleet.keys, of the kind the command reads, through the provisioned fleet data source."""
    source = _provisioned_source("redline-fleet.yaml")
    board = _dashboards()[FLEET_BOARD]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    for variable in variables.values():
        assert variable["datasource"] == source
        command, key = variable["query"].split()
        assert command == "SMEMBERS" and _fleet_name_of(key).kind == "set", variable["query"]
    queried = set()
    for panel, target in _queries(board):
        assert panel["datasource"] == target["datasource"] == source
        name = _fleet_name_of(target["keyName"])
        assert name is not None, (panel["title"], target["keyName"])
        assert target["command"] in ("xinfoStream", "xrevrange") and name.kind == "stream", (panel["title"], name)
        for used in re.findall(r"\$(\w+)", f"{target['keyName']} {panel['title']}"):
            assert used in variables, (panel["title"], used)
        queried.add(name.pattern)
    from redline.fleet import keys as fleet_keys
    assert queried == {fleet_keys.JOBS.pattern, fleet_keys.RESULTS.pattern, fleet_keys.DEAD.pattern,
                       fleet_keys.COMMENTS.pattern}
