"""redline.topology: upstream topology names, CPU plans, and real deployments of Debian's
redis-server (standalone with io-threads, a 3-primary cluster, a primary with replicas)."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
import yaml
from redis.cluster import RedisCluster

from redline.core.errors import RunError, UsageError
from redline.load.report import LoadReport
from redline.topology import (attach_replicas_now, deploy, parse_topology, plan_cpus,
                              wait_replicas_in_sync)
from redline.topology.cluster import slot_ranges

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO.parent / "shared" / "upstream-suites"
TOPOLOGIES_YML = UPSTREAM / "setups" / "topologies" / "topologies.yml"
REDIS_SERVER = Path("/usr/bin/redis-server")
LOAD_BIN = REPO / "bin" / "redline-load"

FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
needs_upstream = pytest.mark.skipif(not TOPOLOGIES_YML.exists(), reason=f"{TOPOLOGIES_YML} not found")
needs_server = pytest.mark.skipif(not REDIS_SERVER.exists(), reason="Debian's redis-server is not installed")


def upstream_setups():
    return yaml.safe_load(TOPOLOGIES_YML.read_text())["spec"]["setups"]


# -- names ---------------------------------------------------------------------------------------
@needs_upstream
def test_every_upstream_topology_name_parses_to_its_declared_shape():
    setups = upstream_setups()
    assert len(setups) >= 30
    for setup in setups:
        spec = parse_topology(setup["name"])
        shape = setup["redis_topology"]
        assert (spec.primaries, spec.replicas) == (shape["primaries"], shape["replicas"]), setup["name"]
        assert spec.cluster == (setup["type"] == "oss-cluster"), setup["name"]
        arguments = setup.get("redis_arguments", "")
        if "--io-threads" in arguments:
            threads = int(arguments.split("--io-threads ")[1].split()[0])
            assert spec.io_threads == threads and spec.config()["io-threads-do-reads"] == "yes"
        elif not spec.unsupported:
            assert spec.io_threads is None
        for flag, value in (("--save", "10 1000"), ("--appendonly", "yes"), ("--appendfsync", "everysec")):
            if flag in arguments:
                assert spec.config()[flag[2:]] == value, setup["name"]
        if "loadmodule" in arguments or "proactor_threads" in arguments:
            assert spec.unsupported, setup["name"]
        else:
            assert spec.unsupported is None, setup["name"]


@needs_upstream
def test_every_topology_named_by_an_upstream_suite_is_deployable():
    names = set()
    for path in (UPSTREAM / "test-suites").glob("*.yml"):
        names.update(yaml.load(path.read_text(), Loader=FAST_LOADER).get("redis-topologies") or [])
    assert "oss-cluster-3-primaries" in names
    for name in names:
        assert parse_topology(name).unsupported is None, name


@pytest.mark.parametrize("name", ["", "oss-cluster", "oss-cluster-0-primaries", "oss-standalone-00-io-threads",
                                  "oss-standalone-2-replicas-zstd", "oss_standalone", "OSS-STANDALONE"])
def test_unknown_or_impossible_topology_names_are_clear_errors(name):
    with pytest.raises(UsageError) as err:
        parse_topology(name)
    assert "topology" in str(err.value)
    if name:
        assert repr(name) in str(err.value)


def test_slot_ranges_split_16384_evenly_without_gaps():
    for primaries in (1, 3, 5, 9, 30):
        ranges = slot_ranges(primaries)
        assert ranges[0][0] == 0 and ranges[-1][1] == 16383
        assert all(ranges[i][1] + 1 == ranges[i + 1][0] for i in range(primaries - 1))
        sizes = [last - first + 1 for first, last in ranges]
        assert max(sizes) - min(sizes) <= 1


# -- CPU plans -----------------------------------------------------------------------------------
def test_cpu_plan_is_disjoint_when_there_are_enough_cores():
    plan = plan_cpus(parse_topology("oss-cluster-3-primaries"), list(range(8)))
    assert plan.servers == ((0,), (1,), (2,)) and plan.client_cpus == (3, 4, 5, 6, 7)
    assert not plan.shared and plan.warnings == ()
    io = plan_cpus(parse_topology("oss-standalone-04-io-threads"), list(range(8)))
    assert io.servers == ((0, 1, 2, 3, 4),) and io.client_cpus == (5, 6, 7) and not io.warnings


def test_cpu_plan_on_two_cores_shares_for_a_cluster_and_says_so():
    plan = plan_cpus(parse_topology("oss-cluster-3-primaries"), [0, 1])
    assert plan.shared
    assert plan.client_cpus == (1,) and set(plan.server_cpus) == {0}     # the client keeps its own core
    text = plan.describe()
    assert "warning" in text and "3 server processes share 1 core" in text and "needs 4 cores" in text
    assert plan.as_dict()["shared"] is True and plan.as_dict()["warnings"]
    json.dumps(plan.as_dict())
    standalone = plan_cpus(parse_topology("oss-standalone"), [0, 1])
    assert (standalone.servers, standalone.client_cpus, standalone.shared) == (((0,),), (1,), False)
    assert "warning" not in standalone.describe()


def test_cpu_plan_on_one_core_puts_everything_together_and_warns():
    plan = plan_cpus(parse_topology("oss-standalone-01-replicas"), [3])
    assert plan.servers == ((3,), (3,)) and plan.client_cpus == (3,) and plan.shared
    assert any("client shares cpu 3" in w for w in plan.warnings)


def test_cpu_plan_short_of_io_thread_cores_warns_without_sharing():
    plan = plan_cpus(parse_topology("oss-standalone-04-io-threads"), [0, 1, 2, 3])
    assert plan.servers == ((0, 1, 2),) and plan.client_cpus == (3,) and not plan.shared
    assert any("io-threads 4 run on 3 core" in w for w in plan.warnings)


def test_cpu_plan_rejects_bad_cpu_lists():
    with pytest.raises(UsageError, match="empty"):
        plan_cpus(parse_topology("oss-standalone"), [])
    with pytest.raises(UsageError, match="non-negative"):
        plan_cpus(parse_topology("oss-standalone"), [0, -1])


# -- deployments ---------------------------------------------------------------------------------
def two_cores():
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[:2]


def deploy_named(name, config=None, **kwargs):
    spec = parse_topology(name)
    messages = []
    deployment = deploy(spec, binary=REDIS_SERVER, config=config or {}, cpu_plan=plan_cpus(spec, two_cores()),
                        progress=messages.append, **kwargs)
    deployment.messages = messages
    return deployment


def assert_gone(pids, workdir):
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not workdir.exists()


@needs_server
def test_io_threads_standalone_has_its_config_and_pinning_and_stops_clean():
    deployment = deploy_named("oss-standalone-02-io-threads", {"maxmemory-policy": "allkeys-lru"})
    pids, workdir = deployment.pids(), deployment.workdir
    try:
        assert len(pids) == 1 and deployment.alive() and not deployment.cluster_mode
        assert deployment.load_arguments(["-c", "5"]) == ["-c", "5"]
        client = deployment.client()
        assert client.config_get("io-threads") == {"io-threads": "2"}
        assert client.config_get("io-threads-do-reads") == {"io-threads-do-reads": "yes"}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}
        assert os.sched_getaffinity(pids[0]) == set(deployment.cpu_plan.servers[0])
        assert deployment.facts["topology"] == "oss-standalone-02-io-threads"
        assert deployment.facts["cpu_plan"]["servers"][0]["cpus"] == list(deployment.cpu_plan.servers[0])
        assert any("cpu plan" in m for m in deployment.messages)
        assert deployment.crash_reason() is None
    finally:
        deployment.stop()
    assert_gone(pids, workdir)
    assert not deployment.alive()


@needs_server
def test_three_primary_cluster_forms_and_routes_keys_to_their_owners():
    deployment = deploy_named("oss-cluster-3-primaries")
    pids, workdir = deployment.pids(), deployment.workdir
    try:
        assert deployment.cluster_mode and len(pids) == 3 and deployment.alive()
        nodes = [server.client() for server in deployment.servers]
        for node in nodes:
            info = node.execute_command("CLUSTER", "INFO").decode()
            assert "cluster_state:ok" in info and "cluster_slots_assigned:16384" in info
            assert "cluster_known_nodes:3" in info
            served = sum(int(e[1]) - int(e[0]) + 1 for e in node.execute_command("CLUSTER", "SLOTS"))
            assert served == 16384
        assert deployment.facts["cluster_formation"]["slots"][1]["first"] == 5461
        # the node config of every node is in its own work directory
        assert all((server.workdir / "nodes.conf").exists() for server in deployment.servers)

        cluster = RedisCluster(host=deployment.host, port=deployment.port)
        keys = [f"key:{i}" for i in range(300)]
        for key in keys:
            cluster.set(key, key.upper())
        cluster.close()
        owner_port = {}
        for entry in nodes[0].execute_command("CLUSTER", "SLOTS"):
            for slot in range(int(entry[0]), int(entry[1]) + 1):
                owner_port[slot] = int(entry[2][1])
        by_port = {server.port: client for server, client in zip(deployment.servers, nodes)}
        for key in keys:
            slot = nodes[0].execute_command("CLUSTER", "KEYSLOT", key)
            assert by_port[owner_port[slot]].get(key) == key.upper().encode()
        sizes = [node.dbsize() for node in nodes]
        assert sum(sizes) == 300 and min(sizes) > 50
    finally:
        deployment.stop()
    assert_gone(pids, workdir)


def thread_cores(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


@needs_server
@pytest.mark.parametrize("name", ["oss-standalone-02-io-threads", "oss-standalone-02-replicas"])
def test_servers_started_on_every_core_move_to_their_own_once_up(name):
    """A duet's two restores at once (redline.bench.state): each loads on any core, then every
    thread of every server (io threads, replicas) is on the plan's cores before anything is measured."""
    cores = two_cores()
    if len(cores) < 2:
        pytest.skip("needs two cores to start on more than the server's own")
    spec = parse_topology(name)
    plan = plan_cpus(spec, cores).starting_on(cores)
    messages = []
    deployment = deploy(spec, binary=REDIS_SERVER, config={}, cpu_plan=plan, progress=messages.append)
    try:
        own = plan.servers[0]
        assert set(own) != set(cores)
        assert any(f"starting primary on cpu {cores[0]},{cores[1]} (cpu {own[0]} once up)" in m for m in messages)
        for server, cpus in zip(deployment.servers, plan.servers):
            threads = thread_cores(server.pids()[0])
            assert len(threads) >= 2 and all(t == set(cpus) for t in threads), threads
            assert server.settings.cpus == tuple(cpus)
        assert deployment.facts["cpu_plan"]["starting_cpus"] == cores
        assert deployment.client().ping()
    finally:
        deployment.stop()


