"""redline.suites: the suite model, read from the upstream catalogue and from small broken files."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis

from redline.suites import (Diagnostic, SpecError, discover, load_test, parse_client_arguments,
                          parse_priority_range, resolve_suites, select, split_command)
from redline.suites import discovery

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO.parent / "shared" / "upstream-suites" / "test-suites"
needs_upstream = pytest.mark.skipif(
    not UPSTREAM.is_dir(), reason=f"upstream suites not found at {UPSTREAM} (../shared/upstream-suites)")
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"

GOOD = """\
version: 0.4
name: tiny-get
description: GET on 10 keys.
dbconfig:
  configuration-parameters:
    save: '""'
    maxmemory: 268435456
    appendonly: no
  check:
    keyspacelen: 10
  preload_tool:
    run_image: redislabs/memtier_benchmark:edge
    tool: memtier_benchmark
    arguments: '"--data-size" "10" "--ratio" "1:0" "--key-pattern" "P:P" "-c" "1" "-t" "1" "--key-minimum" "1" "--key-maximum" "10" "-n" "allkeys"'
    timeout: 60
  resources:
    requests:
      memory: 1g
tested-groups:
- string
tested-commands:
- get
redis-topologies:
- oss-standalone
build-variants:
- dockerhub
clientconfig:
  run_image: redislabs/memtier_benchmark:edge
  tool: memtier_benchmark
  arguments: --command "GET __key__" --key-minimum 1 --key-maximum 10
    -c 2 -t 1 --pipeline 10 --test-time 5 --hide-histogram
  resources:
    requests:
      cpus: '1'
