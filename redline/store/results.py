"""The result store: one SQLite file (WAL), every run, its metrics and per-second series.

A run is written in two steps: a 'running' row when it starts, and — in one transaction — its
status, metrics and series when it ends. A redline killed mid-run leaves that row 'running';
the next time the store is opened, rows whose owning process is gone become 'interrupted'.

Opening is one check (`Store.__init__` → `_inspect`): a store is recognised by its SQLite
application_id (or, for stores written before redline stamped one, by its tables); any other
file is refused before anything is written to it. Every SQLite failure later on (disk full,
read-only file system, a lock held past the busy timeout) is a `StoreError`: one line naming
the store.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import stat
import tempfile
import time
from contextlib import closing, contextmanager
from typing import Iterator
from pathlib import Path

from redline.analysis.comparison import TestComparison
from redline.core.errors import RunError, UsageError
from redline.core.redaction import redact_argv
from redline.core.run import Run
from redline.store.session import SessionDocument

APPLICATION_ID = 0x52446C6E          # 'RDln' in the SQLite header: this file is a redline store
REDLINE_TABLES = {"sessions", "runs", "metrics", "series"}   # a store from before APPLICATION_ID
STORE_COMPANIONS = ("", "-wal", "-shm", "-journal")          # the files SQLite keeps for one store
BUSY_TIMEOUT_VARIABLE = "REDLINE_STORE_BUSY_TIMEOUT"    # seconds to wait for another process's lock (default 30)
SCHEMA_VERSION = 6
# Changes to a store written by an older redline, by the version they lead to.
MIGRATIONS = {
    2: ["ALTER TABLE runs ADD COLUMN purpose TEXT NOT NULL DEFAULT 'measure'"],
    3: ["ALTER TABLE runs ADD COLUMN topology TEXT NOT NULL DEFAULT 'oss-standalone'"],
    4: ["ALTER TABLE runs ADD COLUMN uid TEXT",
        "ALTER TABLE runs ADD COLUMN flags TEXT",
        "UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid IS NULL",
        "UPDATE runs SET flags = json_extract(facts, '$.flags') WHERE facts IS NOT NULL"],
    # a session's named documents (the bisection document of schema 4 among them)
    5: ["CREATE TABLE IF NOT EXISTS bisections (session_id INTEGER PRIMARY KEY, document TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS session_documents (session_id INTEGER NOT NULL REFERENCES sessions(id), "
        "name TEXT NOT NULL, document TEXT NOT NULL, PRIMARY KEY (session_id, name))",
        "INSERT OR IGNORE INTO session_documents(session_id, name, document) "
        "SELECT session_id, 'bisection', document FROM bisections",
        "DROP TABLE bisections"],
    # the fleet collector's tables join the schema (SCHEMA creates them; a store whose collector
    # created fleet_work, fleet_jobs and fleet_runs itself keeps them and their rows)
    6: [],
}
SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    argv TEXT NOT NULL,
    machine TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    test TEXT NOT NULL,
    suite_file TEXT,
    target TEXT NOT NULL,
    side TEXT,
    run_index INTEGER NOT NULL,
    purpose TEXT NOT NULL DEFAULT 'measure' CHECK (purpose IN ('measure', 'profile')),
    topology TEXT NOT NULL DEFAULT 'oss-standalone',
    uid TEXT,
    flags TEXT,
    status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'interrupted', 'skipped')),
    started_at REAL NOT NULL,
    finished_at REAL,
    error TEXT,
    server_log_tail TEXT,
    facts TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_test ON runs(test, target);
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_uid ON runs(uid);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    value REAL,
    PRIMARY KEY (run_id, name)
);
CREATE TABLE IF NOT EXISTS series (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    second INTEGER NOT NULL,
    value REAL,
    PRIMARY KEY (run_id, name, second)
);
CREATE TABLE IF NOT EXISTS profiles (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id),
    folded_path TEXT NOT NULL,
    svg_path TEXT NOT NULL,
    unwinder TEXT,
    event TEXT,
    samples INTEGER,
    detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS comparisons (
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    test TEXT NOT NULL,
    metric TEXT NOT NULL,
    verdict TEXT,
    detail TEXT NOT NULL,
    PRIMARY KEY (session_id, test, metric)
);
CREATE TABLE IF NOT EXISTS noise_floors (
    host TEXT NOT NULL,
    test TEXT NOT NULL,
    metric TEXT NOT NULL,
    floor_pct REAL NOT NULL,
    runs INTEGER NOT NULL,
    target TEXT NOT NULL,
    measured_at REAL NOT NULL,
    PRIMARY KEY (host, test, metric)
);
CREATE TABLE IF NOT EXISTS session_documents (
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    name TEXT NOT NULL,
    document TEXT NOT NULL,
    PRIMARY KEY (session_id, name)
);
CREATE TABLE IF NOT EXISTS fleet_work (
    work_id TEXT PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    document TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'running',
    comment TEXT,
    finished_at REAL
);
CREATE TABLE IF NOT EXISTS fleet_jobs (
    job_id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES fleet_work(work_id),
    platform TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'dead')),
    agent TEXT,
    attempt INTEGER,
    error TEXT,
    submitted_at REAL,
    started_at REAL,
    stored_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS fleet_runs (
    uid TEXT PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    job_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS fleet_effects (
    work_id TEXT NOT NULL REFERENCES fleet_work(work_id),
    kind TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    detail TEXT,
    updated_at REAL,
    PRIMARY KEY (work_id, kind)
);
"""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StoreError(RunError):
    """The store failed while redline worked with it (disk full, locked past the busy timeout,
    an I/O error): a runtime failure, exit 1. What was committed before stays."""


