"""The store is sacred: redline recognises its own stores, refuses everything else without
writing to it, names the file and the problem in one line, and loses nothing already stored.
Real SQLite files, real redline processes, real tmpfs mounts for full and read-only disks."""

import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import REDLINE
from redline.core.run import Run
from redline.store.results import APPLICATION_ID, SCHEMA_VERSION, NotAStore, Store, StoreError
from test_run_cli import write_suite

ENV_TIMEOUT_1 = {**os.environ, "REDLINE_STORE_BUSY_TIMEOUT": "1", "COLUMNS": "200"}
QUICK_RUN = ("run", "quick", "--name", "string-set-100B-pipeline-10$", "--duration", "1s", "--warmup", "0s")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_error_line(proc, code: int) -> str:
    """The command failed with `code` and said why in exactly one line, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("redline: error:")]
    assert len(lines) == 1, proc.stderr
    if code == 2:       # refused before anything started: that line alone (no plan, no progress)
        assert proc.stderr.splitlines() == lines, proc.stderr
    return lines[0]


def stored_run(store: Store, test: str, status: str = "ok") -> int:
    session = store.begin_session(kind="run", argv=[], machine={})
    run = Run(test=test, target="x", side=None, run_index=0, session_id=session)
    store.run_started(run)
    if status != "running":
        run.metrics = {"ops_per_sec": 7.0}
        run.finish(status)
        store.run_finished(run)
    store.finish_session(session, "finished")
    return run.run_id


@contextmanager
def tmpfs(where: Path, size: str):
    """A real size-limited tmpfs at `where` (needs root; skipped otherwise)."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


# -- what is not a redline store is refused, untouched ----------------------------------------------
def test_another_programs_sqlite_file_is_refused_without_a_single_write(tmp_path, redline_cli):
    foreign = tmp_path / "app.db"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE accounts(id INTEGER PRIMARY KEY, balance REAL)")
    db.execute("INSERT INTO accounts VALUES (1, 100.0)")
    db.commit()
    db.close()
    before = digest(foreign)
    line = one_error_line(redline_cli(*QUICK_RUN, "--store", foreign), 2)
    assert line == (f"redline: error: store {foreign}: is another program's SQLite database "
                    "(application_id 0x0, no redline tables); left untouched")
    assert digest(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]      # no -wal, no -shm


@pytest.mark.parametrize("kind, problem", [
    ("text", "is not an SQLite database, so not a redline store; left untouched"),
    ("directory", "is a directory, not a store file"),
    ("device", "is not a regular file (a device, FIFO or socket)"),
])
def test_a_path_that_cannot_be_a_store_is_one_line_exit_2(tmp_path, redline_cli, kind, problem):
    path = {"text": tmp_path / "notes.txt", "directory": tmp_path / "adir", "device": Path("/dev/null")}[kind]
    if kind == "text":
        path.write_text("my notes, not a database\n")
    elif kind == "directory":
        path.mkdir()
    line = one_error_line(redline_cli(*QUICK_RUN, "--store", path), 2)
    assert line == f"redline: error: store {path}: {problem}"
    if kind == "text":
        assert path.read_text() == "my notes, not a database\n"


_OPENS_AT_THE_STORE_PATH = """
import os, sys
from pathlib import Path
from redline.store.results import inspect_store_file
store = Path(sys.argv[1])
opened = []
def watch(event, args):
    if event == "open" and args and str(args[0]) == str(store):
        opened.append(event)
sys.addaudithook(watch)
print(inspect_store_file(store), len(opened), store.exists())
"""


def test_checking_a_new_store_path_never_creates_a_file_there(tmp_path):
    # a probe file at the store's path (created, then deleted) was, while it lived, an empty store to
    # another redline process opening the same default redline.db: it saw the file, then stat() failed
    # with a traceback (CI, stop 53, two refused command lines side by side in one directory)
    store = tmp_path / "redline.db"
    checked = subprocess.run([sys.executable, "-c", _OPENS_AT_THE_STORE_PATH, str(store)],
                             capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent,
                             timeout=120)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.split() == ["False", "0", "False"]     # a new store; nothing opened there
    assert list(tmp_path.iterdir()) == []                         # and no probe left beside it