@needs_server
def test_a_server_gone_before_it_moves_to_its_cores_is_a_clear_error():
    deployment = deploy_named("oss-standalone")
    server = deployment.servers[0]
    server.process.kill()
    server.process.wait()
    with pytest.raises(RunError, match="exited before it could be moved to its cores"):
        server.move_to((0,))
    deployment.stop()


@needs_server
def test_primary_with_two_replicas_syncs_a_preloaded_dataset():
    deployment = deploy_named("oss-standalone-02-replicas")
    pids, workdir = deployment.pids(), deployment.workdir
    try:
        assert len(pids) == 3 and deployment.facts["replication"]["full_sync_s"] >= 0
        primary = deployment.client()
        pipe = primary.pipeline(transaction=False)
        for i in range(20000):
            pipe.set(f"k{i}", "v" * 100)
        pipe.execute()
        seconds = wait_replicas_in_sync(deployment, timeout_s=60)
        assert seconds >= 0 and deployment.facts["replication"]["catch_up_s"] == round(seconds, 3)
        assert [s.client().dbsize() for s in deployment.servers] == [20000] * 3
        assert deployment.replicas[1].client().get("k19999") == b"v" * 100
        for replica in deployment.replicas:
            assert replica.info("replication")["role"] == "slave"
    finally:
        deployment.stop()
    assert_gone(pids, workdir)


