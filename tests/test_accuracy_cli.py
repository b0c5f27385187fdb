"""`redline accuracy` end to end on one small entry: the fixture repository the bisect tests use
(scripts/make_redis_bisect_repo.sh: Debian's redis source, 16 commits, commit 12 adds work to GET's
code path), an entry naming commit 12 and its parent as a regression of the quick suite's GET,
both commits built for real (libc-malloc, through ccache: at most one cold build, the rest
cache hits; the test session shares one object cache, $REDLINE_CCACHE_DIR), counted under
callgrind (2 runs per side, 30M-instruction windows), scored, written as a table; then run again:
it resumes, measuring nothing.

Cost: at most one cold build of Debian's redis and one nearly cached one, 4 counted runs of GET; about
2-4 minutes on 2 cores. The fast parts (schema, scoring, resume) are tests/test_accuracy.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accuracy_helpers import entry, write_corpus
from redline.accuracy.runner import DOCUMENT
from redline.builder.cache import BuildCache
from redline.store.results import Store

REPO = Path(__file__).resolve().parent.parent
GET = "quick-string-get-100B-pipeline-10"
MEASURE = ["--measure", "counted", "--counted-runs", "2", "--window-instructions", "30000000"]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    tree = subprocess.run(["bash", str(REPO / "scripts" / "redis_source.sh")], capture_output=True, text=True,
                          timeout=600, check=True).stdout.strip().splitlines()[-1]
    work = tmp_path_factory.mktemp("accuracy")
    repo = work / "redis"
    subprocess.run(["bash", str(REPO / "scripts" / "make_redis_bisect_repo.sh"), tree, str(repo)], check=True,
                   capture_output=True, text=True, timeout=300)
    culprit, parent = (subprocess.run(["git", "-C", str(repo), "rev-parse", ref], capture_output=True, text=True,
                                      check=True).stdout.strip() for ref in ("culprit", "culprit^"))
    catalogue = work / "catalogue"
    catalogue.mkdir()
    shutil.copy(REPO / "redline" / "suites" / "quick" / "string-get-100B-pipeline-10.yml", catalogue / f"{GET}.yml")
    corpus = write_corpus(work / "corpus.yaml", [entry(
        "fixture-get-extra-work", kind="regression", rule="2", commit=culprit, parent=parent, suites=[GET],
        claim="5000 iterations of busy work at the start of getGenericCommand (scripts/make_redis_bisect_repo.sh)",
        variant="libc-malloc",       # Debian's tree links only against the system's jemalloc (docs/build.md)
        expected={"sign": "slower", "metric": "cpu_per_op", "claimed": 0.05, "ratio": [0.01, 0.5]})])
    page = work / "accuracy.md"
    page.write_text("# Accuracy\n\n<!-- accuracy-table:begin -->\n<!-- accuracy-table:end -->\n\nafter\n")

    def accuracy(*more: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "REDLINE_CACHE": str(work / "cache"), "PYTHONPATH": str(REPO), "COLUMNS": "250"}
        return subprocess.run([sys.executable, "-m", "redline.cli", "accuracy", str(corpus), "--repository", str(repo),
                               "--catalogue", str(catalogue), "--store", str(work / "a.db"), *MEASURE, *more],
                              capture_output=True, text=True, timeout=1800, env=env, cwd=work)

    first = accuracy("--markdown", str(page))
    assert first.returncode == 0, first.stderr[-4000:]
    return work, (culprit, parent), accuracy, first, page


def test_one_entry_is_built_compared_and_scored(fixture):
    work, (culprit, parent), _, proc, page = fixture
    line = next(line for line in proc.stdout.splitlines() if "fixture-get-extra-work" in line)
    assert line.startswith("✓ fixture-get-extra-work (regression, counted): +") and "regression right band within" in line
    store = Store(work / "a.db")
    [(session, document)] = store.documents_named(DOCUMENT)
    assert document["status"] == "measured" and document["metric"] == "instructions_per_op_command"
    assert document["variant"] == "libc-malloc" and document["kind"] == "counted"
    result = document["tests"][GET]
    assert result["verdict"] == "regression" and result["ci_low_pct"] > 100, result   # GET costs several times more
    stored = store.load_session(session)
    assert stored.kind == "compare" and stored.status == "finished"
    assert {(r.side, r.target) for r in stored.measured} == {("baseline", f"git:{work / 'redis'}@{parent}"),
                                                             ("comparison", f"git:{work / 'redis'}@{culprit}")}
    assert all(r.status == "ok" and "instructions_per_op_command" in r.metrics for r in stored.measured)


def test_the_second_build_came_mostly_from_ccache(fixture):
    work, *_ = fixture
    builds = [b for b in (work / "cache" / "builds").glob("git-*") if (b / "build.json").is_file()]
    assert len(builds) == 2
    assert all(" CC=ccache cc " in (b / "build.log").read_text().splitlines()[0] for b in builds)
    stats = subprocess.run(["ccache", "--print-stats"], capture_output=True, text=True, check=True,
                           env={**os.environ, "CCACHE_DIR": str(BuildCache(work / "cache" / "builds").ccache_dir)}).stdout
    counts = dict(line.split("\t", 1) for line in stats.splitlines() if "\t" in line)
    hits = int(counts["direct_cache_hit"]) + int(counts["preprocessed_cache_hit"])
    assert hits > 0.4 * int(counts["cache_miss"]), stats     # the second tree differs from the first in one file


def test_the_table_is_written_into_the_page(fixture):
    *_, page = fixture
    text = page.read_text()
    assert text.startswith("# Accuracy") and text.endswith("after\n")
    assert "| fixture-get-extra-work | regression | counted |" in text
    assert "| improvements and regressions, strong | 1 | 1/1 (100%) | 0 | 0 | 1/1 (100%) | 0 |" in text
    assert "≥90% found with the right sign: met (100%)" in text
    assert "Reproduce (resumes where the store stopped): `redline accuracy" in text and "Machine: " in text


def test_a_second_run_resumes_without_measuring(fixture):
    work, _, accuracy, _, _ = fixture
    sessions = len(Store(work / "a.db").documents_named(DOCUMENT))
    proc = accuracy()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "fixture-get-extra-work (counted): measured before (session" in proc.stderr
    assert " built " not in proc.stderr and "build " not in proc.stderr
    assert len(Store(work / "a.db").documents_named(DOCUMENT)) == sessions