class NotAStore(UsageError):
    """The path given as the store cannot be one: not a redline store, unreadable, read-only,
    or written by a newer redline. Nothing was written to it. Exit 2."""


def busy_timeout_s() -> float:
    text = os.environ.get(BUSY_TIMEOUT_VARIABLE, "30")
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise UsageError(f"{BUSY_TIMEOUT_VARIABLE}={text!r} is not a number of seconds")
    return value


# SQLite's words for the failures a user can meet, in the user's words.
_SQLITE_PROBLEMS = {
    "database or disk is full": "the disk is full",
    "attempt to write a readonly database": "read-only (the file or its file system)",
    "disk I/O error": "disk I/O error",
    "unable to open database file": "cannot be opened (no permission, or its directory is gone)",
    "file is not a database": "not an SQLite database",
    "database disk image is malformed": "damaged (SQLite: database disk image is malformed)",
}


def store_problem(path: Path, text: str) -> str:
    """The one-line form of every store error: it names the file first."""
    return f"store {path}: {text}"


class _StoreConnection(sqlite3.Connection):
    """A connection whose operational failures become one `StoreError` line naming the store.
    Constraint and programming errors (bugs) stay what they are."""

    store_path: Path = Path()

    def _guarded(self, method, *args):
        try:
            return method(*args)
        except sqlite3.DatabaseError as exc:
            if type(exc) not in (sqlite3.OperationalError, sqlite3.DatabaseError):
                raise
            raise StoreError(store_problem(self.store_path, explain(exc))) from exc

    def execute(self, *args):
        return self._guarded(super().execute, *args)

    def executemany(self, *args):
        return self._guarded(super().executemany, *args)


def explain(exc: sqlite3.Error) -> str:
    """An SQLite error in the user's words."""
    message = str(exc)
    if message == "database is locked":
        return f"locked by another process for more than {busy_timeout_s():g} s (the busy timeout)"
    return _SQLITE_PROBLEMS.get(message, message)