@needs_server
def test_replicas_attached_after_preload_do_a_timed_full_sync():
    deployment = deploy_named("oss-standalone-01-replicas-aof-everysec", {"appendonly": "no"},
                              attach_replicas=False)
    try:
        replica = deployment.replicas[0].client()
        assert replica.info("replication")["role"] == "master"       # not attached yet
        assert replica.config_get("appendonly") == {"appendonly": "yes"}   # the topology's setting wins
        primary = deployment.client()
        pipe = primary.pipeline(transaction=False)
        for i in range(10000):
            pipe.hset(f"h{i}", mapping={"a": i, "b": "x" * 50})
        pipe.execute()
        seconds = attach_replicas_now(deployment, timeout_s=60)
        assert seconds > 0 and deployment.facts["replication"]["full_sync_s"] == round(seconds, 3)
        assert replica.dbsize() == 10000 and replica.hget("h9999", "a") == b"9999"
        assert primary.info("stats")["sync_full"] == 1
        # the replica's AOF rewrite after the sync is part of the sync: done before we return
        assert replica.info("persistence")["aof_rewrite_in_progress"] == 0
        started = time.monotonic()
    finally:
        deployment.stop()
    assert time.monotonic() - started < 5          # no server had to be waited out and killed


@needs_server
def test_a_replica_that_crashes_is_reported_with_its_reason():
    deployment = deploy_named("oss-standalone-01-replicas", {"enable-debug-command": "yes", "crash-memcheck-enabled": "no"})
    try:
        assert deployment.alive() and deployment.crash_reason() is None
        with pytest.raises(redis.ConnectionError):
            deployment.replicas[0].client().execute_command("DEBUG", "SEGFAULT")
        deadline = time.monotonic() + 10
        while deployment.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not deployment.alive() and deployment.entry.alive()
        reason = deployment.crash_reason()
        assert reason.startswith("replica-1") and "crashed by signal" in reason
        assert "replica-1" in deployment.log_tail() and "primary" not in deployment.log_tail().split("\n")[0]
        assert len(deployment.pids()) == 1
    finally:
        deployment.stop()
    assert deployment.pids() == []