priority: 7
"""


def write(tmp_path: Path, text: str, name: str = "suite.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def line_number(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def messages(spec, severity: str) -> list[str]:
    return [d.message for d in spec.diagnostics if d.severity == severity]


# -- a good file ---------------------------------------------------------------------------------
def test_good_file_builds_the_whole_model(tmp_path):
    spec = load_test(write(tmp_path, GOOD))
    assert spec.name == "tiny-get" and spec.version == "0.4" and spec.priority == 7
    assert spec.tested_commands == ["get"] and spec.tested_groups == ["string"]
    assert spec.topologies == ["oss-standalone"] and spec.build_variants == ["dockerhub"]
    assert spec.db.configuration_parameters == {"save": '""', "maxmemory": "268435456",
                                                "appendonly": "no"}
    assert spec.db.keyspacelen == 10
    assert spec.db.preload.tool == "memtier_benchmark" and spec.db.preload.timeout_seconds == 60
    assert spec.db.preload.arguments[:4] == ["--data-size", "10", "--ratio", "1:0"]
    assert spec.db.preload.workload.requests == 9 + 1  # allkeys, P:P, one connection: 9 // 1 + 1
    assert spec.client.arguments[:2] == ["--command", "GET __key__"]
    assert spec.client.line == line_number(GOOD, "  arguments: --command")
    wl = spec.client.workload
    assert wl.commands == [["GET", "__key__"]] and wl.read_only is True
    assert (wl.clients, wl.threads, wl.pipeline, wl.test_time) == (2, 1, 10, 5)
    assert not spec.has_errors and not spec.has_warnings
    ignored = {d.message.split(":")[0]: d.line for d in spec.diagnostics if d.severity == "ignored"}
    assert ignored["dbconfig.resources"] == line_number(GOOD, "  resources:")
    assert "clientconfig.run_image" in ignored and "dbconfig.preload_tool.run_image" in ignored


# -- upstream catalogue --------------------------------------------------------------------------
@needs_upstream
def test_all_upstream_suites_load_without_fatal_errors():
    found = discover([str(UPSTREAM)])
    assert len(found.files) == 490
    assert [p.name for p in found.skipped] == ["defaults.yml"]
    specs = resolve_suites([str(UPSTREAM)])
    assert len(specs) == 490 and len({s.name for s in specs}) == 490
    for spec in specs:  # every key of every file was either understood or reported
        assert all(isinstance(d, Diagnostic) and d.line for d in spec.diagnostics)
    geo = [s for s in specs if s.db.dataset_name == "1key-geo-60M-elements"]
    assert len(geo) >= 9 and all(s.db.dataset_url.startswith("https://") for s in geo)
    assert all(s.db.keyspacelen == 1 for s in geo)


@needs_upstream
def test_upstream_typo_ersion_is_a_warning():
    path = UPSTREAM / "memtier_benchmark-10Kkeys-load-list-rpush-bulkload-pipeline-50.yml"
    spec = load_test(path)
    assert spec.version is None and not spec.has_errors
    typo = [d for d in spec.diagnostics if "'ersion'" in d.message]
    assert typo and typo[0].severity == "warning" and typo[0].line == 1
    assert "did you mean 'version'" in typo[0].message


@needs_upstream
def test_upstream_value_placeholder_is_flagged():
    spec = load_test(UPSTREAM / "memtier_benchmark-1Mkeys-string-setex-100B-pipeline-10.yml")
    assert spec.client.workload.placeholder_warnings == ["__value__"]
    assert any("__value__" in m and "sent literally" in m for m in messages(spec, "warning"))


@needs_upstream
def test_upstream_geo_search_workload():
    spec = load_test(UPSTREAM / "memtier_benchmark-1key-geo-60M-elements-geosearch-fromlonlat-bybox.yml")
    wl = spec.client.workload
    assert wl.commands == [["GEOSEARCH", "key", "FROMLONLAT", "7.0", "55.0", "BYBOX", "200", "200", "KM"]]
    assert (wl.clients, wl.threads, wl.test_time, wl.read_only) == (2, 4, 180, True)
    assert spec.db.preload is None and spec.priority == 158


def _start_redis(tmp_path: Path):
    for _ in range(5):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=port)
        for _ in range(100):
            try:
                if client.ping():
                    return proc, client
            except redis.ConnectionError:
                if proc.poll() is not None:
                    break
                time.sleep(0.05)
        proc.kill()
        proc.wait()
    pytest.fail("could not start redis-server")


@pytest.fixture
def redis_server(tmp_path):
    if not Path(REDIS_SERVER).exists():
        pytest.skip("redis-server is not installed")
    proc, client = _start_redis(tmp_path)
    yield client
    client.close()
    proc.kill()
    proc.wait(timeout=10)


@needs_upstream
def test_upstream_init_commands_build_the_checked_keyspace_on_a_real_server(redis_server):
    """Every upstream suite filled by init_commands alone: run our argv on redis-server 7.0
    and compare the key count with the file's own check.keyspacelen."""
    candidates = [s for s in resolve_suites([str(UPSTREAM)])
                  if s.db.init_commands and not s.db.preload and not s.db.init_lua
                  and s.db.keyspacelen is not None]
    assert len(candidates) >= 40
    checked, unsupported = 0, []
    for spec in candidates:
        redis_server.flushall()
        try:
            for argv in spec.db.init_commands:
                redis_server.execute_command(*argv)
        except redis.ResponseError as exc:
            if "unknown command" in str(exc) or "unknown subcommand" in str(exc):
                unsupported.append(spec.name)  # newer than this server: not our parsing
                continue
            raise AssertionError(f"{spec.path}: {argv[:3]}...: {exc}") from None
        assert redis_server.dbsize() == spec.db.keyspacelen, spec.path
        checked += 1
    assert checked >= 40, (checked, unsupported)
    # element counts that the names promise, built by tokens we split ourselves
    by_name = {s.name: s for s in candidates}
    redis_server.flushall()
    for argv in by_name["memtier_benchmark-1key-set-1K-elements-smembers"].db.init_commands:
        redis_server.execute_command(*argv)
    assert redis_server.scard("set:1000") == 1000
    redis_server.flushall()
    for argv in by_name["memtier_benchmark-1key-hash-1K-fields-hgetall"].db.init_commands:
        redis_server.execute_command(*argv)
    assert redis_server.hlen("hash:1000") == 1000


# -- broken files, one problem each --------------------------------------------------------------
def test_yaml_syntax_error_names_file_and_line(tmp_path):
    text = "version: 0.4\nname: x\ndbconfig:\n  check: [1, 2\nclientconfig: {}\n"
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_test(path)
    err = info.value
    assert err.path == path and err.line in (4, 5)
    assert str(err).startswith(f"{path}:{err.line}: YAML syntax error")


