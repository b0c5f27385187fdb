"""`redline bisect` for real: a 16-commit repository made from Debian's redis source
(scripts/make_redis_bisect_repo.sh: commit 12 adds work to GET's code path, commit 8 does not
build), real builds (libc-malloc, through ccache), real redis-server, real interleaved runs.

Cost: one bisection (7 builds, one of them cold; about 6 compares of 5-7 runs of 1 s per side,
the last one profiled) and one endpoint check on commits that bisection built; 5-7 minutes
on 2 cores. Both build into redline's default build cache, as a user's bisection would: the
fixture's commits have fixed dates, so their shas, and the builds of them, are the same in every
module that makes the repository, and tests/test_fleet_loop_real.py's fleet (which builds there
too) finds them built. The decision logic itself is tested fast in tests/test_bisect_search.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from redline.builder.cache import BuildCache
from redline.store.results import Store

REPO = Path(__file__).resolve().parent.parent
TESTS = "string-(get|set)-100B-pipeline-10$"
GET, SET = "quick-string-get-100B-pipeline-10", "quick-string-set-100B-pipeline-10"
# GET's extra work: about 5x its server CPU per op (5,000 iterations doubled it), so that the
# half-way point of a step (about +120%) lies far outside the intervals of 5 noisy 1 s runs.
SPIN = 20000
# The smallest measurement that still decides.
MEASURE = ["--variant", "libc-malloc", "--runs", "5", "--max-runs", "7", "--duration", "1s", "--warmup", "0.5s"]


@pytest.fixture(scope="module")
def bisect_repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    tree = subprocess.run(["bash", str(REPO / "scripts" / "redis_source.sh")], capture_output=True, text=True,
                          timeout=600, check=True).stdout.strip().splitlines()[-1]
    dest = tmp_path_factory.mktemp("bisect") / "redis"
    proc = subprocess.run(["bash", str(REPO / "scripts" / "make_redis_bisect_repo.sh"), tree, str(dest), str(SPIN)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tags = {tag: subprocess.run(["git", "-C", str(dest), "rev-parse", tag], capture_output=True, text=True,
                                check=True).stdout.strip() for tag in ("good", "bad", "culprit", "broken")}
    return dest, tags


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bisect-work")


def _bisect(workdir: Path, *arguments: str, store: str = "r.db") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "redline.cli", "bisect", *arguments, "--store", str(workdir / store)],
                          capture_output=True, text=True, timeout=1200, env=env, cwd=workdir)


@pytest.fixture(scope="module")
def bisection(bisect_repo, workdir):
    repo, tags = bisect_repo
    out = workdir / "bisect.json"
    proc = _bisect(workdir, f"git:{repo}", "--good", "good", "--bad", "bad", "--name", TESTS, *MEASURE, "--profile",
                   "--json", str(out), "--markdown", str(workdir / "bisect.md"))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, json.loads(out.read_text())


def test_bisect_names_the_commit_that_slowed_get(bisection, bisect_repo, workdir):
    proc, doc = bisection
    _, tags = bisect_repo
    assert doc["culprit"]["sha"] == tags["culprit"], doc["steps"]
    assert doc["culprit"]["subject"] == f"fixture: {SPIN} iterations of extra work on GET's code path"
    assert f"culprit: {tags['culprit'][:12]}" in proc.stdout
    # Only GET moved between the ends and only GET was followed; SET shows no regression.
    assert list(doc["endpoints"]["moved"]) == [GET] and doc["endpoints"]["moved"][GET] > 2
    assert doc["endpoints"]["changes"][SET]["verdict"] not in ("regression", "improvement")
    assert all(set(step["changes"]) <= {GET} for step in doc["steps"])
    # Each measured step decided, against a decided end, and the last good commit before the
    # culprit against the culprit explains the change.
    for step in doc["steps"]:
        if step["outcome"] in ("good", "bad"):
            assert step["reference_state"] in ("good", "bad") and step["changes"][GET]["runs"] >= 5
    remainder = doc["remainder"]["changes"][GET]
    assert remainder["delta_pct"] > 30 and doc["remainder"]["explained"][GET] > 0.5
    # --profile: the remainder check was profiled; the symbol that took the extra work moved most
    assert remainder["moved_symbols"][0]["symbol"] == "getGenericCommand", remainder["moved_symbols"]
    assert Path(workdir, remainder["diff_flamegraph"]).is_file()
    assert "moved: getGenericCommand" in proc.stdout
    assert "commits left" in proc.stderr and "about" in proc.stderr     # progress: range and estimated steps


def test_a_commit_that_does_not_build_is_skipped(bisection, bisect_repo):
    proc, doc = bisection
    _, tags = bisect_repo
    skipped = [step for step in doc["steps"] if step["outcome"] == "skipped"]
    assert [step["candidate"]["sha"] for step in skipped] == [tags["broken"]]
    assert "does not build" in skipped[0]["note"] and "#error" in skipped[0]["note"]
    assert doc["culprit"]["sha"] == tags["culprit"]


def test_the_bisection_is_stored_as_a_session(bisection, workdir):
    proc, doc = bisection
    store = Store(workdir / "r.db")
    assert store.session_document(doc["session"], "bisection") == doc
    db = sqlite3.connect(workdir / "r.db")
    kind, status = db.execute("SELECT kind, status FROM sessions WHERE id=?", (doc["session"],)).fetchone()
    assert (kind, status) == ("bisect", "finished")
    stored_runs = {row[0] for row in db.execute("SELECT id FROM runs WHERE session_id=? AND status='ok'",
                                               (doc["session"],))}
    step_runs = {run for step in doc["steps"] for change in step["changes"].values() for run in change["run_ids"]}
    assert step_runs and step_runs <= stored_runs
    markdown = (workdir / "bisect.md").read_text()
    assert f"culprit: {doc['culprit']['sha'][:12]}" in markdown and "| step | commit |" in markdown


def test_no_change_between_the_ends_stops_after_the_endpoint_check(bisection, bisect_repo, workdir):
    """`good` and commit 7 differ in no code: the endpoint check finds no change and stops. Both
    were built by the bisection above (build cache hits). Counted, not timed: an A/A by time may
    draw a false verdict now and then (5% is the test's level, more beside a busy neighbour, as
    it did once here), while two builds of the same code count the same instructions."""
    repo, tags = bisect_repo
    out = workdir / "nochange.json"
    proc = _bisect(workdir, f"git:{repo}", "--good", "good", "--bad", "broken~1", "--name", "string-get-100B-pipeline-10$",
                   "--variant", "libc-malloc", "--measure", "instructions", "--window-instructions", "30000000",
                   "--json", str(out), store="nochange.db")
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert "no change to bisect" in proc.stdout
    assert doc["no_change"] and doc["steps"] == [] and doc["culprit"] is None
    assert doc["endpoints"]["changes"][GET]["min_detectable_pct"] is not None
    assert "cache hit" in proc.stderr and " built " not in proc.stderr


@pytest.mark.parametrize("arguments, message", [
    (["bin:/usr/bin/redis-server", "--good", "a", "--bad", "b"], "bisect needs a git:REPO target"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--metric", "used_memory_bytes"], "bisect decides on a compared metric"),
    (["git:{repo}", "--good", "bad", "--bad", "good"], "is not an ancestor of --bad"),
    (["git:{repo}", "--good", "nope", "--bad", "bad"], "git ref 'nope' does not name a commit"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--json", "{store}"], "is the result store"),
    (["git:{repo}@bad", "--good", "good", "--bad", "bad"], "give the repository without @REF"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--metric", "instructions_per_op"],
     "--metric instructions_per_op is counted under callgrind: add --measure instructions"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--measure", "instructions", "--metric", "server_cpu_us_per_op"],
     "--metric server_cpu_us_per_op is a timed metric"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--measure", "instructions", "--max-runs", "5"],
     "--max-runs does not apply to --measure instructions"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--measure", "instructions", "--runs", "1"],
     "endpoint check needs at least 2 runs per side"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--store", "{repo}"], "is a directory, not a store file"),
    (["git:{repo}", "--good", "good", "--bad", "bad", "--variant", "nope"], "unknown build variant 'nope'"),
])
def test_bad_input_is_one_line_before_anything_runs(bisect_repo, tmp_path, arguments, message):
    repo, _ = bisect_repo
    store = tmp_path / "r.db"
    arguments = [a.format(repo=repo, store=store) for a in arguments]
    env = {**os.environ, "REDLINE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    if "--store" not in arguments:
        arguments += ["--store", str(store)]
    proc = subprocess.run([sys.executable, "-m", "redline.cli", "bisect", *arguments],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not store.exists() and not (tmp_path / "cache").exists()


def test_the_builds_went_through_ccache_with_unchanged_records(bisection, bisect_repo):
    """setup.sh installs ccache; each build of a fixture commit ran `CC=ccache cc`, recorded `CC=cc`
    (the variant's), and nearby commits took most objects from ccache (the statistics of the object
    cache they used: builds/.ccache, or the one $REDLINE_CCACHE_DIR names, shared by the session's
    builds)."""
    assert shutil.which("ccache"), "setup.sh installs ccache"
    repo, _ = bisect_repo
    shas = subprocess.run(["git", "-C", str(repo), "rev-list", "bad"], capture_output=True, text=True,
                          check=True).stdout.split()
    builds = BuildCache.default().root
    entries = [entry for sha in shas for entry in builds.glob(f"git-{sha[:12]}-*") if (entry / "build.json").is_file()]
    assert len(entries) >= 5, sorted(p.name for p in builds.iterdir())
    for entry in entries:
        assert "CC=cc" in json.loads((entry / "build.json").read_text())["make_command"]
        assert " CC=ccache cc " in (entry / "build.log").read_text().splitlines()[0]
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, check=True,
                           env={**os.environ, "CCACHE_DIR": str(BuildCache.default().ccache_dir)}).stdout
    counts = dict(line.split("\t", 1) for line in stats.splitlines() if "\t" in line)
    hits, misses = int(counts["direct_cache_hit"]) + int(counts["preprocessed_cache_hit"]), int(counts["cache_miss"])
    assert hits > misses, stats


def test_the_html_report_shows_the_bisection(bisection, workdir):
    _, doc = bisection
    out = workdir / "bisect.html"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "redline.cli", "report", str(doc["session"]), "-o", str(out),
                           "--store", str(workdir / "r.db")], capture_output=True, text=True, timeout=300, env=env,
                          cwd=workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = out.read_text()
    assert '<section id="bisection"><h2>Bisection</h2>' in page
    assert f"culprit: {doc['culprit']['sha'][:12]}" in page
    assert "does not build" in page and "#error" in page           # the skipped step's log tail
    assert page.count("<tr>") >= 1 + len(doc["steps"])
    assert 'class="flame"' in page and "culprit against" in page   # the remainder's differential flame graph


def test_a_counted_bisection_measures_each_commit_once(bisect_repo, workdir):
    """--measure instructions: the endpoints by 3 interleaved counted runs per side, then one run
    of each step's commit against the counts already taken, with the endpoints' request count.
    (The builds are cache hits of the bisection above when it ran first.) A 10M-instruction
    window keeps it short; GET's step (about 30x) is far above the 8.2% one run needs."""
    repo, tags = bisect_repo
    out = workdir / "counted.json"
    proc = _bisect(workdir, f"git:{repo}", "--good", "good", "--bad", "bad", "--name", "string-get-100B-pipeline-10$",
                   "--variant", "libc-malloc", "--measure", "instructions", "--window-instructions", "10000000",
                   "--json", str(out), "--markdown", str(workdir / "counted.md"), store="counted.db")
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc = json.loads(out.read_text())
    assert doc["measure"] == "instructions" and doc["metric"] == "instructions_per_op"
    assert doc["culprit"]["sha"] == tags["culprit"], doc["steps"]
    assert doc["endpoints"]["moved"][GET] > 10
    endpoint = doc["endpoints"]["changes"][GET]
    assert endpoint["verdict"] == "regression" and endpoint["step_tolerance_pct"] == pytest.approx(2.0)
    measured = [step for step in doc["steps"] if step["outcome"] in ("good", "bad")]
    assert [step["candidate"]["sha"] for step in doc["steps"] if step["outcome"] == "skipped"] == [tags["broken"]]
    assert measured and all(step["changes"][GET]["runs"] == 1 for step in measured)
    # every commit counted once: 3 + 3 endpoint runs, one run per measured step, and the
    # remainder check (unprofiled) reuses them
    db = sqlite3.connect(workdir / "counted.db")
    runs = db.execute("SELECT target, side, json_extract(facts, '$.instructions.requests') FROM runs "
                      "WHERE session_id=? AND status='ok' AND purpose='measure'", (doc["session"],)).fetchall()
    assert len(runs) == 6 + len(measured), runs
    step_targets = [target for target, side, _ in runs if side is None]
    assert len(step_targets) == len(set(step_targets)) == len(measured)
    assert len({requests for _, _, requests in runs}) == 1          # the endpoints' request count throughout
    assert "one run per commit" in proc.stderr and "counted under callgrind" in proc.stdout
    assert "counted under callgrind" in (workdir / "counted.md").read_text()
