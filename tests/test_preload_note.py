"""The preload says once how its `-n allkeys` differs from memtier_benchmark (issue #23)."""
from __future__ import annotations

from pathlib import Path

from conftest import start_redis_server
from redline.bench.preparation import prepare
from redline.suites import load_test

SUITE = """\
version: 0.4
name: allkeys-note
description: 1,001 hashes preloaded by 9 connections with the parallel pattern.
dbconfig:
  check:
    keyspacelen: 1001
  preload_tool:
    tool: memtier_benchmark
    arguments: --command "HSET h:__key__ f __data__" --command-key-pattern P --key-minimum 1
      --key-maximum 1001 -n allkeys -c 9 -t 1 --hide-histogram
tested-commands:
- hget
clientconfig:
  tool: memtier_benchmark
  arguments: --command "HGET h:__key__ f" -c 1 -t 1 --test-time 1 --hide-histogram
priority: 1
"""


class Recorder:
    def __init__(self):
        self.notes: list[str] = []

    def phase(self, name, *, total=None, unit="s"):
        pass

    def progress(self, done, total=None):
        pass

    def note(self, text):
        self.notes.append(text)


def test_allkeys_preload_states_the_difference_once(tmp_path: Path):
    path = tmp_path / "suite.yml"
    path.write_text(SUITE)
    test = load_test(path)
    server = start_redis_server()
    try:
        observer = Recorder()
        facts = prepare(test, server, scale=None, observer=observer, client_cpus=None, workdir=tmp_path)
        assert facts["keyspace_length"] == 1001
        # memtier: 1,000 requests per connection; redline-load: each connection's 112 keys
        # (the last one's 105) once each
        (note,) = observer.notes
        assert note.startswith("preload: -n allkeys: 1001 requests where memtier_benchmark sends 9000")
        assert server.command_client().info("commandstats")["cmdstat_hset"]["calls"] == 1001
    finally:
        server.stop()