def test_an_empty_store_path_is_a_usage_error(redline_cli):
    line = one_error_line(redline_cli("history", "--store", ""), 2)
    assert "an empty path is not a store file" in line


def test_a_store_from_a_newer_redline_is_refused_untouched(tmp_path, redline_cli):
    path = tmp_path / "r.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    db.close()
    before = digest(path)
    for command in (("history",), QUICK_RUN):       # run: by the file's header, before anything starts
        line = one_error_line(redline_cli(*command, "--store", path), 2)
        assert line == (f"redline: error: store {path}: was written by a newer redline "
                        f"(schema {SCHEMA_VERSION + 1}; this redline reads up to {SCHEMA_VERSION})")
        assert digest(path) == before


def test_a_new_store_is_stamped_and_an_unstamped_old_one_is_recognised_by_its_tables(tmp_path):
    path = tmp_path / "r.db"
    run = stored_run(Store(path), "kept")
    header = path.read_bytes()[:100]
    assert int.from_bytes(header[68:72], "big") == APPLICATION_ID
    db = sqlite3.connect(path)          # what a store written before the stamp looks like
    db.execute("PRAGMA application_id=0")
    db.close()
    store = Store(path)
    assert store.db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert store.metrics(run) == {"ops_per_sec": 7.0}


# -- outputs never overwrite the store -------------------------------------------------------------
@pytest.mark.parametrize("suffix", ["", "-wal"])
def test_json_output_on_the_store_or_its_wal_is_refused_before_anything_runs(tmp_path, redline_cli, suffix):
    path = tmp_path / "r.db"
    run = stored_run(Store(path), "kept")
    out = Path(f"{path}{suffix}")
    line = one_error_line(redline_cli(*QUICK_RUN, "--store", path, "--json", out), 2)
    assert line == (f"redline: error: --json {out} is the result store {path} (or its -wal/-shm file); "
                    "refusing to write over it")
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1   # no session was even begun
    assert Store(path).metrics(run) == {"ops_per_sec": 7.0}