def test_tab_indentation_error_line(tmp_path):
    text = GOOD.replace("  check:\n", "  check:\n\t\n", 1)
    with pytest.raises(SpecError) as info:
        load_test(write(tmp_path, text))
    assert info.value.line == line_number(text, "\t")


@pytest.mark.parametrize("text,message", [
    ("", "empty file"),
    ("- a\n- b\n", "must be a mapping"),
])
def test_not_a_mapping(tmp_path, text, message):
    with pytest.raises(SpecError, match=message):
        load_test(write(tmp_path, text))


def test_wrong_types_are_errors_at_their_lines(tmp_path):
    text = (GOOD.replace("priority: 7", "priority: high")
            .replace("tested-commands:\n- get", "tested-commands: get")
            .replace("keyspacelen: 10", "keyspacelen: -3")
            .replace("name: tiny-get", "name: [a, b]"))
    spec = load_test(write(tmp_path, text))
    errors = {d.message: d.line for d in spec.diagnostics if d.severity == "error"}
    assert errors["priority must be an integer, got a string ('high')"] == line_number(text, "priority:")
    assert errors["tested-commands must be a list of strings, got a string ('get')"] == \
        line_number(text, "tested-commands:")
    assert errors["dbconfig.check.keyspacelen must be at least 0, got -3"] == \
        line_number(text, "keyspacelen:")
    assert errors["name must be a string, got a list"] == line_number(text, "name:")
    assert spec.priority is None and spec.db.keyspacelen is None and spec.name == "suite"
    assert spec.has_errors


def test_missing_clientconfig_is_fatal(tmp_path):
    text = GOOD[:GOOD.index("clientconfig:")] + "priority: 7\n"
    path = write(tmp_path, text)
    with pytest.raises(SpecError, match="missing 'clientconfig'") as info:
        load_test(path)
    assert str(info.value).startswith(f"{path}:1: ")


def test_clientconfig_without_arguments_is_fatal(tmp_path):
    text = GOOD.replace("  arguments: --command \"GET __key__\" --key-minimum 1 --key-maximum 10\n"
                        "    -c 2 -t 1 --pipeline 10 --test-time 5 --hide-histogram\n", "")
    with pytest.raises(SpecError, match="clientconfig: missing 'arguments'"):
        load_test(write(tmp_path, text))


def test_unbalanced_shell_quote_is_fatal_with_line(tmp_path):
    text = GOOD.replace('--command "GET __key__"', '--command "GET __key__')
    with pytest.raises(SpecError, match="cannot split like a shell") as info:
        load_test(write(tmp_path, text))
    assert info.value.line == line_number(text, '--command "GET __key__')


def test_unknown_memtier_flag_names_flag_and_its_line(tmp_path):
    text = GOOD.replace("-c 2 -t 1", "-c 2 --connections-per-thread 3 -t 1")
    spec = load_test(write(tmp_path, text))
    errors = [d for d in spec.diagnostics if d.severity == "error"]
    assert len(errors) == 1
    assert "unknown memtier_benchmark flag --connections-per-thread" in errors[0].message
    assert errors[0].line == line_number(text, "--connections-per-thread")
    assert errors[0].line != spec.client.line  # the continuation line, not `arguments:`
    assert str(errors[0]).startswith(f"{spec.path}:{errors[0].line}: error:")


def test_placeholder_warning_in_file(tmp_path):
    text = GOOD.replace('--command "GET __key__"', '--command "SET __key__ __value__"')
    spec = load_test(write(tmp_path, text))
    assert spec.client.workload.placeholder_warnings == ["__value__"]
    warnings = [d for d in spec.diagnostics if d.severity == "warning"]
    assert len(warnings) == 1 and "__value__" in warnings[0].message
    assert warnings[0].line == line_number(text, "__value__")
    assert spec.client.workload.read_only is False


def test_ersion_typo_in_small_file(tmp_path):
    spec = load_test(write(tmp_path, GOOD.replace("version: 0.4", "ersion: 0.4")))
    assert spec.version is None and not spec.has_errors
    assert {d.severity for d in spec.diagnostics if "ersion" in d.message} == {"warning"}


