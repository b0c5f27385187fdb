"""The preload size estimate that guards memory, checked against what a real server holds."""
from __future__ import annotations

import pytest

from conftest import start_redis_server
from redline.load.redline_load import LoadRequest, run_load
from redline.bench.admission import estimated_preload_bytes
from redline.suites import load_test

SUITE = """\
version: 0.4
name: estimate
dbconfig:
  configuration-parameters:
    hash-max-listpack-entries: '{listpack_entries}'
  preload_tool:
    tool: memtier_benchmark
    arguments: '{data} --key-prefix entity: --command "{command}" --command-key-pattern P {requests}
      --key-minimum 1 --key-maximum {keys} -c 4 -t 1 --pipeline 20'
tested-commands:
- hget
clientconfig:
  tool: memtier_benchmark
  arguments: --command "HGET __key__ feature_1" --test-time 1
"""


def hset(fields: int) -> str:
    return "HSET __key__ " + " ".join(f"feature_{i} __data__" for i in range(1, fields + 1))


FEATURES = "--data-size-range=8-24 --random-data"
CASES = {
    # listpacks (50 and 300 fields under the default limit of 512) ...
    "50 fields, listpack": (hset(50), FEATURES, "-n allkeys", 20_000, 512),
    "300 fields, listpack": (hset(300), FEATURES, "-n allkeys", 2_000, 512),
    # ... then the suite's own limit of 128 turns 300 fields into a hash table (an upstream
    # feature-store suite does this: 4x the memory)
    "300 fields, hash table": (hset(300), FEATURES, "-n allkeys", 2_000, 128),
    # many pushes over few keys grow lists (an upstream LPOP suite: 128 elements per key)
    "LPUSH 50 per key": ("LPUSH __key__ __data__", "--data-size 10", "-n 25000", 2_000, 512),
    # many SETs over few keys rewrite the same keys
    "SET rewritten": ("SET __key__ __data__", "--data-size 100", "-n 25000", 20_000, 512),
}


@pytest.mark.parametrize("case", CASES)
def test_estimate_is_close_to_the_memory_a_real_preload_takes(tmp_path, case):
    command, data, requests, keys, listpack_entries = CASES[case]
    path = tmp_path / "suite.yml"
    path.write_text(SUITE.format(command=command, data=data, requests=requests, keys=keys,
                                 listpack_entries=listpack_entries))
    test = load_test(path)
    server = start_redis_server(tmp_path, **test.db.configuration_parameters)
    try:
        before = server.client().info("memory")["used_memory"]
        run_load(LoadRequest(arguments=test.db.preload.arguments, host=server.host, port=server.port,
                             json_path=tmp_path / "preload.json"), timeout_s=120)
        assert server.client().dbsize() == keys          # four connections: each writes its share
        used = server.client().info("memory")["used_memory"] - before
    finally:
        server.stop()
    estimate = estimated_preload_bytes(test)
    assert 0.7 * used <= estimate <= 1.5 * used, (estimate, used)


def test_a_preload_too_large_for_this_machine_is_refused_with_the_share_that_decides(tmp_path, monkeypatch):
    """14.9 GiB against 22.9 GiB available reads like it fits: the refusal names the share a
    dataset may take (60% here, 13.7 GiB) and how to shrink it."""
    from redline.bench import admission
    from redline.topology.spec import parse_topology

    path = tmp_path / "suite.yml"
    path.write_text(SUITE.format(command=hset(50), data=FEATURES, requests="-n allkeys", keys=1000,
                                 listpack_entries=512))
    test = load_test(path)
    monkeypatch.setattr(admission, "estimated_preload_bytes", lambda _test: int(14.9 * 2**30))
    monkeypatch.setattr(admission, "available_memory_bytes", lambda: int(22.9 * 2**30))
    reason = admission.unsupported_reason(test, parse_topology("oss-standalone"))
    assert reason == ("its preload needs about 14.9 GiB, more than a dataset may take here: 60% of the "
                      "22.9 GiB available, 13.7 GiB (shrink it with --scale)")
    monkeypatch.setattr(admission, "available_memory_bytes", lambda: int(30 * 2**30))
    assert admission.unsupported_reason(test, parse_topology("oss-standalone")) is None
