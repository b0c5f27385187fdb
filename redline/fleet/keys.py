"""Every Redis name the fleet uses, with the fields each one holds: the one table of them
(docs/fleet.md mirrors it; tests/test_fleet_units.py checks the two agree).

Streams carry the work and the results; consumer groups give each entry to one consumer of the
group and keep it pending until XACK; hashes and sets only describe (status, heartbeats).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "redline"
AGENTS_GROUP = "agents"          # the consumer group on each platform's jobs stream
COLLECTOR_GROUP = "collector"    # the consumer group on the results stream


@dataclass(frozen=True)
class Name:
    pattern: str          # the key, with {placeholders}
    kind: str             # stream, hash, zset, set, string
    groups: str           # consumer groups on it ('' for none)
    written_by: str
    fields: str           # what an entry / the value holds

    def key(self, **parts: str) -> str:
        return self.pattern.format(**parts)


JOBS = Name(f"{PREFIX}:jobs:{{platform}}", "stream", AGENTS_GROUP, "submit, api, agent (retry), collector (bisection)",
            "job_id, work_id, attempt (1..N), submitted_at (unix s), job (JSON: the job document, "
            "redline.engine.job format), last_error (after a failed attempt)")
RESULTS = Name(f"{PREFIX}:results", "stream", COLLECTOR_GROUP, "agent",
               "kind (result or dead), job_id, work_id, platform, agent, attempt, submitted_at, started_at, "
               "finished_at; result: runs (JSON list of run documents) or runs_ref (a blob key) + runs_sha256; "
               "dead: error")
DEAD = Name(f"{PREFIX}:dead", "stream", "", "agent",
            "job_id, work_id, platform, agent, attempts, error, job (JSON)")
COMMENTS = Name(f"{PREFIX}:comments", "stream", "", "collector",
                "work_id, state (done or failed), markdown, github (repository#number or ''), bisection (a fleet "
                "bisection's report: its id)")
WORK = Name(f"{PREFIX}:work:{{work_id}}", "hash", "", "submit/api, agent, collector",
            "work_id, created_at, source (cli, push, pull_request or bisect), baseline, comparison, runs, max_runs, platforms "
            "(JSON list), jobs_total, jobs_done, jobs_dead, state (queued, running, done or "
            "failed), started_at (first job start), github (repository#number or ''), session_id (the collector's store session), "
            "sides (JSON list of the two sides, or of the one side of a fleet bisection's counted step), settings "
            "(JSON: runs, max_runs, duration_s, warmup_s, scale, profile, snapshots, measure, window_instructions, "
            "window_requests — test → the request count per connection its jobs send), bisection (the fleet "
            "bisection it is a step of, or ''), branch (the branch a push went to, or '')")
WORKS = Name(f"{PREFIX}:works", "zset", "", "submit/api, collector (bisection)", "work_id scored by created_at")
PLATFORMS = Name(f"{PREFIX}:platforms", "set", "", "agent, fleet local", "platform names that have a jobs stream")
PLATFORM = Name(f"{PREFIX}:platform:{{platform}}", "string (TTL)", "", "agent, fleet local",
                "when an agent of the platform last registered (each heartbeat); expires 10 minutes later: only "
                "a platform registered recently takes work")
AGENT = Name(f"{PREFIX}:agent:{{platform}}:{{agent}}", "hash (TTL)", "", "agent",
             "agent, platform, host, pid, job_id ('' when idle), job_started_at, heartbeat_at; expires "
             "3 heartbeats after the last")
BLOB = Name(f"{PREFIX}:blob:{{sha256}}", "string", "", "agent",
            "a results document larger than the inline limit; deleted by the collector once stored")
DELIVERY = Name(f"{PREFIX}:delivery:{{body_sha256}}", "string (TTL)", "", "api",
                "the sha256 of a signed webhook body seen, holding its X-GitHub-Delivery id (replay protection "
                "over what the signature covers; kept 7 days)")

BISECTION = Name(f"{PREFIX}:bisection:{{bisection}}", "hash", "", "collector",
                 "bisection, work_id (the work item whose change it follows), repository, platform, per_round, stage "
                 "(queued, confirming, bisecting, checking, waiting, stalled, reported, not reproduced, failed), round, "
                 "rounds (about), steps, culprit, note, updated_at, position and queued (its place in its "
                 "repository's queue), frees_at (waiting: when agent time frees): a mirror of the store's state for "
                 "`fleet status`")
BISECTIONS = Name(f"{PREFIX}:bisections", "zset", "", "collector", "bisection ids scored by their start")

TABLE = (JOBS, RESULTS, DEAD, COMMENTS, WORK, WORKS, PLATFORMS, PLATFORM, AGENT, BLOB, DELIVERY, BISECTION, BISECTIONS)