def test_history_json_on_the_store_is_refused(tmp_path, redline_cli):
    path = tmp_path / "r.db"
    stored_run(Store(path), "kept")
    line = one_error_line(redline_cli("history", "--store", path, "--json", path), 2)
    assert line.startswith(f"redline: error: --json {path} is the result store {path}")
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_json_output_through_a_symlink_to_the_store_is_refused(tmp_path, redline_cli):
    path = tmp_path / "r.db"
    stored_run(Store(path), "kept")
    link = tmp_path / "results.json"
    link.symlink_to(path)
    one_error_line(redline_cli(*QUICK_RUN, "--store", path, "--json", link), 2)
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- failures of the disk and of other processes ---------------------------------------------------
def test_a_store_on_a_read_only_file_system_is_one_line_and_untouched(tmp_path, redline_cli):
    data, view = tmp_path / "data", tmp_path / "ro"
    data.mkdir()
    view.mkdir()
    stored_run(Store(data / "r.db"), "kept")
    bound = subprocess.run(["mount", "--bind", "-o", "ro", str(data), str(view)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount read-only here: {bound.stderr.strip()}")
    try:
        path = view / "r.db"
        before = digest(path)
        line = one_error_line(redline_cli(*QUICK_RUN, "--store", path), 2)
        assert line == f"redline: error: store {path}: is on a read-only file system"
        assert digest(path) == before
    finally:
        subprocess.run(["umount", str(view)], check=False)


def test_a_store_locked_past_the_busy_timeout_is_one_line_exit_1(tmp_path):
    path = tmp_path / "r.db"
    run = stored_run(Store(path), "kept")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")                 # another process holds the write lock
    try:
        proc = subprocess.run([*REDLINE, *QUICK_RUN, "--store", str(path)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, env=ENV_TIMEOUT_1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    line = one_error_line(proc, 1)
    assert line == f"redline: error: store {path}: locked by another process for more than 1 s (the busy timeout)"
    assert Store(path).metrics(run) == {"ops_per_sec": 7.0}


def test_a_full_disk_at_the_end_of_a_run_loses_nothing_and_leaves_no_run_running(tmp_path):
    """The disk fills while the second test runs: its final write fails with one line, exit 1;
    the first test's run stays, and the second is found 'interrupted', never 'running' forever."""
    suites = tmp_path / "suites"
    suites.mkdir()
    for name in ("a-first", "b-second"):
        write_suite(suites, name, "--ratio 1:0 --key-maximum 1000 -d 10 -c 1 -t 1 --test-time 2")
    with tmpfs(tmp_path / "mnt", "2m") as mnt:
        path = mnt / "r.db"
        proc = subprocess.Popen([*REDLINE, "run", str(suites), "--duration", "2s", "--warmup", "0s",
                                 "--store", str(path)], cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        filled = threading.Event()
        watcher = threading.Thread(target=fill_when_running, args=(path, "b-second", mnt / "filler", filled))
        watcher.start()
        out, err = proc.communicate(timeout=180)
        watcher.join()
        assert filled.is_set(), "never saw the second run in progress"
        line = one_error_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), 1)
        assert line == f"redline: error: store {path}: the disk is full"
        (mnt / "filler").unlink()
        store = Store(path)
        runs = {r["test"]: r for r in store.runs()}
        assert runs["a-first"]["status"] == "ok" and store.metrics(runs["a-first"]["id"])["ops_per_sec"] > 0
        assert runs["b-second"]["status"] == "interrupted"
        store.close()


def fill_when_running(path: Path, test: str, filler: Path, filled: threading.Event) -> None:
    """Once `test` has a 'running' row in the store, write `filler` until the disk is full."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not filled.is_set():
        time.sleep(0.05)
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                running = db.execute("SELECT count(*) FROM runs WHERE test=? AND status='running'",
                                     (test,)).fetchone()[0]
        except sqlite3.Error:
            continue
        if running:
            with filler.open("wb") as out:
                try:
                    while True:
                        out.write(b"\0" * 65536)
                        out.flush()
                except OSError:
                    pass
            filled.set()


# -- recovery and migrations ------------------------------------------------------------------------
def test_recovery_reaches_a_run_left_running_by_a_session_that_ended(tmp_path):
    """A session marked interrupted (or finished) while one of its runs was never finished: the
    next open marks that run interrupted too."""
    path = tmp_path / "r.db"
    store = Store(path)
    run = stored_run(store, "unfinished", status="running")
    store.db.execute("UPDATE runs SET status='running' WHERE id=?", (run,))   # as an older redline left it
    store.close()
    assert Store(path).runs()[0]["status"] == "interrupted"


def old_store(path: Path, *, runs_columns: str) -> None:
    """A schema-1 store as the first redline wrote it (no purpose, no topology), with one run."""
    db = sqlite3.connect(path)
    db.executescript(f"""
        CREATE TABLE sessions (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, argv TEXT NOT NULL,
            machine TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, started_at REAL NOT NULL,
            finished_at REAL, status TEXT NOT NULL DEFAULT 'running');
        CREATE TABLE runs (id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL, test TEXT NOT NULL,
            suite_file TEXT, target TEXT NOT NULL, side TEXT, run_index INTEGER NOT NULL, {runs_columns}
            status TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL, error TEXT,
            server_log_tail TEXT, facts TEXT);
        CREATE TABLE metrics (run_id INTEGER NOT NULL, name TEXT NOT NULL, value REAL, PRIMARY KEY (run_id, name));
        CREATE TABLE series (run_id INTEGER NOT NULL, name TEXT NOT NULL, second INTEGER NOT NULL, value REAL,
            PRIMARY KEY (run_id, name, second));
        INSERT INTO sessions VALUES (1, 'run', '[]', '{{}}', 'elsewhere', 1, 0, 1, 'finished');
        INSERT INTO runs(id, session_id, test, target, run_index, status, started_at)
            VALUES (1, 1, 'old-test', 'bin:x', 0, 'ok', 0);
        INSERT INTO metrics VALUES (1, 'ops_per_sec', 123.0);
        PRAGMA user_version=1;
    """)
    db.close()


def test_an_old_store_is_migrated_and_keeps_its_runs(tmp_path):
    path = tmp_path / "r.db"
    old_store(path, runs_columns="")
    store = Store(path)
    [run] = store.runs()
    assert (run["test"], run["purpose"], run["topology"]) == ("old-test", "measure", "oss-standalone")
    assert store.metrics(1) == {"ops_per_sec": 123.0}
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_migration_that_fails_halfway_leaves_the_store_as_it_was(tmp_path):
    """Migration 2 succeeds, migration 3 fails (the column exists already): nothing of either is
    kept, so the store still opens as what it was instead of failing on every later attempt."""
    path = tmp_path / "r.db"
    old_store(path, runs_columns="topology TEXT,")
    with pytest.raises(StoreError, match=f"^store {path}: duplicate column name: topology$"):
        Store(path)
    db = sqlite3.connect(path)
    columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    assert "purpose" not in columns
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1
    assert db.execute("SELECT value FROM metrics").fetchall() == [(123.0,)]
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_a_foreign_file_raises_not_a_store_in_the_library_too(tmp_path):
    path = tmp_path / "x.db"
    path.write_bytes(b"\x00" * 4096)
    with pytest.raises(NotAStore):
        Store(path)
    assert path.read_bytes() == b"\x00" * 4096


def test_a_busy_timeout_that_is_not_a_number_is_a_usage_error(tmp_path):
    path = tmp_path / "r.db"
    stored_run(Store(path), "kept")
    proc = subprocess.run([*REDLINE, "history", "--store", str(path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**ENV_TIMEOUT_1, "REDLINE_STORE_BUSY_TIMEOUT": "soon"})
    line = one_error_line(proc, 2)
    assert line == "redline: error: REDLINE_STORE_BUSY_TIMEOUT='soon' is not a number of seconds"


def test_a_result_file_on_a_full_disk_is_one_line_and_the_runs_stay_stored(tmp_path):
    """--json passes the up-front check (an empty file fits), then the disk has no room for the
    document: exit 1 with one line, no half-written file, and the measured run kept in the store."""
    store_path = tmp_path / "r.db"
    with tmpfs(tmp_path / "mnt", "64k") as mnt:
        with open(mnt / "filler", "wb", buffering=0) as filler:
            try:
                while True:
                    filler.write(b"\0" * 4096)
            except OSError:
                pass                       # the disk is full
        out = mnt / "out.json"
        proc = subprocess.run([*REDLINE, *QUICK_RUN, "--store", str(store_path), "--json", str(out)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, env=ENV_TIMEOUT_1)
        line = one_error_line(proc, 1)
        assert line.startswith(f"redline: error: cannot write {out}: No space left on device;"), line
        assert sorted(p.name for p in mnt.iterdir()) == ["filler"]        # no out.json, no .partial
    runs = sqlite3.connect(store_path).execute("SELECT status FROM runs").fetchall()
    assert runs == [("ok",)]


FLEET_TABLES = {"fleet_work", "fleet_jobs", "fleet_runs", "fleet_effects"}


def test_a_version_5_store_gains_the_fleet_tables_and_keeps_a_collectors_rows(tmp_path):
    """Schema 6 holds the collector's tables: a version-5 store whose collector created three of
    them itself keeps their rows; one without them gets all four."""
    with_ledger, without = tmp_path / "collector.db", tmp_path / "plain.db"
    for path in (with_ledger, without):
        Store(path).close()
        db = sqlite3.connect(path)
        db.execute("DROP TABLE fleet_effects")
        if path == without:
            db.executescript("DROP TABLE fleet_runs; DROP TABLE fleet_jobs; DROP TABLE fleet_work;")
        else:
            db.executescript("""
                INSERT INTO sessions(id, kind, argv, machine, host, pid, started_at) VALUES (1, 'fleet', '[]', '{}', 'h', 1, 0);
                INSERT INTO fleet_work(work_id, session_id, document) VALUES ('w', 1, '{}');
                INSERT INTO fleet_jobs(job_id, work_id, platform, status, stored_at) VALUES ('w:p:1', 'w', 'p', 'dead', 0);
            """)
        db.execute("PRAGMA user_version=5")
        db.commit()
        db.close()
    for path in (with_ledger, without):
        store = Store(path)
        tables = {row[0] for row in store.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert FLEET_TABLES <= tables and store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 6
    assert [tuple(row) for row in Store(with_ledger).db.execute("SELECT job_id, status FROM fleet_jobs")] == [
        ("w:p:1", "dead")]