def test_other_version_and_unknown_keys_warn(tmp_path):
    text = GOOD.replace("version: 0.4", "version: 0.5").replace(
        "  check:", "  chek:\n    keyspacelen: 1\n  check:")
    spec = load_test(write(tmp_path, text))
    warnings = {d.message: d.line for d in spec.diagnostics if d.severity == "warning"}
    assert warnings["version 0.5: redline reads version 0.4; keys may be misread"] == 1
    assert warnings["unknown key 'dbconfig.chek' is not used (did you mean 'check'?)"] == \
        line_number(text, "chek:")


def test_duplicate_key_is_an_error(tmp_path):
    text = GOOD.replace("priority: 7", "priority: 7\npriority: 8")
    spec = load_test(write(tmp_path, text))
    dup = [d for d in spec.diagnostics if "duplicate key 'priority'" in d.message]
    assert dup and dup[0].severity == "error" and dup[0].line == line_number(text, "priority: 8")
    assert spec.priority == 8


def test_unsafe_yaml_tag_is_rejected_with_line(tmp_path):
    text = GOOD.replace("priority: 7", "priority: !!python/object:os.system 1")
    with pytest.raises(SpecError) as info:
        load_test(write(tmp_path, text))
    assert info.value.line == line_number(text, "priority:")


def test_missing_path_raises(tmp_path):
    missing = tmp_path / "nope.yml"
    with pytest.raises(SpecError) as info:
        resolve_suites([str(missing)])
    assert "no such suite file, directory or built-in suite: " + str(missing) in str(info.value)
    assert info.value.line is None


# -- redline: extensions ---------------------------------------------------------------------
def test_redline_extension_block(tmp_path):
    spec = load_test(write(tmp_path, GOOD + "redline:\n  dataset-scale: 0.01\n  expect-misses: true\n"))
    assert spec.extensions == {"dataset-scale": 0.01, "expect-misses": True}
    assert spec.dataset_scale == 0.01 and not spec.has_errors


@pytest.mark.parametrize("block,message", [
    ("  dataset-scal: 0.5\n", "unknown key 'redline.dataset-scal' (did you mean 'dataset-scale'?)"),
    ("  dataset-scale: big\n", "redline.dataset-scale must be a number, got a string ('big')"),
    ("  dataset-scale: 0\n", "redline.dataset-scale must be above 0, got 0"),
    ("  expect-misses: 3\n", "redline.expect-misses must be true or false"),
])
def test_redline_extension_errors(tmp_path, block, message):
    text = GOOD + "redline:\n" + block
    spec = load_test(write(tmp_path, text))
    errors = [d for d in spec.diagnostics if d.severity == "error"]
    assert len(errors) == 1 and errors[0].message.startswith(message)
    assert errors[0].line == len(text.splitlines())
    assert spec.dataset_scale == 1.0


# -- dbconfig details ----------------------------------------------------------------------------
def test_init_commands_forms(tmp_path):
    text = GOOD.replace("  check:", """\
  init_commands:
  - '"SADD" "set:3" "a b" "c"'
  - EVAL "return redis.call('SET','k','v')" 0
  - [SCRIPT, LOAD, "return 1"]
  - '"SET" "bin" "\\x41\\n"'
  init_lua: return 1
  check:""")
    spec = load_test(write(tmp_path, text))
    assert spec.db.init_commands == [
        ["SADD", "set:3", "a b", "c"],
        ["EVAL", "return redis.call('SET','k','v')", "0"],
        ["SCRIPT", "LOAD", "return 1"],
        ["SET", "bin", "A\n"],
    ]
    assert spec.db.init_lua == "return 1"
    single = load_test(write(tmp_path, GOOD.replace("  check:", "  init_commands: SET a 1\n  check:"),
                             "single.yml"))
    assert single.db.init_commands == [["SET", "a", "1"]]


def test_keyspacelen_without_anything_to_fill_it_warns(tmp_path):
    start = GOOD.index("  preload_tool:")
    text = GOOD[:start] + GOOD[GOOD.index("  resources:"):]
    spec = load_test(write(tmp_path, text))
    assert any("nothing fills the database" in m for m in messages(spec, "warning"))


