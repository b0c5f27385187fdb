"""RDB snapshot cache: a preloaded dataset saved once, restored by later runs in seconds.

Entries live in one directory, named by the dataset plan's fingerprint and the server's RDB
format version (a server only loads RDB versions it knows):

    <cache>/<fingerprint>-rdb<version>.rdb    the snapshot
    <cache>/<fingerprint>-rdb<version>.json   the plan it holds (for people and `ls`)

Writes go to a temporary file in the same directory and are renamed into place, so a reader
sees a whole file or none. A per-entry lock (flock on `<entry>.lock`) makes a second process
that wants to store the same entry wait and then find it already there, instead of both
copying gigabytes at once; a second one (`<entry>.prepare.lock`, `preparing`) is held over the
whole preparation, so that lanes and sides that need the same data prepare it once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import redis

from .base import DatasetError, DatasetPlan

RDB_MAGIC = b"REDIS"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def rdb_version_of_file(path: Path) -> int:
    """The format version in an RDB file's 9-byte header ("REDIS0010" -> 10)."""
    with open(path, "rb") as fh:
        header = fh.read(9)
    if len(header) != 9 or not header.startswith(RDB_MAGIC) or not header[5:].isdigit():
        raise DatasetError(f"{path} is not an RDB file (header {header!r})")
    return int(header[5:])


def _server_rdb_path(client: redis.Redis) -> Path:
    directory = client.config_get("dir").get("dir")
    filename = client.config_get("dbfilename").get("dbfilename")
    if not directory or not filename:
        raise DatasetError("the server did not report its dir/dbfilename (CONFIG GET)")
    return Path(directory) / filename


def save_on_server(*, host: str, port: int) -> Path:
    """SAVE on a local server; returns the path of the RDB file it wrote."""
    if host not in LOCAL_HOSTS:
        raise DatasetError(f"snapshots need a server on this machine, not {host}:{port}")
    client = redis.Redis(host=host, port=port, socket_timeout=3600)
    try:
        client.save()
        path = _server_rdb_path(client)
    except redis.RedisError as exc:
        raise DatasetError(f"SAVE on {host}:{port} failed: {exc}") from exc
    finally:
        client.close()
    if not path.is_file():
        raise DatasetError(f"SAVE on {host}:{port} reported success but {path} does not exist")
    return path


def server_rdb_version(*, host: str, port: int) -> int:
    """RDB format version the server writes (SAVE, then read the header; cheap when empty)."""
    return rdb_version_of_file(save_on_server(host=host, port=port))


class SnapshotCache:
    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def path_for(self, plan: DatasetPlan, rdb_version: int) -> Path:
        return self.directory / f"{plan.fingerprint()}-rdb{int(rdb_version)}.rdb"

    def lookup(self, plan: DatasetPlan, rdb_version: int) -> Path | None:
        path = self.path_for(plan, rdb_version)
        return path if path.is_file() else None

    @contextmanager
    def _locked(self, entry: Path) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(entry.with_suffix(".lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def preparing(self, plan: DatasetPlan, rdb_version: int, waiting=None) -> Iterator[None]:
        """Held while one process (a lane, a side, another redline) prepares `plan`'s data to save
        it here: another that wants the same entry waits, then finds it cached and restores it
        instead of preparing it a second time. A lock of its own (`<entry>.prepare.lock`), so that
        store_file's lock can be taken inside it. `waiting()` is called when another holds it."""
        entry = self.path_for(plan, rdb_version)
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(entry.with_suffix(".prepare.lock"), "a+b") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if waiting is not None:
                    waiting()
                fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write_atomically(self, target: Path, source: Path | None, text: str | None) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                if source is not None:
                    with open(source, "rb") as src:
                        shutil.copyfileobj(src, out, 1 << 20)
                else:
                    out.write((text or "").encode())
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def store_file(self, plan: DatasetPlan, rdb_file: Path) -> Path:
        """Add an RDB file holding `plan`'s data (no-op if that entry is already cached)."""
        version = rdb_version_of_file(rdb_file)
        entry = self.path_for(plan, version)
        with self._locked(entry):
            if entry.is_file():
                return entry
            self._write_atomically(entry.with_suffix(".json"), None,
                                   json.dumps({"rdb_version": version, **asdict(plan)}, indent=2))
            self._write_atomically(entry, rdb_file, None)
        return entry

    def store_from_server(self, plan: DatasetPlan, *, host: str, port: int) -> Path:
        """SAVE on the (local) server that holds `plan`'s data and cache the file."""
        return self.store_file(plan, save_on_server(host=host, port=port))

    def restore_to(self, plan: DatasetPlan, rdb_version: int, directory: Path | str,
                   dbfilename: str = "dump.rdb") -> Path | None:
        """Copy the cached snapshot to `directory/dbfilename` for a server to start from
        (`redis-server --dir directory --dbfilename dbfilename`); None if not cached."""
        source = self.lookup(plan, rdb_version)
        if source is None:
            return None
        target = Path(directory) / dbfilename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        return target
