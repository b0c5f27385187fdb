"""`redline fleet status`: what the fleet holds, read from Redis alone."""

from __future__ import annotations

import redis

from redline.core.numbers import format_duration
from redline.fleet import entries, keys
from redline.fleet.admission import STAGES as BISECTION_STAGES, ordinal
from redline.fleet.work import PLATFORM_TTL_S, live_platforms

DEAD_SHOWN = 50
WORKS_SHOWN = 20
BISECTIONS_SHOWN = 20


def work_status(client: redis.Redis, work_id: str) -> dict | None:
    work = client.hgetall(keys.WORK.key(work_id=work_id))
    if not work:
        return None
    state = work.get("state", "queued")
    if state not in ("done", "failed"):
        state = "running" if work.get("started_at") else "queued"
    return {"work_id": work_id, "state": state, "jobs_total": _count(work.get("jobs_total")),
            "jobs_done": _count(work.get("jobs_done")), "jobs_dead": _count(work.get("jobs_dead")),
            "source": work.get("source"), "baseline": work.get("baseline"), "comparison": work.get("comparison"),
            "platforms": _names(work.get("platforms")), "session_id": work.get("session_id")}


# What Redis holds is read as untrusted: a field that is not what the fleet writes shows as 0 / none.
def _count(text) -> int:
    try:
        return entries.integer(text or "0", "count", 0, 10**12)
    except entries.Malformed:
        return 0


def _names(text) -> list[str]:
    try:
        names = entries.json_document(text or "[]", "platforms", list)
    except entries.Malformed:
        return []
    return [name for name in names if isinstance(name, str)]


def _moment(text) -> float:
    try:
        return entries.number(text or 0, "heartbeat_at", 0, 1e11)
    except entries.Malformed:
        return 0.0


def platform_status(client: redis.Redis, platform: str) -> dict:
    stream = keys.JOBS.key(platform=platform)
    length = client.xlen(stream)        # done entries are deleted: what is left is waiting or running
    try:
        pending = client.xpending(stream, keys.AGENTS_GROUP)["pending"]
        consumers = client.xinfo_consumers(stream, keys.AGENTS_GROUP)
    except redis.ResponseError:         # no group yet
        pending, consumers = 0, []
    agents = []
    for key in client.scan_iter(match=keys.AGENT.key(platform=platform, agent="*"), count=100):
        agent = client.hgetall(key)
        if agent:
            agents.append({"agent": agent.get("agent"), "host": agent.get("host"), "pid": agent.get("pid"),
                           "job_id": agent.get("job_id") or None,
                           "heartbeat_at": _moment(agent.get("heartbeat_at"))})
    live = {a["agent"] for a in agents}
    abandoned = sum(c.get("pending", 0) for c in consumers if c.get("name") not in live)
    return {"platform": platform, "waiting": length - pending, "running": pending - abandoned,
            "abandoned": abandoned, "agents": sorted(agents, key=lambda a: a["agent"] or "")}


def fleet_status(client: redis.Redis) -> dict:
    platforms = sorted(client.smembers(keys.PLATFORMS.key()))
    live = set(live_platforms(client))
    dead = [{"entry": entry_id, **{k: v for k, v in fields.items() if k != "job"}}
            for entry_id, fields in client.xrevrange(keys.DEAD.key(), count=DEAD_SHOWN)]
    works = [work_status(client, work_id) for work_id in client.zrevrange(keys.WORKS.key(), 0, WORKS_SHOWN - 1)]
    bisections = [bisection_status(client, b) for b in client.zrevrange(keys.BISECTIONS.key(), 0, BISECTIONS_SHOWN - 1)]
    return {"platforms": [{**platform_status(client, p), "live": p in live} for p in platforms], "dead_letters": dead,
            "dead_letters_total": client.xlen(keys.DEAD.key()), "results_waiting": client.xlen(keys.RESULTS.key()),
            "work": [w for w in works if w], "bisections": [b for b in bisections if b]}


def bisection_status(client: redis.Redis, bisection: str) -> dict | None:
    """The closed loop's stage of one bisection (keys.BISECTION, mirrored by the collector)."""
    fields = client.hgetall(keys.BISECTION.key(bisection=bisection))
    if not fields:
        return None
    stage = fields.get("stage")
    return {"bisection": bisection[:40], "work_id": (fields.get("work_id") or "")[:200],
            "repository": (fields.get("repository") or "")[:400], "platform": (fields.get("platform") or "")[:64],
            "stage": stage if stage in BISECTION_STAGES else "unknown", "round": _count(fields.get("round")),
            "rounds": _count(fields.get("rounds")), "per_round": _count(fields.get("per_round")),
            "steps": _count(fields.get("steps")), "culprit": (fields.get("culprit") or "")[:40],
            "note": (fields.get("note") or "")[:300], "updated_at": _moment(fields.get("updated_at")),
            "position": _count(fields.get("position")), "queued": _count(fields.get("queued")),
            "frees_at": _moment(fields.get("frees_at"))}


def bisection_line(b: dict, now: float) -> str:
    stage = b["stage"]
    if stage == "queued":
        stage = f"queued: {ordinal(b['position'])} of {b['queued']} for {b['repository']}"
    elif stage == "waiting":
        stage = f"waiting for agent time, frees in {format_duration(max(0.0, b['frees_at'] - now))}"
    elif stage == "bisecting":
        stage = f"bisecting round {b['round']} of about {b['rounds']}"
    elif stage == "checking":
        stage = "checking the culprit's own change"
    elif stage == "reported":
        stage = f"reported: {'culprit ' + b['culprit'][:12] if b['culprit'] else 'no culprit named'}"
    elif b["note"]:
        stage = f"{stage}: {b['note']}"
    return (f"bisection {b['bisection']} of work {b['work_id']} ({b['repository']} on {b['platform']}, "
            f"{b['per_round']} per round): {stage}; {b['steps']} pairs queued")


def status_lines(status: dict, now: float) -> list[str]:
    lines = [f"results waiting for the collector: {status['results_waiting']}"]
    for p in status["platforms"]:
        lines.append(f"platform {p['platform']}: {p['waiting']} waiting, {p['running']} running, "
                     f"{p['abandoned']} abandoned (claimed after the idle timeout), {len(p['agents'])} live agents"
                     + ("" if p.get("live", True) else f"; no agent registered in the last {PLATFORM_TTL_S // 60} "
                                                      "minutes: it takes no work"))
        for a in p["agents"]:
            lines.append(f"  agent {a['agent']} on {a['host']} pid {a['pid']}: "
                         f"{'running ' + a['job_id'] if a['job_id'] else 'idle'}, "
                         f"heartbeat {max(0.0, now - a['heartbeat_at']):.0f}s ago")
    lines.append(f"dead letters: {status['dead_letters_total']}")
    for d in status["dead_letters"]:
        lines.append(f"  {d.get('job_id')} on {d.get('platform')} after {d.get('attempts')} attempts: {d.get('error')}")
    lines += [work_line(w) for w in status["work"]]
    lines += [bisection_line(b, now) for b in status.get("bisections", [])]
    return lines


def work_line(w: dict) -> str:
    return (f"work {w['work_id']}: {w['state']}, {w['jobs_done']}/{w['jobs_total']} done, {w['jobs_dead']} dead "
            f"({w['baseline'] or '-'} vs {w['comparison']})")
