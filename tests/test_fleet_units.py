"""The fleet's pure parts: the key table and its documentation, a work item's jobs, the webhook's
signature check and decisions."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from redline.analysis.comparison import COMPARED_METRICS
from redline.fleet import api, keys, work
from redline.engine.job import Job, SideSpec

DOCS = Path(__file__).resolve().parent.parent / "docs" / "fleet.md"
SIDES = [SideSpec("baseline", "bin:/usr/bin/redis-server"), SideSpec("comparison", "bin:/usr/bin/redis-server",
                                                                       (("appendonly", "yes"),))]


def test_docs_mirror_the_key_table():
    text = DOCS.read_text()
    for name in keys.TABLE:
        groups = f"`{name.groups}`" if name.groups else "–"
        row = f"| `{name.pattern}` | {name.kind} | {groups} | {name.written_by} | {name.fields} |"
        assert row in text, f"docs/fleet.md lacks the row of {name.pattern}"


def test_a_work_item_is_every_test_topology_and_platform():
    item = work.WorkItem(work_id="w1", source="cli", sides=SIDES, platforms=["a", "b"],
                         tests=[("builtin:quick/set-sadd.yml", "quick-set-sadd"), ("/s/t.yml", "t")],
                         topologies=["oss-standalone", "oss-standalone-04-io-threads"],
                         settings=work.Settings(runs=5, max_runs=9, duration_s=2.0))
    documents = item.job_documents()
    assert len(documents) == 8
    assert sorted({platform for platform, _ in documents}) == ["a", "b"]
    assert len({d["job_id"] for _, d in documents}) == 8 and all(d["job_id"].startswith("w1:") for _, d in documents)
    job = Job.from_json(documents[-1][1])
    assert job.sides == SIDES and job.settings["runs"] == 5 and job.max_runs == 9 and job.adaptive
    assert job.lone_p_value == work.FDR_Q / (8 * len(COMPARED_METRICS))
    summary = item.summary(8)
    assert summary["jobs_total"] == "8" and summary["comparison"] == "bin:/usr/bin/redis-server"


def test_signature_is_hmac_sha256_of_the_body():
    body, secret = b'{"a": 1}', b"s3cret"
    good = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    assert api.signature_ok(secret, body, good)
    assert not api.signature_ok(secret, body + b" ", good)
    assert not api.signature_ok(b"other", body, good)
    assert not api.signature_ok(secret, body, good.replace("sha256=", "sha1="))
    assert not api.signature_ok(secret, body, None)


def settings(**overrides) -> api.Settings:
    values = dict(secret=b"s", repository="/srv/redis", branches=None, label="bench", platforms=None, tests=[],
                  run_settings=work.Settings(), variant=None)
    return api.Settings(**{**values, **overrides})


def test_push_decisions():
    push = {"ref": "refs/heads/unstable", "before": "a" * 40, "after": "b" * 40,
            "repository": {"default_branch": "unstable"}}
    assert api.push_request(push, settings()) == ("push", f"git:/srv/redis@{'a' * 40}", f"git:/srv/redis@{'b' * 40}", "")
    assert "not to" in api.push_request(push, settings(branches=["7.2"]))
    assert "deleted" in api.push_request({**push, "after": api.ZERO_SHA, "deleted": True}, settings())
    assert "created" in api.push_request({**push, "before": api.ZERO_SHA}, settings())
    assert "not to" in api.push_request({**push, "ref": "refs/tags/unstable"}, settings())
