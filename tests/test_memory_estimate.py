"""The preload size estimate that guards memory, checked against what a real server holds."""
from __future__ import annotations

import pytest

from conftest import start_redis_server
from redline.load import LoadRequest, run_load
from redline.preparation import estimated_preload_bytes
from redline.spec import load_test

SUITE = """\
version: 0.4
name: estimate-{fields}
dbconfig:
  configuration-parameters:
    hash-max-listpack-entries: '{listpack_entries}'
  preload_tool:
    tool: memtier_benchmark
    arguments: '--data-size-range=8-24 --random-data --key-prefix entity: --command "HSET __key__ {pairs}"
      --command-key-pattern P -n allkeys --key-minimum 1 --key-maximum {keys} -c 4 -t 1 --pipeline 20'
tested-commands:
- hget
clientconfig:
  tool: memtier_benchmark
  arguments: --command "HGET __key__ feature_1" --test-time 1
"""


# listpacks (50 and 300 fields under the default limit of 512), then the suite's own limit of 128
# turning 300 fields into a hash table (an upstream feature-store suite does this: 4x the memory)
@pytest.mark.parametrize("fields, keys, listpack_entries", [(50, 20_000, 512), (300, 2_000, 512),
                                                            (300, 2_000, 128)])
def test_estimate_is_close_to_the_memory_a_real_preload_takes(tmp_path, fields, keys, listpack_entries):
    pairs = " ".join(f"feature_{i} __data__" for i in range(1, fields + 1))
    path = tmp_path / "suite.yml"
    path.write_text(SUITE.format(fields=fields, pairs=pairs, keys=keys, listpack_entries=listpack_entries))
    test = load_test(path)
    server = start_redis_server(tmp_path, **test.db.configuration_parameters)
    try:
        before = server.client().info("memory")["used_memory"]
        run_load(LoadRequest(arguments=test.db.preload.arguments, host=server.host, port=server.port,
                             json_path=tmp_path / "preload.json"), timeout_s=120)
        assert server.client().dbsize() == keys          # four connections: each writes its share once
        used = server.client().info("memory")["used_memory"] - before
    finally:
        server.stop()
    estimate = estimated_preload_bytes(test)
    assert 0.7 * used <= estimate <= 1.5 * used, (estimate, used)