def test_unreachable_keyspace_is_a_warning_at_the_check_line(tmp_path):
    # no -n: memtier's default of 10,000 SETs on one connection can create at most 30,000 keys
    text = GOOD.replace(' "-n" "allkeys"', "").replace("keyspacelen: 10\n", "keyspacelen: 50000\n")
    spec = load_test(write(tmp_path, text))
    (warning,) = [d for d in spec.diagnostics if "cannot be reached" in d.message]
    assert warning.severity == "warning" and warning.line == line_number(text, "keyspacelen:")
    assert warning.message == ("check.keyspacelen 50,000 cannot be reached: the preload's 10,000 requests "
                               "(10,000 per connection × 1 connection; no -n, so memtier's default of 10,000 "
                               "per connection) can create at most 30,000 keys (one per argument at most)")
    reachable = load_test(write(tmp_path, text.replace("keyspacelen: 50000", "keyspacelen: 10000"), "ok.yml"))
    assert not any("cannot be reached" in d.message for d in reachable.diagnostics)


@needs_upstream
def test_only_the_upstream_mset_load_suites_have_an_unreachable_keyspace():
    flagged = {s.name for s in resolve_suites([str(UPSTREAM)])
               if any("cannot be reached" in d.message for d in s.diagnostics)}
    assert flagged == {f"memtier_benchmark-10Mkeys-load-string-mset-{n}-keys-with-{size}-values"
                       for n, size in [(10, "1000B"), (10, "100B"), (10, "10B"), (50, "100B"), (50, "10B")]}


def test_client_groups_and_roles_are_read_and_other_tools_warn(tmp_path):
    text = GOOD[:GOOD.index("clientconfig:")] + """\
clientconfigs:
- tool: memtier_benchmark
  arguments: --command "LPUSH q __data__" -c 1 -t 1 --test-time 5
- tool: sidekiq-bench
  arguments: --workers 50
"""
    spec = load_test(write(tmp_path, text))
    assert [c.tool for c in spec.clients] == ["memtier_benchmark", "sidekiq-bench"]
    assert spec.client.tool == "sidekiq-bench" and spec.multi_client
    assert spec.client.workload is None and spec.clients[0].workload.commands == [["LPUSH", "q", "__data__"]]
    assert not messages(spec, "warning") and not messages(spec, "error")
    bad = load_test(write(tmp_path, text.replace("--workers 50", "--workers 50 --priorities 4")))
    assert any("sidekiq-bench: unknown flag '--priorities'" in m for m in messages(bad, "error"))
    other = load_test(write(tmp_path, text.replace("sidekiq-bench", "mystery-bench")))
    assert any("'mystery-bench' is neither memtier_benchmark-compatible nor one of redline-load's roles" in m
               for m in messages(other, "warning"))


# -- memtier arguments ---------------------------------------------------------------------------
def test_parse_client_arguments_typed_fields():
    wl = parse_client_arguments([
        "--command=HSET __key__ f __data__", "--command-ratio", "3", "--command-key-pattern=G",
        "--command", "HGET __key__ f", "--key-prefix", "", "--key-minimum", "5",
        "--key-maximum=500", "-c5", "-t", "2", "--pipeline=16", "-R", "--data-size-range=1-64",
        "--test-time", "30", "--rate-limiting", "100", "--print-percentiles", "50,99.9"])
    assert wl.commands == [["HSET", "__key__", "f", "__data__"], ["HGET", "__key__", "f"]]
    assert wl.command_ratios == [3, 1] and wl.command_key_patterns == ["G", "R"]
    assert (wl.key_prefix, wl.key_minimum, wl.key_maximum) == ("", 5, 500)
    assert (wl.clients, wl.threads, wl.connections, wl.pipeline) == (5, 2, 10, 16)
    assert wl.random_data and wl.data_size_range == (1, 64) and wl.data_size is None
    assert (wl.test_time, wl.requests, wl.rate_limiting) == (30, None, 100)
    assert wl.read_only is False and wl.problems == []


def test_memtier_defaults_and_builtin_set_get_mix():
    wl = parse_client_arguments([])
    assert (wl.clients, wl.threads, wl.pipeline, wl.data_size) == (50, 4, 1, 32)
    assert (wl.key_prefix, wl.key_minimum, wl.key_maximum, wl.requests) == ("memtier-", 0, 10_000_000, 10_000)
    assert wl.commands == [["SET", "__key__", "__data__"], ["GET", "__key__"]]
    assert wl.command_ratios == [1, 10] and wl.read_only is False
    assert parse_client_arguments(["--ratio", "0:1"]).read_only is True
    assert parse_client_arguments(["--ratio=1:0"]).read_only is False


