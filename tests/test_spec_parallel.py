"""memtier's parallel key pattern (P) as the suite check models it (redline/suites/parallel.py).

Pure logic: the counts below are the ones memtier_benchmark built from source produces against a
real redis-server (issue #23); tests/test_loadgen.py checks that redline-load builds them too.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from redline.suites import load_test, parse_client_arguments
from redline.suites.parallel import (claimed_elements, highest_key, members_warning, one_key_members,
                                   parallel_slices)

ZADD_PAIRS = ["--command", "ZADD lb __key__  __key__", "--command-key-pattern", "P", "--key-prefix", ""]


def workload(*argv: str | int):
    wl = parse_client_arguments([str(a) for a in argv])
    assert not wl.errors, wl.errors
    return wl


def test_slices_are_memtiers_not_an_exact_split():
    assert parallel_slices(workload("--key-maximum", 250, "-t", 10, "-c", 1))[-2:] == [(208, 233), (234, 250)]
    # 200 connections over 1..10: one key each, past the maximum; the last starts at 200
    streams = workload("--command", "XADD stream:__key__ * f __data__", "--command-key-pattern", "P",
                       "--key-minimum", 1, "--key-maximum", 10, "-c", 50, "-t", 4, "-n", 5)
    slices = parallel_slices(streams)
    assert slices[0] == (1, 1) and slices[-1] == (200, 200) and len(set(slices)) == 200
    assert highest_key(streams) == 200


@pytest.mark.parametrize("argv,members", [
    (["--key-maximum", 250, "-n", 25, "-t", 10, "-c", 1], 134),
    (["--key-maximum", 1000000, "-n", 100000, "-t", 10, "-c", 1], 949_996),
    (["--key-maximum", 1000000, "-t", 4, "-c", 100], 998_950),
    (["--key-maximum", 1000000, "-n", 1000000, "-t", 1, "-c", 1], 1_000_000),
    (["--key-minimum", 1, "--key-maximum", 2000000, "-n", 100000, "-t", 10, "-c", 1], 1_000_000),
])
def test_members_of_upstream_zset_preloads(argv, members):
    assert one_key_members(workload(*ZADD_PAIRS, *argv)) == ("lb", members)


def test_members_only_where_they_are_drawn_keys():
    assert one_key_members(workload("--command", "ZADD lb 1 __key__", "--command-key-pattern", "P",
                                    "--key-minimum", 1, "--key-maximum", 1000000, "-n", 100000,
                                    "-t", 10, "-c", 1)) == ("lb", 1_000_000)
    assert one_key_members(workload("--command", "ZADD k __key__ __data__", "--command-key-pattern", "P",
                                    "-n", 10)) is None
    assert one_key_members(workload("--command", "ZADD lb __key__ __key__", "-n", 10)) is None  # R


def test_claims_and_warning():
    assert claimed_elements("memtier_benchmark-1key-zset-1M-elements-zcard") == ("1M", 1_000_000)
    assert claimed_elements("x-250-elements", None) == ("250", 250)
    assert claimed_elements("1key-zrank-100K-elements-pipeline-1") == ("100K", 100_000)
    assert claimed_elements("no-claim") is None
    wl = workload(*ZADD_PAIRS, "--key-maximum", 250, "-n", 25, "-t", 10, "-c", 1)
    message = members_warning(wl, "1key-zset-250-elements-zadd")
    assert message.startswith("memtier_benchmark's preload builds 134 members in 'lb', not the 250 elements")
    assert members_warning(wl, "1key-zset-134-elements") is None


def preload_suite(tmp_path: Path, name: str, *, keys: int, preload: str, client: str) -> Path:
    """A suite whose preload arguments are on line 9 (continued on line 10)."""
    path = tmp_path / f"{name}.yml"
    path.write_text(f"""\
version: 0.4
name: {name}
description: a suite with a parallel preload.
dbconfig:
  check:
    keyspacelen: {keys}
  preload_tool:
    tool: memtier_benchmark
    arguments: {preload}
tested-commands:
- {client.split()[1].strip('"').lower()}
clientconfig:
  tool: memtier_benchmark
  arguments: {client} -c 1 -t 1 --test-time 5 --hide-histogram
priority: 7
""")
    return path


def test_suite_check_warns_at_the_preload_line(tmp_path: Path):
    path = preload_suite(tmp_path, "1key-zset-250-elements-zcard", keys=1, client='--command "ZCARD lb"',
                         preload='--command="ZADD lb __key__  __key__" --command-key-pattern=P --key-maximum 250\n'
                                 '      --key-prefix "" -n 25 -t 10 -c 1 --hide-histogram')
    spec = load_test(path)
    warnings = [d for d in spec.diagnostics if "members in 'lb'" in d.message]
    assert len(warnings) == 1 and warnings[0].severity == "warning" and warnings[0].line == 9
    assert "builds 134 members" in warnings[0].message and not spec.has_errors


def test_suite_check_warns_where_connections_write_above_the_key_maximum(tmp_path: Path):
    # memtier (and redline-load, tests/test_loadgen.py) writes streams 1..200 for this preload of
    # the upstream 10streams suite, not the 10 it describes: the check says so once, at its line.
    path = preload_suite(tmp_path, "10streams-xreadgroup", keys=10, client='--command "XLEN stream:1"',
                         preload='--data-size 100 --command "XADD stream:__key__ * field __data__"\n'
                                 '      --command-key-pattern P --key-minimum 1 --key-maximum 10 --key-prefix ""'
                                 ' -n 50 -c 50 -t 4')
    spec = load_test(path)
    warnings = [d for d in spec.diagnostics if "above --key-maximum" in d.message]
    assert [(w.severity, w.line) for w in warnings] == [("warning", 9)], spec.diagnostics
    assert "with 200 connections" in warnings[0].message
    assert "keys up to 200 are written, above --key-maximum 10" in warnings[0].message
    assert not spec.has_errors
