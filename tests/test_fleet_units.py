"""The fleet's pure parts: the key table and its documentation, a work item's jobs, the webhook's
signature check and decisions."""

from __future__ import annotations

import hashlib
import json
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
    assert api.push_request(push, settings()) == ("push", f"git:/srv/redis@{'a' * 40}", f"git:/srv/redis@{'b' * 40}", "",
                                                 "unstable")
    assert "not to" in api.push_request(push, settings(branches=["7.2"]))
    # a branch name outside the work hash's form is benchmarked without a history, never a malformed work item
    assert api.push_request({**push, "ref": "refs/heads/a..b"}, settings(branches=["a..b"]))[4] == ""
    assert "deleted" in api.push_request({**push, "after": api.ZERO_SHA, "deleted": True}, settings())
    assert "created" in api.push_request({**push, "before": api.ZERO_SHA}, settings())
    assert "not to" in api.push_request({**push, "ref": "refs/tags/unstable"}, settings())


def test_one_redaction_hides_every_password_and_token():
    from redline.core.redaction import redact, redact_argv
    assert redact("redis://:pw@h:1/0") == "redis://:***@h:1/0"
    assert redact("error at rediss://user:p@ss@h/0, again") == "error at rediss://user:***@h/0, again"
    assert redact("redis://h:1/0?db=1&password=pw") == "redis://h:1/0?db=1&password=***"
    assert redact("https://x-access-token:T0KEN@github.com/o/r") == "https://x-access-token:***@github.com/o/r"
    for kept in ("redis://127.0.0.1:6379/0", "git:/srv/redis@HEAD", "redis://user@h:1", "bin:/usr/bin/redis-server"):
        assert redact(kept) == kept
    assert redact_argv(["run", "--export", "redis://:pw@h", "--requirepass", "pw", "--token=t", "-a", "x"]) == [
        "run", "--export", "redis://:***@h", "--requirepass", "***", "--token=***", "-a", "***"]


def test_the_allow_list_decides_what_a_job_may_name(tmp_path):
    from redline.core.errors import UsageError
    from redline.fleet.policy import Refused, TargetPolicy, allowance
    import pytest
    (tmp_path / "repos" / "redis").mkdir(parents=True)
    (tmp_path / "repos" / "escape").symlink_to(tmp_path)            # a link inside the allowed directory, out of it
    policy = TargetPolicy([allowance("bin:/usr/bin/redis-server"), allowance(f"git:{tmp_path}/repos"),
                           allowance("tcp://127.0.0.1:6379"), allowance(f"suite:{tmp_path}/suites")])

    def job(target, *, config=(), variant=None, suite="builtin:quick/set-sadd.yml"):
        return Job(suite=suite, test="t", sides=[SideSpec("baseline", target, tuple(config), variant)])
    for allowed in ("bin:/usr/bin/redis-server", f"git:{tmp_path}/repos/redis@HEAD", f"git:{tmp_path}/repos",
                    "tcp://127.0.0.1:6379"):
        policy.check(job(allowed))
    policy.check(job("bin:/usr/bin/redis-server", suite=f"{tmp_path}/suites/a.yml"))
    refused = {f"git:{tmp_path}@HEAD": "is not allowed", "bin:/bin/sh": "is not allowed", "tcp://10.0.0.1:6379": "is not allowed",
               f"git:{tmp_path}/repos/../elsewhere@x": "is not allowed", "src:/tmp": "is not allowed",
               f"git:{tmp_path}/repos/escape@x": "is not allowed"}
    for target, why in refused.items():
        with pytest.raises(Refused, match=why):
            policy.check(job(target))
    with pytest.raises(Refused, match="loads code"):
        policy.check(job("bin:/usr/bin/redis-server", config=[("LoadModule", "/x.so")]))
    with pytest.raises(Refused, match="redline sets this parameter itself"):
        policy.check(job("bin:/usr/bin/redis-server", config=[("dir", "/etc")]))
    with pytest.raises(Refused, match="is a file"):
        policy.check(job("bin:/usr/bin/redis-server", variant="/tmp/cc.yml"))
    for suite in ("builtin:../../etc/passwd", "/etc/passwd", f"{tmp_path}/suites/../x.yml"):
        with pytest.raises(Refused, match="suite"):
            policy.check(job("bin:/usr/bin/redis-server", suite=suite))
    with pytest.raises(UsageError, match="needs an absolute path"):
        allowance("git:relative/dir")