def _file_kind_problem(path: Path) -> str | None:
    """Why `path` can never hold a store (a directory, a device …), or None."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISDIR(mode):
        return "is a directory, not a store file"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a device, FIFO or socket)"
    return None


def _writable_problem(path: Path) -> str | None:
    """Why redline could not write the store at `path` (or create it), or None."""
    existing = path if path.exists() else path.parent
    try:
        if os.statvfs(existing).f_flag & os.ST_RDONLY:
            return "is on a read-only file system"
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.access(existing, os.W_OK):
        return "is not writable (permission denied)" if existing == path else \
            f"cannot be created: directory {existing} is not writable"
    if existing != path:        # a directory may refuse new files whatever it says (/proc, /sys)
        # probed with a file of a name of its own: a probe at the store's path would be, for as long
        # as it lives, an empty store file to another redline process opening the same path
        try:
            with tempfile.NamedTemporaryFile(dir=existing, prefix=f".{path.name}.probe-"):
                pass
        except OSError as exc:
            return f"cannot be created: {exc.strerror or exc}"
    return None


def _read_only_tables(path: Path) -> set[str]:
    """The table names of an SQLite file, read without any chance of writing to it."""
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=busy_timeout_s())) as db:
            return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise NotAStore(store_problem(path, explain(exc))) from exc


def _header(path: Path) -> tuple[int, int] | None:
    """(application_id, user_version) of an SQLite file as SQLite reads them, read-only; None for a
    file that is not SQLite. Never with open(): closing any descriptor of a file drops every POSIX
    lock this process holds on it, SQLite's among them, so a plain read of the header beside an open
    store let another redline process take the store for unused, checkpoint and delete its WAL while
    this one was writing: a damaged store (two `redline accuracy` on one store did; SQLite's "How To
    Corrupt An SQLite Database File", 2.2). SQLite's own descriptors keep the locks."""
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=busy_timeout_s())) as db:
            return tuple(db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("application_id", "user_version"))
    except sqlite3.DatabaseError as exc:
        if str(exc) == "file is not a database":
            return None
        raise NotAStore(store_problem(path, explain(exc))) from exc
    except sqlite3.Error as exc:
        raise NotAStore(store_problem(path, explain(exc))) from exc


def inspect_store_file(path: Path) -> bool:
    """The one store-opening check: True if `path` holds a redline store, False if there is
    nothing there yet (a new store will be created); NotAStore for anything else. Reads only."""
    problem = _file_kind_problem(path)
    if problem:
        raise NotAStore(store_problem(path, problem))
    if not path.exists() and not path.parent.is_dir():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise NotAStore(store_problem(path, f"cannot create its directory: {exc.strerror or exc}")) from exc
    problem = _writable_problem(path)
    if problem:
        raise NotAStore(store_problem(path, problem))
    if not path.exists() or path.stat().st_size == 0:
        return False
    header = _header(path)
    if header is None:
        raise NotAStore(store_problem(path, "is not an SQLite database, so not a redline store; left untouched"))
    application_id, version = header
    if application_id == APPLICATION_ID:
        _check_schema_version(path, version)
        return True
    if application_id == 0 and REDLINE_TABLES <= _read_only_tables(path):
        return True      # written before redline stamped its application_id: stamped when opened
    raise NotAStore(store_problem(path, f"is another program's SQLite database (application_id "
                                        f"{application_id:#x}, no redline tables); left untouched"))


def _check_schema_version(path: Path, version: int) -> None:
    """A store written by a newer redline is refused (by its header before opening, by PRAGMA
    user_version once open)."""
    if version > SCHEMA_VERSION:
        raise NotAStore(store_problem(path, f"was written by a newer redline (schema {version}; "
                                            f"this redline reads up to {SCHEMA_VERSION})"))


def is_store_file(store: Path, path: Path) -> bool:
    """Whether writing `path` would write over the store or one of SQLite's files for it."""
    for suffix in STORE_COMPANIONS:
        companion = Path(str(store) + suffix)
        if companion.exists() and path.exists():
            if os.path.samefile(companion, path):
                return True
        elif companion.resolve() == path.resolve():
            return True
    return False


def check_output_path(store: Path, path: Path, flag: str) -> None:
    """An output file (--json, --markdown) must never be the result store: UsageError."""
    if is_store_file(store, path):
        raise UsageError(f"{flag} {path} is the result store {store} (or its -wal/-shm file); "
                         "refusing to write over it")