@needs_server
def test_a_killed_cluster_node_is_reported_and_stop_cleans_up_the_rest():
    deployment = deploy_named("oss-cluster-3-primaries")
    pids, workdir = deployment.pids(), deployment.workdir
    try:
        os.kill(pids[2], signal.SIGKILL)
        deadline = time.monotonic() + 5
        while deployment.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not deployment.alive()
        assert deployment.crash_reason() == f"primary-3 (port {deployment.servers[2].port}): killed by signal SIGKILL"
        assert "primary-3" in deployment.exit_description()
    finally:
        deployment.stop()
    assert_gone(pids, workdir)


@needs_server
def test_unsupported_topology_and_mismatched_plan_are_refused_before_anything_starts():
    spec = parse_topology("oss-standalone-with-redisearch")
    with pytest.raises(RunError, match="RediSearch"):
        deploy(spec, binary=REDIS_SERVER, config={}, cpu_plan=plan_cpus(spec, [0]))
    absent = max(os.sched_getaffinity(0)) + 1
    with pytest.raises(UsageError, match=f"cpu {absent},{absent + 1}, which this machine"):
        deploy(parse_topology("oss-standalone"), binary=REDIS_SERVER, config={},
               cpu_plan=plan_cpus(parse_topology("oss-standalone"), [absent, absent + 1]))
    cluster_plan = plan_cpus(parse_topology("oss-cluster-3-primaries"), [0, 1])
    with pytest.raises(UsageError, match="cpu plan"):
        deploy(parse_topology("oss-standalone"), binary=REDIS_SERVER, config={}, cpu_plan=cluster_plan)


