"""The agent's claiming of abandoned jobs against a real redis-server: an abandoned entry behind
many entries of live agents is still found (XAUTOCLAIM's cursor walks the whole pending list)."""

from __future__ import annotations

import time

from redline.fleet import keys
from redline.fleet.agent import Agent
from redline.fleet.process import Stopping
from redline.fleet.work import ensure_group
from redline.store.results import Store
from tests.fleet_helpers import client, redis_with_aof

LIVE = 20          # XAUTOCLAIM looks at 10 × COUNT pending entries per call


def test_an_abandoned_job_behind_many_running_ones_is_claimed(tmp_path):
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        stream = keys.JOBS.key(platform="p")
        ensure_group(r, stream, keys.AGENTS_GROUP)
        ids = [r.xadd(stream, {"job_id": f"j{n}", "work_id": "w", "attempt": "1", "job": "{}"}) for n in range(LIVE + 1)]
        r.xreadgroup(keys.AGENTS_GROUP, "live", {stream: ">"}, count=LIVE + 1)
        time.sleep(2.5)                                   # every entry idle now …
        r.xclaim(stream, keys.AGENTS_GROUP, "live", 0, ids[:LIVE], justid=True)   # … but the live agent's
        agent = Agent(r, platform="p", name="taker", store=Store(tmp_path / "agent.db"), claim_idle_s=2.0,
                      heartbeat_s=0.5, max_attempts=3, stopping=Stopping())
        claimed = []
        for _ in range(LIVE + 5):
            found = agent._claim_abandoned()
            if found:
                claimed.append(found[0])
            if ids[LIVE] in claimed:
                break
        assert ids[LIVE] in claimed
        (pending,) = r.xpending_range(stream, keys.AGENTS_GROUP, ids[LIVE], ids[LIVE], 1)
        assert pending["consumer"] == "taker" and pending["times_delivered"] == 2
