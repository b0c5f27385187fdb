"""Topology names as the upstream suites spell them (setups/topologies/topologies.yml) → a typed spec.

Names understood:
  oss-standalone
  oss-standalone-NN-io-threads
  oss-standalone-NN-replicas[-rdb | -aof-everysec | -NN-io-threads]
  oss-cluster-N-primaries
  oss-standalone-with-redisearch, dragonfly-NN-proactor-threads (parsed; `unsupported` says why)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from redline.core.errors import UsageError

CLUSTER_SLOTS = 16384

# persistence variants of the replica setups (upstream passes these as redis_arguments to
# primary and replicas alike)
PERSISTENCE_SUFFIXES: dict[str, tuple[tuple[str, str], ...]] = {
    "rdb": (("save", "10 1000"),),
    "aof-everysec": (("appendonly", "yes"), ("appendfsync", "everysec")),
}

DEFAULT_TOPOLOGY = "oss-standalone"       # when neither the command line nor the suite names one
_STANDALONE = re.compile(r"oss-standalone")
_IO_THREADS = re.compile(r"oss-standalone-(?P<threads>\d+)-io-threads")
_REPLICAS = re.compile(r"oss-standalone-(?P<replicas>\d+)-replicas"
                       r"(?:-(?P<persistence>rdb|aof-everysec)|-(?P<threads>\d+)-io-threads)?")
_CLUSTER = re.compile(r"oss-cluster-(?P<primaries>\d+)-primaries")
_REDISEARCH = re.compile(r"oss-standalone-with-redisearch")
_DRAGONFLY = re.compile(r"dragonfly-(?P<threads>\d+)-proactor-threads")

KNOWN_FORMS = ("oss-standalone, oss-standalone-NN-io-threads, oss-standalone-NN-replicas "
               "(optionally -rdb, -aof-everysec or -NN-io-threads), oss-cluster-N-primaries")


@dataclass(frozen=True)
class TopologySpec:
    """What to deploy. `server_config` is added to every server's configuration (after the
    suite's own, so a topology's persistence setting wins as upstream's command line order does);
    `unsupported` is set for names redline parses but cannot deploy, and says why."""

    name: str
    primaries: int
    replicas: int
    io_threads: int | None
    cluster: bool
    server_config: tuple[tuple[str, str], ...] = ()
    unsupported: str | None = None

    @property
    def processes(self) -> int:
        return self.primaries + self.replicas

    def roles(self) -> list[str]:
        """One role name per server process, in deployment order."""
        if self.cluster:
            return [f"primary-{i + 1}" for i in range(self.primaries)]
        return ["primary"] + [f"replica-{i + 1}" for i in range(self.replicas)]

    def config(self) -> dict[str, str]:
        """The configuration lines this topology adds to every server."""
        lines: dict[str, str] = {}
        if self.io_threads is not None:
            lines["io-threads"] = str(self.io_threads)
            lines["io-threads-do-reads"] = "yes"
        lines.update(dict(self.server_config))
        return lines


def _count(text: str, what: str, name: str, minimum: int = 1) -> int:
    value = int(text)
    if value < minimum:
        raise UsageError(f"topology {name!r}: {what} must be at least {minimum}, got {value}")
    return value


def parse_topology(name: str) -> TopologySpec:
    """The spec for an upstream topology name; UsageError naming the accepted forms otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"empty topology name; expected one of: {KNOWN_FORMS}")
    name = name.strip()
    if _STANDALONE.fullmatch(name):
        return TopologySpec(name=name, primaries=1, replicas=0, io_threads=None, cluster=False)
    if m := _IO_THREADS.fullmatch(name):
        threads = _count(m["threads"], "io-threads", name)
        return TopologySpec(name=name, primaries=1, replicas=0, io_threads=threads, cluster=False)
    if m := _REPLICAS.fullmatch(name):
        replicas = _count(m["replicas"], "the number of replicas", name)
        threads = _count(m["threads"], "io-threads", name) if m["threads"] else None
        extra = PERSISTENCE_SUFFIXES[m["persistence"]] if m["persistence"] else ()
        return TopologySpec(name=name, primaries=1, replicas=replicas, io_threads=threads, cluster=False,
                            server_config=extra)
    if m := _CLUSTER.fullmatch(name):
        primaries = _count(m["primaries"], "the number of primaries", name)
        if primaries > CLUSTER_SLOTS:
            raise UsageError(f"topology {name!r}: a cluster has at most {CLUSTER_SLOTS} primaries")
        return TopologySpec(name=name, primaries=primaries, replicas=0, io_threads=None, cluster=True)
    if _REDISEARCH.fullmatch(name):
        return TopologySpec(name=name, primaries=1, replicas=0, io_threads=None, cluster=False,
                            unsupported="needs the RediSearch module (redisearch.so), which redline does not provide")
    if m := _DRAGONFLY.fullmatch(name):
        return TopologySpec(name=name, primaries=1, replicas=0, io_threads=None, cluster=False,
                            unsupported=f"a Dragonfly server (--proactor_threads {int(m['threads'])}); "
                                        "redline starts Redis-compatible servers from a config file only")
    raise UsageError(f"unknown topology {name!r}; expected one of: {KNOWN_FORMS}")
