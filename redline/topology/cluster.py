"""Forming a Redis Cluster out of started nodes: CLUSTER ADDSLOTSRANGE (ADDSLOTS on servers
older than 7.0) splitting the 16384 slots evenly, CLUSTER MEET, then waiting until every node
reports cluster_state:ok and knows every node and every slot."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

import redis

from redline.core.errors import RunError
from redline.server.process import LOOPBACK, ManagedServer, free_port
from redline.topology.spec import CLUSTER_SLOTS

BUS_PORT_OFFSET = 10000            # a node's cluster bus listens on port + 10000
MAX_NODE_PORT = 65535 - BUS_PORT_OFFSET
PORT_TRIES = 200
POLL_S = 0.05


def slot_ranges(primaries: int) -> list[tuple[int, int]]:
    """16384 slots in `primaries` contiguous ranges whose sizes differ by at most one."""
    if primaries < 1:
        raise ValueError(f"a cluster needs at least one primary, got {primaries}")
    bounds = [i * CLUSTER_SLOTS // primaries for i in range(primaries + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(primaries)]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def node_port() -> int:
    """A free loopback port whose cluster bus port (port + 10000) is valid and free too."""
    for _ in range(PORT_TRIES):
        port = free_port()
        if port <= MAX_NODE_PORT and _port_is_free(port + BUS_PORT_OFFSET):
            return port
    raise RunError(f"found no free port pair (port, port + {BUS_PORT_OFFSET}) for a cluster node "
                   f"in {PORT_TRIES} tries")


def _cluster_info(client: redis.Redis) -> dict[str, str]:
    text = client.execute_command("CLUSTER", "INFO")
    text = text.decode() if isinstance(text, bytes) else str(text)
    fields = {}
    for line in text.splitlines():
        if ":" in line:
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    return fields


def _slots_known(client: redis.Redis) -> int:
    """How many slots this node can route (from CLUSTER SLOTS)."""
    return sum(int(entry[1]) - int(entry[0]) + 1 for entry in client.execute_command("CLUSTER", "SLOTS"))


def _assign_slots(client: redis.Redis, first: int, last: int) -> None:
    try:
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
    except redis.ResponseError as exc:
        if "unknown subcommand" not in str(exc).lower() and "unknown command" not in str(exc).lower():
            raise
        client.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))


@dataclass
class ClusterFormation:
    slots: list[dict]
    formed_s: float

    def as_dict(self) -> dict:
        return {"slots": self.slots, "formed_s": round(self.formed_s, 3)}


def _node_state(node: ManagedServer, client: redis.Redis, nodes: int) -> str | None:
    """None when this node is ready, else what it is still missing."""
    info = _cluster_info(client)
    missing = []
    if info.get("cluster_state") != "ok":
        missing.append(f"cluster_state:{info.get('cluster_state')}")
    if info.get("cluster_known_nodes") != str(nodes):
        missing.append(f"knows {info.get('cluster_known_nodes')} of {nodes} nodes")
    if not missing:
        routed = _slots_known(client)
        if routed != CLUSTER_SLOTS:
            missing.append(f"routes {routed} of {CLUSTER_SLOTS} slots")
    return f"{node.host}:{node.port} " + ", ".join(missing) if missing else None


def form_cluster(nodes: list[ManagedServer], *, timeout_s: float = 30.0) -> ClusterFormation:
    """Give each node its share of the slots, introduce them to each other, and wait until the
    cluster is whole. RunError naming the nodes that are not ready when `timeout_s` runs out."""
    started = time.monotonic()
    clients = [node.client(socket_timeout=10) for node in nodes]
    ranges = slot_ranges(len(nodes))
    try:
        for client, (first, last) in zip(clients, ranges):
            _assign_slots(client, first, last)
        for node in nodes[1:]:
            clients[0].execute_command("CLUSTER", "MEET", node.host, node.port)
        deadline = started + timeout_s
        waiting = [f"{n.host}:{n.port} not checked yet" for n in nodes]
        while time.monotonic() < deadline:
            dead = [n for n in nodes if not n.alive()]
            if dead:
                node = dead[0]
                raise RunError(f"cluster node {node.host}:{node.port} exited while the cluster formed "
                               f"({node.exit_description()}): {node.crash_reason() or node.log_tail(3)}")
            waiting = [state for node, client in zip(nodes, clients)
                       if (state := _node_state(node, client, len(nodes))) is not None]
            if not waiting:
                break
            time.sleep(POLL_S)
        else:
            raise RunError(f"the {len(nodes)}-node cluster did not reach cluster_state:ok within "
                           f"{timeout_s:.0f}s: " + "; ".join(waiting))
    except redis.RedisError as exc:
        raise RunError(f"forming the cluster failed: {exc}") from exc
    finally:
        for client in clients:
            client.close()
    slots = [{"port": node.port, "first": first, "last": last} for node, (first, last) in zip(nodes, ranges)]
    return ClusterFormation(slots=slots, formed_s=time.monotonic() - started)
