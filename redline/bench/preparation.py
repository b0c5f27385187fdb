"""Filling a server for a test: generated dataset, preload, init commands, and the check that the
keyspace holds what the suite says it should. Whether the test can run at all is
redline.bench.admission; which snapshot the filled data is cached as, redline.bench.snapshot_plan; how every
run of every side reaches that state, redline.bench.state."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import redis

from redline.core.errors import RunError
from redline.load.redline_load import LoadRequest, run_load
from redline.server.process import Server
from redline.server.watch import ServerWatch
from redline.suites.keyspace import unreachable_keyspace
from redline.suites.parallel import keys_above_maximum_warning

if TYPE_CHECKING:
    from redline.suites import TestSpec




# A preload is stopped when it completes no request for this long; it has no bound on its whole
# length unless the suite gives one (preload_tool.timeout): a 50M-request stream preload that was
# 92% done after 30 minutes on a busy 2-core machine was lost to the fixed 1,800 s bound this replaced.
PRELOAD_STALL_S = 300.0


def dataset_scale(test: TestSpec, requested: float | None) -> float:
    return requested if requested is not None else test.dataset_scale


class _PreloadProgress:
    def __init__(self, observer):
        self.observer = observer


    def on_phase(self, phase: str, at: float) -> None:
        pass


    def on_progress(self, event: dict) -> None:
        total = event.get("requests_total")
        self.observer.progress(event.get("requests_done", 0), total)


def _generated_dataset(test: TestSpec, server: Server, scale: float, observer) -> dict:
    from redline import datasets  # the generators are only needed by tests that name a dataset
    from redline.datasets import DatasetError
    from redline.datasets.bulkload import BulkLoadError


    name = test.db.dataset_name
    dataset = datasets.lookup(name) if name else None
    if dataset is None:
        if test.db.dataset_url:
            raise RunError(f"dataset {name!r} comes from {test.db.dataset_url}, which cannot be "
                           f"downloaded here, and redline has no generator for it")
        return {}
    plan = dataset.plan(scale)
    observer.phase(f"dataset {name} ×{scale:g}", total=plan.element_count, unit="elements")
    try:
        dataset.load(host=server.host, port=server.port, scale=scale,
                     progress=lambda done, total: observer.progress(done, total))
    except (DatasetError, BulkLoadError) as exc:
        raise RunError(f"dataset {name}: {exc}") from exc
    return {"name": plan.name, "scale": plan.scale, "keys": plan.key_count,
            "elements": plan.element_count, "seed": plan.seed, "fingerprint": plan.fingerprint()}


def keyspace_length(client) -> int:
    """Keys in every database (of every shard, when given a cluster's summed INFO)."""
    return keyspace_counts(client)[0]


def keyspace_counts(client) -> tuple[int, int]:
    """(keys, keys with a time to live) over every database, from INFO keyspace."""
    dbs = [db for name, db in client.info("keyspace").items() if name.startswith("db")]
    return sum(db.get("keys", 0) for db in dbs), sum(db.get("expires", 0) for db in dbs)


def expired_keys(client) -> int:
    """Keys the server removed because their time to live ran out, since it started (INFO stats)."""
    return int(client.info("stats").get("expired_keys", 0))


def check_keyspace(test: TestSpec, server: Server, *, before_init: int | None = None,
                   expired_before: int | None = None) -> dict:
    """The suite's check.keyspacelen, enforced after init commands as upstream does; returns the
    keys found, how many of them expire and how many expired while preparing. `before_init` (keys
    after the preload) says who made a mismatch; `expired_before` (INFO's expired_keys when the
    preparation began) counts the keys whose time to live ran out before the check: when they
    account for every key missing, the check holds (a suite's `SET … EX 5` preload outlasts 5 s
    on a slow machine). They may account for more: a key written again after it expired counts
    twice."""
    client = server.info_client()
    found, with_ttl = keyspace_counts(client)
    expired = expired_keys(client) - expired_before if expired_before is not None else 0
    facts = {"keyspace_length": found, "keys_with_ttl": with_ttl}
    if expired:
        facts["keys_expired_while_preparing"] = expired
    expected = test.db.keyspacelen
    if expected is not None and found != expected and not found < expected <= found + expired:
        origin = ""
        if before_init is not None and before_init != found:
            origin = f" ({before_init} after the preload, {found - before_init:+d} from init commands)"
        if with_ttl:
            origin += f"; {with_ttl} of them have a time to live"
            if expired_before is None:
                origin += ", and keys whose time ran out while preparing are gone"
        if expired and found < expected:
            origin += (f"; {expired} keys expired while preparing, fewer than the "
                       f"{expected - found} missing")
        elif expired:
            origin += f"; {expired} keys expired while preparing"
        workload = test.db.preload.workload if test.db.preload else None
        beyond = keys_above_maximum_warning(workload) if workload and found > expected else None
        if beyond:
            origin += f"; {beyond}"
        raise RunError(f"keyspace check failed: expected {expected} keys after preparation, "
                       f"found {found}{origin}")
    return facts


def prepare(test: TestSpec, server: Server, *, scale: float | None, observer,
            client_cpus: tuple[int, ...] | None, workdir: Path) -> dict:
    """Fill the server for `test`; returns the facts about the data to record with each run."""
    facts: dict = {}
    scale = dataset_scale(test, scale)
    shortfall = unreachable_keyspace(test.db)
    if shortfall:
        raise RunError(f"keyspace check failed before preparing anything: {shortfall}")
    expired_before = expired_keys(server.info_client())
    if test.db.dataset_name:
        facts = _generated_dataset(test, server, scale, observer)
    if test.db.preload:
        observer.phase("preload", unit="requests")
        preload = run_load(LoadRequest(arguments=server.load_arguments(test.db.preload.arguments),
                             host=server.host, port=server.port,
                             json_path=workdir / f"preload-{server.port}.json", cpus=client_cpus,
                             reconnect_on_error=True),    # requests lost with a connection are re-sent
                 listener=_PreloadProgress(observer), server_alive=ServerWatch(server),
                 timeout_s=test.db.preload.timeout_seconds, stall_s=PRELOAD_STALL_S)
        for warning in preload.report.warnings:   # e.g. how -n allkeys differs from memtier
            observer.note(f"preload: {warning}")
    client = server.command_client()
    has_init = bool(test.db.init_commands or test.db.init_lua)
    before_init = keyspace_length(server.info_client()) if has_init and test.db.keyspacelen is not None else None
    try:
        for command in test.db.init_commands:
            client.execute_command(*command)
        if test.db.init_lua:
            client.eval(test.db.init_lua, 0)
    except redis.ResponseError as exc:
        raise RunError(f"init command failed: {exc}") from exc
    except redis.RedisError as exc:
        raise RunError(f"server unreachable during preparation: {exc}") from exc
    facts.update(check_keyspace(test, server, before_init=before_init, expired_before=expired_before))
    if facts.get("keys_expired_while_preparing"):
        observer.note(f"preparation: {facts['keys_expired_while_preparing']} keys expired before it ended "
                      f"(their time to live is shorter than the preparation); "
                      f"{facts['keyspace_length']} remain")
    return facts
