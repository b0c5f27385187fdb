"""Two redline processes on one store (the accuracy runner's background run beside a second one)
must not damage it. SQLite keeps a store's WAL safe with POSIX locks, and closing any descriptor of
the file drops every such lock the process holds: a plain read of the store's header beside an open
connection (what every `Store(path)` did first) let another process see the store unused, checkpoint
and delete the WAL mid-write ('database disk image is malformed'). Checked here on the mechanism: a
store's connection keeps its shared lock on the database file through later checks and opens."""

from __future__ import annotations

import subprocess
import sys

from redline.store.results import Store, inspect_store_file

# What another process sees: can it take SQLite's shared-lock bytes of the file exclusively?
PROBE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 0x40000002, 0)   # SQLite's SHARED_FIRST, SHARED_SIZE
    print("free")
except OSError:
    print("held")
"""


def _seen_from_another_process(path) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()


def test_an_open_store_keeps_its_lock_through_later_checks_and_opens(tmp_path):
    path = tmp_path / "s.db"
    store = Store(path)
    store.begin_session(kind="run", argv=[], machine={})
    assert _seen_from_another_process(path) == "held"      # WAL: an open connection holds SHARED on the file
    assert inspect_store_file(path) is True
    Store(path).noise_floors()                               # a second store object, as a session opens one
    assert _seen_from_another_process(path) == "held"
    store.close()


def test_another_process_writing_beside_an_open_store_loses_nothing(tmp_path):
    """The sequence that damaged the accuracy run's store: this process holds the store open and
    writes, checks the store again (as every new Store(path) did), and another process opens it,
    writes and closes it, round after round; a last connection, as far as it can tell, checkpoints
    and deletes the WAL. Every write of both must be there."""
    path = tmp_path / "s.db"
    store = Store(path)
    mine = store.begin_session(kind="run", argv=[], machine={})
    other = ("import sys\nfrom redline.store.results import Store\ns = Store(sys.argv[1])\n"
             "s.save_session_document(s.begin_session(kind='run', argv=[], machine={}), 'theirs', {})\ns.close()\n")
    for i in range(5):
        store.save_session_document(store.begin_session(kind="run", argv=[], machine={}), "mine", {"i": i})
        inspect_store_file(path)
        subprocess.run([sys.executable, "-c", other, str(path)], check=True, timeout=120)
    store.save_session_document(mine, "last", {})
    store.close()
    again = Store(path)
    assert again.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert len(again.documents_named("mine")) == 5 and len(again.documents_named("theirs")) == 5
    assert again.session_document(mine, "last") == {}
