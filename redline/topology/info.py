"""INFO over several servers read as one: the counters a run looks at (keyspace hits and misses,
used memory, commandstats calls) summed over the nodes that serve the data."""

from __future__ import annotations

import redis


def _summed(values: list):
    first = values[0]
    if isinstance(first, dict):
        keys = dict.fromkeys(k for value in values if isinstance(value, dict) for k in value)
        return {k: _summed([v[k] for v in values if isinstance(v, dict) and k in v]) for k in keys}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sum(values)
    return first


def summed_info(infos: list[dict]) -> dict:
    """Numbers (also inside nested sections such as cmdstat_get or db0) added up; anything
    else (versions, roles, names) taken from the first server."""
    if not infos:
        raise ValueError("no INFO replies to sum")
    return _summed(infos)


class SummedInfo:
    """Duck-types the part of redis.Redis a run probe uses: info(section) and close()."""

    def __init__(self, clients: list[redis.Redis]):
        if not clients:
            raise ValueError("SummedInfo needs at least one client")
        self.clients = clients

    def info(self, section: str = "all") -> dict:
        return summed_info([client.info(section) for client in self.clients])

    def close(self) -> None:
        for client in self.clients:
            client.close()
