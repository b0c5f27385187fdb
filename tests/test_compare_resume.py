"""`redline compare --resume`: an interrupted compare goes on in a new session that measures only
what did not end (real servers, a real SIGTERM, the real store), judges every test, and refuses to
carry runs of another binary or to take suites and settings of its own."""

import json
import os
import shutil
import signal
import sqlite3
import subprocess

import pytest

from redline.analysis.comparison import COMPARED_METRICS
from redline.store.results import Store
from conftest import REDLINE, wait_for_store

TESTS = "quick-(hash-hset-100B|set-sadd|list-lpush-100B)$"     # run in this order (the quick suite's)
FIRST, SECOND, THIRD = "quick-hash-hset-100B", "quick-list-lpush-100B", "quick-set-sadd"


def two_binaries(tmp_path):
    """Two copies of the same redis-server: bin: targets whose sha256 the runs record."""
    source = shutil.which("redis-server")
    copies = []
    for name in ("redis-a", "redis-b"):
        copy = tmp_path / name
        shutil.copy(source, copy)
        copies.append(copy)
    return copies


def interrupt_during_the_second_test(tmp_path, db, baseline, comparison):
    """A compare of three tests, SIGTERM while the second one's runs are under way."""
    proc = subprocess.Popen([*REDLINE, "compare", "quick", "--name", TESTS, "--baseline", f"bin:{baseline}",
                             "--comparison", f"bin:{comparison}", "--runs", "2", "--max-runs", "2", "--duration", "1s",
                             "--warmup", "0s", "--store", str(db)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def second_running(check) -> bool:
        return check.execute("SELECT test FROM runs WHERE status='running'").fetchall() == [(SECOND,)]

    if not wait_for_store(db, second_running):
        proc.kill()
        pytest.fail("never saw the second test's run in progress")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130


def test_a_resumed_compare_measures_only_what_did_not_end_and_judges_every_test(tmp_path, redline_cli):
    db = tmp_path / "r.db"
    baseline, comparison = two_binaries(tmp_path)
    interrupt_during_the_second_test(tmp_path, db, baseline, comparison)
    first = sqlite3.connect(db).execute("SELECT test, status FROM runs WHERE session_id=1").fetchall()
    assert {test for test, _ in first} == {FIRST, SECOND} and ("quick-list-lpush-100B", "interrupted") in first
    # what was measured is shown, and how to go on: no verdicts (none were judged), on a narrow terminal too
    shown = subprocess.run([*REDLINE, "show", "1", "--store", str(db)], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "100"}, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "compare 1 was interrupted before its verdicts: `redline compare --resume 1`" in shown.stdout
    markdown = redline_cli("show", "1", "--store", db, "--format", "markdown", check_exit=0).stdout
    assert markdown.startswith("**redline**: No verdicts were stored for this session: it ended before compare")
    out = tmp_path / "resumed.json"
    proc = redline_cli("compare", "--resume", "latest", "--store", db, "--json", out, check_exit=0, timeout=600)
    assert "resuming compare 1: 1 of 3 tests ended there" in proc.stderr
    stored = sqlite3.connect(db)
    measured_again = stored.execute("SELECT DISTINCT test FROM runs WHERE session_id=2").fetchall()
    assert sorted(measured_again) == [(SECOND,), (THIRD,)]        # the interrupted one whole, the unreached one
    resume = json.loads(stored.execute("SELECT document FROM session_documents WHERE session_id=2 AND name='resume'")
                        .fetchone()[0])
    first_uids = {uid for (uid,) in stored.execute("SELECT uid FROM runs WHERE session_id=1 AND test=?", (FIRST,))}
    assert resume["resumes"] == 1 and set(resume["carried"]) == first_uids and len(first_uids) == 4
    assert resume["argv"][0] == "compare" and "--resume" not in resume["argv"]
    document = json.loads(out.read_text())
    assert {c["test"] for c in document["comparisons"]} == {FIRST, SECOND, THIRD}
    assert all(c["comparisons_in_session"] == 3 * len(COMPARED_METRICS)
               for c in document["comparisons"] if c["p_value"] is not None)
    assert len(document["runs"]) == 3 * 2 * 2 and {r["session_id"] for r in document["runs"]} == {1, 2}

    # a compare that ended has nothing left: resuming it measures nothing and judges the same tests
    proc = redline_cli("compare", "--resume", "2", "--store", db, "--json", out, check_exit=0)
    assert "resuming compare 2: 3 of 3 tests ended there" in proc.stderr
    assert stored.execute("SELECT count(*) FROM runs WHERE session_id=3").fetchone()[0] == 0
    assert {c["test"] for c in json.loads(out.read_text())["comparisons"]} == {FIRST, SECOND, THIRD}

    # the runs carried must be of the binaries the sides are now
    with open(baseline, "ab") as binary:
        binary.write(b"\0")
    proc = redline_cli("compare", "--resume", "latest", "--store", db, check_exit=2)
    assert f"the baseline bin:{baseline} is now" in proc.stderr and "not the binary session 2 measured" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_resume_takes_no_suites_or_settings_and_only_a_compare(tmp_path, redline_cli):
    db = tmp_path / "r.db"
    store = Store(db)
    session = store.begin_session(kind="run", argv=["redline", "run", "quick"], machine={})
    store.finish_session(session, "finished")
    store.close()
    proc = redline_cli("compare", "quick", "--duration", "2s", "--resume", "latest", "--store", db, check_exit=2)
    assert proc.stderr.strip() == ("redline: error: --resume continues the stored compare with its own suites, "
                                   "targets and settings; give no --duration, SUITE with it")
    proc = redline_cli("compare", "--resume", "latest", "--store", db, check_exit=2)
    assert proc.stderr.strip() == f"redline: error: --resume latest: {db} holds no compare session"
    proc = redline_cli("compare", "--resume", str(session), "--store", db, check_exit=2)
    assert f"session {session} of {db} is a run, not a compare" in proc.stderr
    proc = redline_cli("compare", "--resume", "latest", "--store", tmp_path / "none.db", check_exit=2)
    assert "none.db does not exist" in proc.stderr
    proc = redline_cli("compare", "--resume", "soon", "--store", db, check_exit=2)
    assert "SESSION must be a session number or 'latest'" in proc.stderr


def test_a_side_built_again_from_the_same_build_carries_its_runs_and_another_build_does_not(tmp_path, capsys):
    # a resumed compare on a fresh machine builds git: targets again; Redis writes the host and the
    # time into every build (mkreleasehdr.sh), so the executable's sha256 differs, not the build
    from redline.core.errors import UsageError
    from redline.core.run import Run
    from redline.engine.run_plan import Side
    from redline.lab.compare_resume import _check_same_binaries
    from redline.server.identity import binary_digest
    from redline.server.targets import Target
    [rebuilt, _] = two_binaries(tmp_path)
    with open(rebuilt, "ab") as binary:
        binary.write(b"built elsewhere")

    def carried(cache_key: str) -> list[Run]:
        return [Run(test="t", target="git:repo@7.0.5", side="baseline", run_index=i, status="ok",
                    facts={"identity": {"binary_sha256": "9cf946926be3" + "0" * 52}, "build": {"cache_key": cache_key}})
                for i in range(3)]

    side = Side(Target("git:repo@7.0.5", binary=rebuilt, build_facts={"cache_key": "git-1571907ea020-default-2d84"}),
                "baseline")
    _check_same_binaries(carried("git-1571907ea020-default-2d84"), [side], 4)
    said = capsys.readouterr().err
    assert f"the baseline git:repo@7.0.5 was built again (sha256 {binary_digest(rebuilt)[:12]}; session 4 measured " \
           "9cf946926be3)" in " ".join(said.split())
    with pytest.raises(UsageError, match="not the binary session 4 measured .9cf946926be3."):
        _check_same_binaries(carried("git-1571907ea020-O3-lto-77aa"), [side], 4)     # another variant
    bare = Side(Target("bin:elsewhere", binary=rebuilt), "baseline")                  # nothing built: sha256 only
    with pytest.raises(UsageError, match="a resumed compare must measure the same binaries"):
        _check_same_binaries(carried("git-1571907ea020-default-2d84"), [bare], 4)
