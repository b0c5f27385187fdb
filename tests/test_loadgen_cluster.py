"""redline-load --cluster-mode against a 3-primary cluster of Debian redis-servers, formed by
hand with CLUSTER MEET and CLUSTER ADDSLOTSRANGE."""
import json
import subprocess
import time
from contextlib import ExitStack

import pytest
import redis

from test_loadgen import BIN, base, free_port, redis_server, run_load


RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


def wait_for(predicate, timeout=15.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def cluster_port():
    """A free port whose cluster bus port (port + 10000) is valid and free too."""
    import socket
    for _ in range(200):
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


@pytest.fixture
def cluster(tmp_path):
    with ExitStack() as stack:
        nodes = []
        for i in range(3):
            conf = tmp_path / f"nodes-{i}.conf"
            nodes.append(stack.enter_context(redis_server(
                "--cluster-enabled", "yes", "--cluster-config-file", str(conf),
                "--cluster-node-timeout", "5000", "--dir", str(tmp_path), port=cluster_port())))
        clients = [redis.Redis(host="127.0.0.1", port=n.port) for n in nodes]
        for c, (lo, hi) in zip(clients, RANGES):
            c.execute_command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        for c in clients[1:]:
            c.execute_command("CLUSTER", "MEET", "127.0.0.1", nodes[0].port)
        wait_for(lambda: all(c.execute_command("CLUSTER", "INFO").decode().find("cluster_state:ok") >= 0
                             for c in clients), what="cluster_state:ok")
        wait_for(lambda: all(len(c.execute_command("CLUSTER", "SLOTS")) == 3 for c in clients),
                 what="every node knows every slot range")
        yield nodes, clients


def total_keys(clients):
    return sum(c.dbsize() for c in clients)


def test_cluster_preload_is_exact_and_routed(cluster, tmp_path):
    nodes, clients = cluster
    _, data = run_load([*base(nodes[0]), "--cluster-mode", "-n", "allkeys", "--key-pattern", "P:P",
                        "--ratio", "1:0", "--key-minimum", 1, "--key-maximum", 6000, "-c", 3, "-t", 2],
                       tmp_path)
    assert total_keys(clients) == 6000
    sets = [c.info("commandstats").get("cmdstat_set", {}).get("calls", 0) for c in clients]
    assert sum(sets) == 6000                       # each key written once, on its owner
    assert all(s > 1500 for s in sets)             # spread over the three primaries
    assert data["ALL STATS"]["Totals"]["Count"] == 6000
    assert data["redline"]["connections"]["configured"] == 3 * 2 * 3
    assert data["redline"]["errors"] == {}
    assert data["ALL STATS"]["Totals"]["MOVED/sec"] == 0


def test_cluster_moved_is_followed(cluster, tmp_path):
    nodes, clients = cluster
    out = tmp_path / "o.json"
    proc = subprocess.Popen([str(BIN), "-s", "127.0.0.1", "-p", str(nodes[0].port), "--cluster-mode",
                             "--test-time", "5", "-c", "2", "-t", "1", "--ratio", "0:1",
                             "--key-maximum", "2000", "--json-out-file", str(out), "--hide-histogram"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    # (5 s of load: the slot move below must land while it runs, also on a busy machine)
    # Hand the first primary's (empty) slots to the second one behind the client's back.
    target_id = clients[1].execute_command("CLUSTER", "MYID").decode()
    for c in (clients[1], clients[0], clients[2]):      # the new owner first: no ping-pong
        pipe = c.pipeline(transaction=False)
        for slot in range(0, 5461):
            pipe.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
        # a primary that lost its last slot becomes a replica of the node that took them, as soon as
        # gossip tells it (sooner than this pipeline on a loaded machine): it then refuses SETSLOT
        # and follows its new primary's slots anyway
        refused = [str(r) for r in pipe.execute(raise_on_error=False) if isinstance(r, redis.ResponseError)]
        assert all("SETSLOT only with masters" in error for error in refused), refused[:3]
    gets_before = clients[1].info("commandstats").get("cmdstat_get", {}).get("calls", 0)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    data = json.loads(out.read_text())
    totals = data["ALL STATS"]["Totals"]
    assert totals["MOVED/sec"] > 0
    # redirected requests succeed on the new owner (the cluster may briefly answer CLUSTERDOWN
    # while its nodes disagree about the slots)
    errors = data["redline"]["errors"]
    assert set(errors) <= {"CLUSTERDOWN"} and sum(errors.values()) < totals["Count"] * 0.01
    # after the MOVED replies the client sends those slots' keys to the new owner directly
    gets_after = clients[1].info("commandstats").get("cmdstat_get", {}).get("calls", 0)
    assert gets_after > gets_before
    moved_total = totals["MOVED/sec"] * data["redline"]["measured_seconds"]
    assert moved_total < totals["Count"] * 0.05
