"""Primary + replicas: REPLICAOF, and waiting until every replica is linked, done with its
initial sync and caught up with the primary's replication offset."""

from __future__ import annotations

import time

import redis

from redline.core.errors import RunError
from redline.server.process import ManagedServer

POLL_S = 0.05


def _replica_state(replica: ManagedServer, primary_offset: int) -> str | None:
    """None when the replica is in sync with `primary_offset`, else what it is still doing."""
    info = replica.info("replication")
    if info.get("master_link_status") != "up":
        return f"replica {replica.port}: link {info.get('master_link_status')}"
    if int(info.get("master_sync_in_progress", 0)):
        return f"replica {replica.port}: initial sync in progress"
    offset = int(info.get("slave_repl_offset", -1))
    if offset < primary_offset:
        return f"replica {replica.port}: offset {offset} of {primary_offset}"
    # a replica with appendonly yes rewrites its AOF after a full sync (and cannot shut down
    # until it has): that work belongs to the sync, not to the measured window
    persistence = replica.info("persistence")
    if int(persistence.get("aof_rewrite_in_progress", 0)) or int(persistence.get("aof_rewrite_scheduled", 0)):
        return f"replica {replica.port}: rewriting its AOF after the sync"
    return None


def wait_in_sync(primary: ManagedServer, replicas: list[ManagedServer], *, timeout_s: float) -> float:
    """Seconds until every replica has master_link_status:up, no sync in progress, and the
    primary's current replication offset. RunError with each laggard's state on timeout."""
    started = time.monotonic()
    deadline = started + timeout_s
    waiting = ["not checked yet"]
    try:
        while time.monotonic() < deadline:
            for server in (primary, *replicas):
                if not server.alive():
                    raise RunError(f"server {server.port} exited while the replicas synced "
                                   f"({server.exit_description()}): "
                                   f"{server.crash_reason() or server.log_tail(3)}")
            primary_offset = int(primary.info("replication").get("master_repl_offset", 0))
            waiting = [state for replica in replicas
                       if (state := _replica_state(replica, primary_offset)) is not None]
            if not waiting:
                return time.monotonic() - started
            time.sleep(POLL_S)
    except redis.RedisError as exc:
        raise RunError(f"checking replication failed: {exc}") from exc
    raise RunError(f"replicas not in sync with primary {primary.port} within {timeout_s:.0f}s: "
                   + "; ".join(waiting))


def attach(primary: ManagedServer, replicas: list[ManagedServer]) -> None:
    """REPLICAOF the primary on every replica (starts the full sync)."""
    try:
        for replica in replicas:
            replica.client().execute_command("REPLICAOF", primary.host, primary.port)
    except redis.RedisError as exc:
        raise RunError(f"REPLICAOF {primary.host} {primary.port} failed: {exc}") from exc