@pytest.mark.parametrize("commands,expected", [
    (["GET __key__"], True),
    (["GET __key__", "HGETALL __key__", "ZRANGE __key__ 0 -1 WITHSCORES"], True),
    (["GET __key__", "SET __key__ __data__"], False),
    (["PING"], None),
    (["EVALSHA abc 0"], None),
    (["FT.SEARCH idx *"], None),
    (["OBJECT ENCODING __key__"], True),
    (["XREADGROUP GROUP g c STREAMS s >"], False),
])
def test_read_only_classification(commands, expected):
    argv = [part for cmd in commands for part in ("--command", cmd)]
    assert parse_client_arguments(argv).read_only is expected


@pytest.mark.parametrize("argv,fragment", [
    (["--bogus"], "unknown memtier_benchmark flag --bogus"),
    (["-q"], "unknown memtier_benchmark flag -q"),
    (["--pipeline", "zero"], "--pipeline needs an integer, got 'zero'"),
    (["--pipeline", "0"], "--pipeline must be at least 1"),
    (["--test-time", "5", "-n", "100"], "mutually exclusive"),
    (["--command-ratio", "2"], "must follow the --command"),
    (["--key-pattern", "R"], "--key-pattern must look like X:Y"),
    (["--ratio", "1-10"], "--ratio must look like SET:GET"),
    (["--key-minimum", "10", "--key-maximum", "5"], "is above --key-maximum"),
    (["--command", "SET \"a b"], "unbalanced double quote"),
    (["--hide-histogram=yes"], "takes no value"),
    (["--pipeline"], "--pipeline needs a value"),
    (["--command", "SET __key__ x", "--ratio", "1:0"], "--ratio cannot be combined with --command"),
    (["--key-pattern", "P:P", "--command", "SET __key__ x"], "--key-pattern cannot be combined with --command"),
    (["--command", "SET __key__ x", "--command-key-pattern", "P", "--command", "GET __key__"],
     "--command-key-pattern P is given for 1 of 2 --command options"),
    (["--key-pattern", "P:R"], "the parallel pattern P must be given for both SET and GET"),
    (["--cluster-mode", "--reconnect-interval", "10"], "--cluster-mode cannot be combined with --reconnect-interval"),
    (["--protocol", "memcache_text"], "not supported"),
])
def test_argument_errors(argv, fragment):
    problems = parse_client_arguments(argv).errors
    assert any(fragment in p.message for p in problems), problems


def test_stray_argument_is_a_warning_naming_the_cut_command():
    wl = parse_client_arguments(["--command=HSET s:__key__ a 1 name User", "__key__ b 2", "-c", "2"])
    assert not wl.errors and wl.clients == 2
    assert wl.commands == [["HSET", "s:__key__", "a", "1", "name", "User"]]
    (problem,) = wl.problems
    assert problem.severity == "warning" and problem.token == "__key__ b 2"
    assert "memtier_benchmark ignores it" in problem.message
    assert "runs cut, as 'HSET s:__key__ a 1 name User'" in problem.message


def test_abbreviated_and_redline_owned_flags_warn():
    wl = parse_client_arguments(["--pipel", "4", "--server", "10.0.0.1", "-p", "6380"])
    assert wl.pipeline == 4 and not wl.errors
    warnings = [p.message for p in wl.problems]
    assert "abbreviated flag --pipel read as --pipeline" in warnings
    assert "--server is set by redline (where the load goes); the suite's value is dropped" in warnings
    assert any("--port is set by redline" in m for m in warnings)
    assert [p.owned for p in wl.problems] == [False, True, True]
    ambiguous = parse_client_arguments(["--data-size-r", "1-2", "--key-m", "3"]).errors
    assert any("ambiguous memtier_benchmark flag --key-m" in p.message for p in ambiguous)


def test_allkeys_requests_like_memtier():
    wl = parse_client_arguments(["-n", "allkeys", "--key-minimum", "1", "--key-maximum", "1000001",
                                 "--key-pattern", "P:P", "-c", "50", "-t", "4"])
    assert wl.requests == 1_000_000 // 200 + 1 and wl.requests_allkeys