def test_a_job_document_is_checked_field_by_field():
    import json
    import pytest
    from redline.fleet import entries
    item = work.WorkItem(work_id="w1", source="cli", sides=SIDES, platforms=["a"],
                         tests=[("builtin:quick/set-sadd.yml", "quick-set-sadd")], topologies=["oss-standalone"],
                         settings=work.Settings(runs=5, max_runs=9, duration_s=2.0))
    (_, document), = item.job_documents()
    fields = {"job_id": document["job_id"], "work_id": "w1", "attempt": "1", "job": json.dumps(document)}
    assert entries.job_entry(fields).job == Job.from_json(document)
    broken = {"attempt": ({**fields, "attempt": "0"}, "attempt: 0 is outside 1..1000"),
              "runs": ({**fields, "job": json.dumps({**document, "settings": {"runs": True}})},
                       "job.settings.runs: expected a whole number, got bool"),
              "judged": ({**fields, "job": json.dumps({**document, "settings": {"system_calls_judged": "yes"}})},
                         "job.settings.system_calls_judged: expected true or false"),
              "max_runs": ({**fields, "job": json.dumps({**document, "max_runs": 2})}, "job.max_runs: 2 is outside 5..1000"),
              "extra": ({**fields, "job": json.dumps({**document, "shell": "rm"})}, "job: unknown field(s) shell"),
              "config": ({**fields, "job": json.dumps({**document, "sides": [{"target": "bin:x", "config": {"a": 1}}]})},
                         "job.sides[0].config.a: expected text, got int")}
    for name, (entry, reason) in broken.items():
        with pytest.raises(entries.Malformed) as raised:
            entries.job_entry(entry)
        assert str(raised.value) == reason, name


# -- a profiled run's stacks across the fleet (redline.fleet.profiles, entries.profile_document) ------
def profiled_run_document(stacks: list, **profile) -> dict:
    from redline.core.run import Run
    run = Run(test="t", target="git:/r@a", side="baseline", run_index=5, purpose="profile", status="ok")
    return {**run.to_json(), "profile": {"folded_path": "/agent/x.folded.gz", "samples": 10, "event": "cycles",
                                         "stacks": stacks, "stacks_merged": 0, **profile}}


def test_an_agent_ships_bounded_printable_stacks_that_the_collector_accepts(tmp_path):
    from redline.core.run import Run
    from redline.fleet import entries, profiles
    from redline.profile.folding import OTHER, read_folded, write_folded
    bounds = entries.PROFILE_BOUNDS
    stacks = {f"main;f{n}": 3000 - n for n in range(3000)}                 # more stacks than may travel
    stacks["main;evil\x1b[31m\u202e;leaf"] = 5000                          # control and bidi characters
    stacks["main;" + "x" * 1000] = 4000                                    # a frame too long
    stacks[";".join(f"d{n}" for n in range(400))] = 4500                   # a stack too deep
    folded = write_folded(stacks, tmp_path / "p.folded.gz")
    run = Run(test="t", target="git:/r@a", side="baseline", run_index=5, purpose="profile", status="ok",
              profile={"folded_path": str(folded), "svg_path": "/agent/f.svg", "samples": sum(stacks.values())})
    document = json.loads(json.dumps(profiles.shipped(run)))
    shipped = dict(map(tuple, document["profile"]["stacks"]))
    assert len(shipped) == bounds.stacks and OTHER in shipped
    assert document["profile"]["stacks_merged"] == len(stacks) - (bounds.stacks - 1)
    assert sum(shipped.values()) == sum(stacks.values())                  # the tail merged, not lost
    assert shipped["main;evil?[31m?;leaf"] == 5000                         # made printable
    assert shipped["main;" + "x" * bounds.frame_chars] == 4000
    deep = next(stack for stack in shipped if stack.startswith("d"))
    assert deep.split(";") == [f"d{n}" for n in range(400 - bounds.frames, 400)]   # the leaf's side kept
    checked = entries.run_document(document, "runs[0]")
    assert checked.profile["stacks"] == shipped and checked.profile["samples"] == sum(stacks.values())
    # the collector keeps them as the run's folded file next to its store; the agent's paths are gone
    from redline.store.results import Store
    store = Store(tmp_path / "collector.db")
    kept = profiles.kept(checked, store).profile
    assert kept["folded_path"].startswith(str(store.artifacts("fleet-profiles")))
    assert read_folded(kept["folded_path"]) == shipped and "/agent/" not in json.dumps(kept)
    # a measured run's profile field is never kept; a profile without stacks (an older agent) is none
    measured = {**document, "purpose": "measure"}
    assert entries.run_document(measured, "runs[0]").profile is None
    older = {**document, "profile": {"folded_path": "/agent/x", "samples": 3}}
    assert entries.run_document(older, "runs[0]").profile is None