def child_redis_servers():
    """redis-server processes whose parent is this test process (other engineers' servers are not)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"redis-server" in cmdline:
            found.append(int(entry.name))
    return found


@needs_server
def test_a_bad_server_setting_fails_deploy_with_the_servers_reason():
    with pytest.raises(RunError, match="no-such-setting"):
        deploy_named("oss-standalone-01-replicas", {"no-such-setting": "1"})
    assert child_redis_servers() == []


@needs_server
def test_a_cluster_that_does_not_form_in_time_is_a_clear_error_and_nothing_is_left(monkeypatch, tmp_path):
    import tempfile
    from redline.topology import deployment as deployment_module
    monkeypatch.setattr(deployment_module, "CLUSTER_TIMEOUT_S", 0.5)    # Redis needs ~2 s
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(RunError) as err:
        deploy_named("oss-cluster-3-primaries")
    assert "did not reach cluster_state:ok within" in str(err.value)
    assert "cluster_state:fail" in str(err.value)                     # says what each node lacks
    assert child_redis_servers() == []
    assert list(tmp_path.iterdir()) == []                             # work directories removed


# -- load through redline-load --cluster-mode ----------------------------------------------------
@needs_server
def test_set_and_get_load_in_cluster_mode_spreads_over_all_three_primaries(tmp_path):
    deployment = deploy_named("oss-cluster-3-primaries")
    try:
        nodes = [server.client() for server in deployment.servers]
        # redis-py's own CLIENT SETINFO is an error reply on 7.0: count only what the load adds
        errors_before = sum(n.info("stats")["total_error_replies"] for n in nodes)
        out = tmp_path / "load.json"
        workload = ["--ratio", "1:1", "--key-pattern", "R:R", "--key-minimum", "1", "--key-maximum", "3000",
                    "-n", "2000", "-c", "2", "-t", "1", "-d", "32", "--hide-histogram"]
        assert deployment.load_arguments(workload) == [*workload, "--cluster-mode"]
        argv = [str(LOAD_BIN), "-s", deployment.host, "-p", str(deployment.port),
                *deployment.load_arguments(workload), "--json-out-file", str(out)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        sets = [n.info("commandstats").get("cmdstat_set", {}).get("calls", 0) for n in nodes]
        gets = [n.info("commandstats").get("cmdstat_get", {}).get("calls", 0) for n in nodes]
        assert sum(sets) + sum(gets) == 2 * 2000
        assert min(sets) > 0 and min(gets) > 0 and min(n.dbsize() for n in nodes) > 0
        errors_after = sum(n.info("stats")["total_error_replies"] for n in nodes)
        assert errors_after == errors_before
        assert LoadReport.read(out).errors == {}
    finally:
        deployment.stop()


@needs_server
def test_info_client_sums_keyspace_counters_over_the_cluster_shards():
    deployment = deploy_named("oss-cluster-3-primaries")
    try:
        cluster = RedisCluster(host=deployment.host, port=deployment.port)
        for i in range(90):
            cluster.set(f"k{i}", "v")
        for i in range(120):
            cluster.get(f"k{i}")                        # 90 hits, 30 misses over three shards
        cluster.close()
        info = deployment.info_client()
        total = info.info("all")
        shards = [server.client().info("all") for server in deployment.servers]
        assert (total["keyspace_hits"], total["keyspace_misses"]) == (90, 30)
        assert min(s["keyspace_hits"] for s in shards) > 0        # really spread, really summed
        assert total["db0"]["keys"] == 90 and total["cmdstat_set"]["calls"] == 90
        assert total["redis_version"] == shards[0]["redis_version"]
        assert total["used_memory"] == pytest.approx(sum(s["used_memory"] for s in shards), rel=0.05)
        info.close()
    finally:
        deployment.stop()