def test_split_command_quoting():
    assert split_command('SET k "a b"') == ["SET", "k", "a b"]
    assert split_command("SET k 'it\\'s'") == ["SET", "k", "it's"]
    assert split_command('SET k "\\x41\\t\\"q\\""') == ["SET", "k", 'A\t"q"']
    assert split_command('  SET   k  ""  ') == ["SET", "k", ""]
    with pytest.raises(ValueError, match="followed by a space"):
        split_command('SET "a"b')
    with pytest.raises(ValueError, match="unbalanced single quote"):
        split_command("SET 'a")


# -- discovery and filters -----------------------------------------------------------------------
def test_directory_recursion_skips_defaults_and_deduplicates(tmp_path):
    (tmp_path / "a" / "deep").mkdir(parents=True)
    write(tmp_path / "a", GOOD, "one.yml")
    write(tmp_path / "a" / "deep", GOOD.replace("tiny-get", "tiny-get-2"), "two.yaml")
    write(tmp_path / "a", "exporter:\n  redistimeseries:\n    metrics: []\n", "defaults.yml")
    write(tmp_path / "a", "not yaml at all", "notes.txt")
    (tmp_path / "a" / ".hidden").mkdir()
    write(tmp_path / "a" / ".hidden", GOOD, "x.yml")
    found = discover([str(tmp_path / "a"), str(tmp_path / "a" / "one.yml")])
    assert [p.name for p in found.files] == ["two.yaml", "one.yml"] or \
        [p.name for p in found.files] == ["one.yml", "two.yaml"]
    assert len(found.files) == 2 and [p.name for p in found.skipped] == ["defaults.yml"]
    assert sorted(s.name for s in resolve_suites([str(tmp_path / "a")])) == ["tiny-get", "tiny-get-2"]


def test_builtin_suite_by_name(tmp_path, monkeypatch):
    base = tmp_path / "suites"
    (base / "quick").mkdir(parents=True)
    (base / "empty").mkdir()
    write(base / "quick", GOOD, "get.yml")
    monkeypatch.setattr(discovery, "builtin_suites_dir", lambda: base)
    assert discovery.builtin_suites() == ["quick"]
    assert [s.name for s in resolve_suites(["quick"])] == ["tiny-get"]
    with pytest.raises(SpecError, match=r"built-in suites: quick"):
        resolve_suites(["standard"])


def test_select_filters(tmp_path):
    specs = []
    for i, (group, command, prio, topo) in enumerate([
            ("string", "get", 1, "oss-standalone"), ("hash", "hgetall", 50, "oss-standalone"),
            ("hash", "client|list", 51, "oss-cluster-3-primaries"), ("geo", "geosearch", None, "oss-standalone")]):
        text = (GOOD.replace("name: tiny-get", f"name: test-{i}-{command.replace('|', '-')}")
                .replace("- string", f"- {group}").replace("- get", f"- {command}")
                .replace("- oss-standalone", f"- {topo}")
                .replace("priority: 7", f"priority: {prio}" if prio is not None else ""))
        specs.append(load_test(write(tmp_path, text, f"{i}.yml")))
    names = lambda tests: [t.name.split("-")[1] for t in tests]  # noqa: E731
    assert names(select(specs, None)) == ["0", "1", "2", "3"]
    assert names(select(specs, r"-[12]-")) == ["1", "2"]
    assert names(select(specs, None, group="HASH")) == ["1", "2"]
    assert names(select(specs, None, command="client")) == ["2"]
    assert names(select(specs, None, command="client|list")) == ["2"]
    assert names(select(specs, None, priority="1:50")) == ["0", "1"]
    assert names(select(specs, None, priority="51:")) == ["2"]
    assert names(select(specs, None, topology="oss-standalone")) == ["0", "1", "3"]
    assert names(select(specs, "test", group="hash", priority=parse_priority_range(":50"))) == ["1"]
    with pytest.raises(ValueError, match="invalid name regex"):
        select(specs, "(")


@pytest.mark.parametrize("text,low,high", [("1:50", 1, 50), ("7", 7, 7), (":9", None, 9), ("3:", 3, None)])
def test_priority_range(text, low, high):
    rng = parse_priority_range(text)
    assert (rng.low, rng.high) == (low, high)


@pytest.mark.parametrize("text", ["a:b", "9:1", "1:x"])
def test_bad_priority_range(text):
    with pytest.raises(ValueError):
        parse_priority_range(text)