def test_a_malformed_shipped_profile_is_a_malformed_result():
    import pytest
    from redline.fleet import entries
    bounds = entries.PROFILE_BOUNDS
    too_many = [[f"main;f{n}", 1] for n in range(bounds.stacks + 1)]
    too_much_text = [[f"{n};" + "y" * 250 + ";" + "z" * 250, 1] for n in range(bounds.text_bytes // 500 + 1)]
    broken = {
        "too many stacks": (too_many, f"expected a list of at most {bounds.stacks}"),
        "too much text": (too_much_text, f"more than {bounds.text_bytes} bytes of stack text"),
        "long frame": ([["main;" + "x" * (bounds.frame_chars + 1), 1]], "empty or longer than"),
        "deep stack": ([[";".join(["f"] * (bounds.frames + 1)), 1]], f"more than {bounds.frames} frames"),
        "empty frame": ([["main;;leaf", 1]], "empty or longer than"),
        "escape": ([["main;\x1b[2Jleaf", 1]], "control or unprintable character"),
        "newline": ([["main;a\nb", 1]], "control or unprintable character"),
        "bidi": ([["main;\u202eleaf", 1]], "control or unprintable character"),
        "negative count": ([["main;f", -1]], "outside 1.."),
        "zero count": ([["main;f", 0]], "outside 1.."),
        "text count": ([["main;f", "12"]], "its count is not a whole number"),
        "boolean count": ([["main;f", True]], "its count is not a whole number"),
        "float count": ([["main;f", 1.5]], "its count is not a whole number"),
        "twice": ([["main;f", 1], ["main;f", 2]], "listed twice"),
        "not a pair": ([["main;f"]], "expected a [stack, count] pair"),
        "not text": ([[7, 1]], "expected text"),
        "not a list": ("main;f 1", "expected a list"),
    }
    for name, (stacks, reason) in broken.items():
        with pytest.raises(entries.Malformed, match=reason.replace("[", r"\[").replace("]", r"\]")) as raised:
            entries.run_documents(json.dumps([profiled_run_document(stacks)]))
        assert str(raised.value).startswith("runs[0].profile.stacks"), (name, raised.value)
    for profile, reason in (({"samples": -1}, "samples: -1 is outside"), ({"stacks_merged": "many"}, "not a whole"),
                            ({"event": "cycles\x07"}, "control or unprintable")):
        with pytest.raises(entries.Malformed, match=reason):
            entries.run_documents(json.dumps([profiled_run_document([["main;f", 1]], **profile)]))
    with pytest.raises(entries.Malformed, match="profile: expected an object"):
        entries.run_documents(json.dumps([{**profiled_run_document([]), "profile": ["x"]}]))