class Store:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        existing = inspect_store_file(self.path)
        self.db = self._connect()
        try:
            self._set_up_schema(existing)
            self.db.execute("PRAGMA journal_mode=WAL")
            self._settings()
            self.recover_interrupted()
        except BaseException:
            self.db.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(self.path, timeout=busy_timeout_s(), isolation_level=None, factory=_StoreConnection)
        except sqlite3.Error as exc:
            raise NotAStore(store_problem(self.path, explain(exc))) from exc
        db.store_path = self.path
        db.row_factory = sqlite3.Row
        return db

    def _settings(self) -> None:
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")

    @contextmanager
    def disconnected(self) -> Iterator[None]:
        """No connection open for a moment, then a new one: what a process that forks needs
        around the fork (SQLite: never carry an open connection across fork(); the child inherits
        SQLite's per-process lock bookkeeping of it), e.g. redline.lab.scheduler's lanes."""
        self.db.close()
        try:
            yield
        finally:
            self.db = self._connect()
            self._settings()

    def _set_up_schema(self, existing: bool) -> None:
        """Create a new store, or bring an older one up to SCHEMA_VERSION, in one transaction:
        an interrupted migration leaves the store as it was."""
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        _check_schema_version(self.path, version)
        stamped = self.db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        if existing and stamped and version == SCHEMA_VERSION:
            return
        with self._transaction():
            version = self.db.execute("PRAGMA user_version").fetchone()[0]   # another redline may have upgraded it
            if version:
                for target in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS.get(target, []):
                        self.db.execute(statement)
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self.db.execute(f"PRAGMA application_id={APPLICATION_ID}")

    def close(self) -> None:
        self.db.close()

    # -- writing ----------------------------------------------------------------------------
    def begin_session(self, *, kind: str, argv: list[str], machine: dict) -> int:
        """A new session; its argv is kept with every secret hidden (a password in an --export URL)."""
        cur = self.db.execute(
            "INSERT INTO sessions(kind, argv, machine, host, pid, started_at) VALUES (?,?,?,?,?,?)",
            (kind, json.dumps(redact_argv(argv)), json.dumps(machine), platform.node(), os.getpid(), time.time()))
        return cur.lastrowid

    def finish_session(self, session_id: int, status: str) -> None:
        """The session ends; a run of it still 'running' (its final write failed) cannot go on."""
        with self._transaction():
            self.db.execute("UPDATE sessions SET finished_at=?, status=? WHERE id=?",
                            (time.time(), status, session_id))
            self.db.execute("UPDATE runs SET status='interrupted', error=? WHERE session_id=? AND status='running'",
                            ("redline stopped before this run's result was stored", session_id))

    # -- the store as a result sink (redline.engine.sinks.ResultSink) --------------------------------
    def session_started(self, session: SessionDocument) -> None:
        """The store made the session (begin_session): nothing more to write."""

    def session_finished(self, session: SessionDocument) -> str | None:
        """Everything of the session is written as it happens: nothing left to write."""
        return None

    def run_started(self, run: Run) -> None:
        """A 'running' row for the run (a redline killed now leaves it for recovery); the run
        gets its row id."""
        run.started_at = run.started_at or time.time()
        cur = self.db.execute(
            "INSERT INTO runs(session_id, test, suite_file, target, side, run_index, purpose, topology, uid, status,"
            " started_at) VALUES (?,?,?,?,?,?,?,?,?,'running',?)",
            (run.session_id, run.test, run.suite_file, run.target, run.side, run.run_index, run.purpose,
             run.topology, run.uid, run.started_at))
        run.run_id = cur.lastrowid

    def run_finished(self, run: Run) -> None:
        """Status, metrics, series and profile of one run, atomically."""
        with self._transaction():
            self._write_result(run)

    def run_interrupted(self, run: Run, reason: str) -> None:
        self.db.execute("UPDATE runs SET status='interrupted', finished_at=?, error=? "
                        "WHERE id=? AND status='running'", (time.time(), reason, run.run_id))

    def add_run(self, run: Run) -> bool:
        """A finished run from elsewhere (a fleet agent's result), stored once: False, and nothing
        written, when a run with its uid is already here."""
        with self._transaction():
            if self.db.execute("SELECT 1 FROM runs WHERE uid=?", (run.uid,)).fetchone():
                return False
            self.run_started(run)
            self._write_result(run)
        return True

    def _write_result(self, run: Run) -> None:
        run.finished_at = run.finished_at or time.time()
        self.db.execute(
            "UPDATE runs SET status=?, finished_at=?, error=?, server_log_tail=?, facts=?, flags=? WHERE id=?",
            (run.status, run.finished_at, run.error, run.server_log_tail,
             json.dumps(run.facts, default=str), json.dumps(run.flags), run.run_id))
        self.db.executemany("INSERT OR REPLACE INTO metrics(run_id, name, value) VALUES (?,?,?)",
                            [(run.run_id, k, v) for k, v in run.metrics.items()])
        self.db.executemany(
            "INSERT OR REPLACE INTO series(run_id, name, second, value) VALUES (?,?,?,?)",
            [(run.run_id, name, i, v) for name, values in run.series.items() for i, v in enumerate(values)])
        if run.profile:
            pr = run.profile
            self.db.execute(
                "INSERT OR REPLACE INTO profiles(run_id, folded_path, svg_path, unwinder, event, samples, detail)"
                " VALUES (?,?,?,?,?,?,?)", (run.run_id, pr["folded_path"], pr["svg_path"], pr.get("unwinder"),
                                            pr.get("event"), pr.get("samples"), json.dumps(pr)))

    def artifacts(self, name: str) -> Path:
        """Where files named `name` (a run's, a session's) are kept: next to the database file."""
        return self.path.with_name(self.path.stem + "-artifacts") / name

    def _artifact_path(self, run_id: int) -> Path:
        return self.artifacts(f"run-{run_id}")

    def artifact_dir(self, run_id: int) -> Path:
        """Files that belong to a run (profiles, flame graphs), next to the database file."""
        path = self._artifact_path(run_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def remove_profile_leftovers(self, run_id: int) -> None:
        """What a profiler killed with redline leaves in a run's artifacts: perf's data file
        (megabytes no stored profile refers to) and its control FIFOs."""
        directory = self._artifact_path(run_id)
        if not directory.is_dir():
            return
        for entry in directory.iterdir():
            if entry.name.startswith("perf.data") or stat.S_ISFIFO(entry.lstat().st_mode):
                entry.unlink(missing_ok=True)

    def recover_interrupted(self) -> int:
        """Every run left 'running' by a session that is not running any more becomes
        'interrupted': sessions of a redline process on this machine that no longer exists, and
        sessions that ended while one of their runs could not be finished (a failed final write).
        Profiler leftovers in those runs' artifacts are removed."""
        here = platform.node()
        sessions = self.db.execute("SELECT id, pid FROM sessions WHERE status='running' AND host=?",
                                   (here,)).fetchall()
        dead = [s["id"] for s in sessions if not _pid_alive(s["pid"])]
        ended = [row[0] for row in self.db.execute(
            "SELECT DISTINCT r.session_id FROM runs r JOIN sessions s ON s.id = r.session_id "
            "WHERE r.status='running' AND s.status != 'running'")]
        if not dead and not ended:
            return 0
        stale = [row[0] for session_id in dead + ended for row in self.db.execute(
            "SELECT id FROM runs WHERE session_id=? AND status='running'", (session_id,))]
        with self._transaction():
            self.db.executemany("UPDATE runs SET status='interrupted', error=? WHERE id=? AND status='running'",
                                [("redline stopped before this run finished", run_id) for run_id in stale])
            self.db.executemany("UPDATE sessions SET status='interrupted' WHERE id=?",
                                [(session_id,) for session_id in dead])
        for run_id in stale:
            self.remove_profile_leftovers(run_id)
        return len(stale)

    @contextmanager
    def _transaction(self):
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def save_comparisons(self, session_id: int, rows: list[dict]) -> None:
        """Verdicts of an A/B session: one row per test and metric, every number in `detail`."""
        with self._transaction():
            self.db.executemany(
                "INSERT OR REPLACE INTO comparisons(session_id, test, metric, verdict, detail) VALUES (?,?,?,?,?)",
                [(session_id, r["test"], r["metric"], r.get("verdict"), json.dumps(r)) for r in rows])

    def save_session_document(self, session_id: int, name: str, document: dict) -> None:
        """A named JSON document of a session (a bisection's steps and culprit, a calibration's noise
        floors, a gate's verdicts), replaced when saved again."""
        self.db.execute("INSERT OR REPLACE INTO session_documents(session_id, name, document) VALUES (?,?,?)",
                        (session_id, name, json.dumps(document)))

    def session_document(self, session_id: int, name: str) -> dict | None:
        row = self.db.execute("SELECT document FROM session_documents WHERE session_id=? AND name=?",
                              (session_id, name)).fetchone()
        return json.loads(row[0]) if row else None

    def documents_named(self, name: str) -> list[tuple[int, dict]]:
        """(session id, document) of every session's document called `name`, oldest session first."""
        return [(row[0], json.loads(row[1])) for row in self.db.execute(
            "SELECT session_id, document FROM session_documents WHERE name=? ORDER BY session_id", (name,))]

    def save_noise_floor(self, *, test: str, metric: str, floor_pct: float, runs: int, target: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO noise_floors(host, test, metric, floor_pct, runs, target, measured_at)"
            " VALUES (?,?,?,?,?,?,?)", (platform.node(), test, metric, floor_pct, runs, target, time.time()))

    def noise_floors(self) -> dict[tuple[str, str], float]:
        """This machine's noise floors from `redline calibrate`, by (test, metric)."""
        return {(r["test"], r["metric"]): r["floor_pct"] for r in self.db.execute(
            "SELECT test, metric, floor_pct FROM noise_floors WHERE host=?", (platform.node(),))}

    def earlier_window_requests(self, test: str, topology: str, window_instructions: int) -> int | None:
        """The requests per connection of this store's latest counted run of the test at this window
        target (--measure instructions keeps it while it fits: redline.instructions.window)."""
        row = self.db.execute(
            "SELECT json_extract(facts, '$.instructions.requests_per_connection') FROM runs "
            "WHERE test=? AND topology=? AND status='ok' "
            "AND json_extract(facts, '$.instructions.window_instructions_target')=? "
            "AND json_extract(facts, '$.instructions.requests_per_connection') IS NOT NULL "
            "ORDER BY id DESC LIMIT 1", (test, topology, window_instructions)).fetchone()
        return int(row[0]) if row else None

    # -- reading ----------------------------------------------------------------------------
    def runs(self, session_id: int | None = None) -> list[sqlite3.Row]:
        if session_id is None:
            return self.db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        return self.db.execute("SELECT * FROM runs WHERE session_id=? ORDER BY id", (session_id,)).fetchall()

    def carried_runs(self, uids: list[str]) -> list[Run]:
        """The runs with these uids (those a resumed compare carried from the sessions it resumes),
        in the order they ran."""
        if not uids:
            return []
        return self._load_runs_where("r.uid IN (SELECT value FROM json_each(?))", (json.dumps(list(uids)),))

    def history(self, metric: str) -> list[sqlite3.Row]:
        """Every measured run's value of `metric` on this machine, oldest first, with what identifies
        its series (test, topology, target), the session it belongs to and the build it measured
        (`identity`: JSON of redline.server.identity, NULL for runs stored before it was recorded)."""
        return self.db.execute(
            "SELECT r.session_id, r.test, r.topology, r.target, r.started_at, m.value, "
            "json_extract(r.facts, '$.identity') AS identity, "
            "json_extract(r.facts, '$.server_version') AS server_version FROM runs r "
            "JOIN metrics m ON m.run_id = r.id JOIN sessions s ON s.id = r.session_id "
            "WHERE m.name=? AND r.status='ok' AND r.purpose='measure' AND s.host=? AND m.value IS NOT NULL "
            "ORDER BY r.started_at", (metric, platform.node())).fetchall()

    def latest_profiled_session(self) -> int | None:
        return self.db.execute("SELECT max(r.session_id) FROM runs r JOIN profiles p ON p.run_id = r.id").fetchone()[0]

    def profiles(self, session_id: int) -> list[sqlite3.Row]:
        """The profiled runs of a session with their profile rows."""
        return self.db.execute(
            "SELECT r.id, r.test, r.side, r.target, p.folded_path, p.svg_path, p.detail FROM runs r "
            "JOIN profiles p ON p.run_id = r.id WHERE r.session_id=? ORDER BY r.id", (session_id,)).fetchall()

    def load_runs(self, session_id: int | None = None) -> list[Run]:
        """The run documents of a session (every session with None), in the order they ran: three
        queries in all (runs, then every metric and series value and profile of those runs)."""
        if session_id is None:
            return self._load_runs_where("1", ())
        return self._load_runs_where("r.session_id=?", (session_id,))

    def _load_runs_where(self, condition: str, args: tuple) -> list[Run]:
        where = f"WHERE {condition}"
        rows = self.db.execute(f"SELECT * FROM runs r {where} ORDER BY r.id", args).fetchall()
        metrics: dict[int, dict] = {}
        for r in self.db.execute(f"SELECT m.run_id, m.name, m.value FROM metrics m JOIN runs r ON r.id = m.run_id {where}",
                                 args):
            metrics.setdefault(r[0], {})[r[1]] = r[2]
        series: dict[int, dict[str, list[float]]] = {}
        for r in self.db.execute(f"SELECT s.run_id, s.name, s.value FROM series s JOIN runs r ON r.id = s.run_id {where} "
                                 "ORDER BY s.run_id, s.name, s.second", args):
            series.setdefault(r[0], {}).setdefault(r[1], []).append(r[2])
        profiles = {r[0]: json.loads(r[1]) for r in self.db.execute(
            f"SELECT p.run_id, p.detail FROM profiles p JOIN runs r ON r.id = p.run_id {where}", args)}
        return [self._run_from_row(row, metrics.get(row["id"], {}), series.get(row["id"], {}),
                                   profiles.get(row["id"])) for row in rows]

    @staticmethod
    def _run_from_row(row: sqlite3.Row, metrics: dict, series: dict, profile: dict | None) -> Run:
        facts = json.loads(row["facts"]) if row["facts"] else {}
        flags = json.loads(row["flags"]) if row["flags"] else facts.pop("flags", None) or []
        return Run(test=row["test"], target=row["target"], side=row["side"], run_index=row["run_index"],
                   topology=row["topology"], purpose=row["purpose"], suite_file=row["suite_file"], uid=row["uid"],
                   session_id=row["session_id"], run_id=row["id"], started_at=row["started_at"],
                   finished_at=row["finished_at"], status=row["status"], metrics=metrics,
                   series=series, flags=flags, facts=facts, error=row["error"],
                   server_log_tail=row["server_log_tail"], profile=profile)

    def load_session(self, session_id: int) -> SessionDocument:
        """The one session document (redline.store.session): a UsageError when there is none."""
        row = self.db.execute("SELECT * FROM sessions WHERE id=?", (session_id,)).fetchone()
        if row is None:
            raise UsageError(f"no session {session_id} in {self.path}")
        comparisons = [TestComparison.from_json(json.loads(c["detail"])) for c in self.db.execute(
            "SELECT detail FROM comparisons WHERE session_id=? ORDER BY test, metric", (session_id,))]
        documents = {d["name"]: json.loads(d["document"]) for d in self.db.execute(
            "SELECT name, document FROM session_documents WHERE session_id=? ORDER BY name", (session_id,))}
        uids = (documents.get("resume") or {}).get("carried") or []     # a resumed compare (redline.lab.compare_resume)
        carried = self.carried_runs([u for u in uids if isinstance(u, str)] if isinstance(uids, list) else [])
        return SessionDocument(session_id, row["kind"], json.loads(row["argv"]), json.loads(row["machine"]),
                               row["host"], row["started_at"], row["finished_at"], row["status"],
                               carried + self.load_runs(session_id), comparisons, documents)

    def latest_session(self, kind: str | None = None) -> int | None:
        """'latest' everywhere (report, export, hotspots): the newest session that stored a run (of
        `kind`, when given: the gate to resume)."""
        if kind is None:
            return self.db.execute("SELECT max(session_id) FROM runs").fetchone()[0]
        return self.db.execute("SELECT max(r.session_id) FROM runs r JOIN sessions s ON s.id = r.session_id "
                               "WHERE s.kind=?", (kind,)).fetchone()[0]

    def sessions_since(self, since: float) -> list[int]:
        """The sessions started at or after `since` (seconds since the epoch), oldest first."""
        return [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE started_at >= ? ORDER BY id", (since,))]

    def metrics(self, run_id: int) -> dict[str, float | None]:
        return {r["name"]: r["value"] for r in
                self.db.execute("SELECT name, value FROM metrics WHERE run_id=?", (run_id,))}

    def series(self, run_id: int, name: str) -> list[float]:
        return [r["value"] for r in self.db.execute(
            "SELECT value FROM series WHERE run_id=? AND name=? ORDER BY second", (run_id, name))]
