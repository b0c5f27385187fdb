"""The suite checker and redline-load read a memtier_benchmark command line alike.

Both take what an option is from loadgen/memtier_options.tsv; what they check beyond that is
code on each side (redline/suites/memtier.py, loadgen/src/cli.rs). Here every memtier argument
line of the built-in and the upstream suites, every option of the table and a few hand-written
lines go to both (redline-load through its --check-arguments mode, many lines in one process,
after redline drops the options it owns, exactly as a run passes them), and the two must accept
and refuse the same lines.
"""
from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from redline.core.errors import RunError
from redline.load.redline_load import LoadRequest, loadgen_binary
from redline.suites import builtin_suites_dir, load_test, parse_client_arguments
from redline.suites import memtier_options
from redline.suites.memtier import without_options
from redline.suites.memtier_options import option_table
from redline.suites.owned import CLIENT_OPTIONS

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO.parent / "shared" / "upstream-suites" / "test-suites"
MEMTIER = os.environ.get("MEMTIER_BENCHMARK") or shutil.which("memtier_benchmark")
needs_upstream = pytest.mark.skipif(
    not UPSTREAM.is_dir(), reason=f"upstream suites not found at {UPSTREAM} (../shared/upstream-suites)")


def suite_lines(paths) -> list[tuple[str, list[str]]]:
    """(file:line, argv) of every memtier_benchmark invocation (clients and preload) in the files
    that redline's loader reads (files it cannot read at all have no line to compare)."""
    lines = []
    for path in paths:
        try:
            spec = load_test(path)
        except Exception:       # SpecError: not a test (upstream defaults.yml); test_spec covers these
            continue
        invocations = [*spec.clients, *([spec.db.preload] if spec.db.preload else [])]
        lines += [(f"{path.name}:{inv.line}", inv.arguments) for inv in invocations if inv.is_memtier]
    return lines


def python_verdict(argv: list[str]) -> str | None:
    """None when `redline suites validate` accepts the line, else its first error. Errors by
    redline's own rules (owned.py) are left out: redline-load is not asked about those."""
    errors = [p for p in parse_client_arguments(argv).errors if not p.owned and not p.redline_rule]
    return errors[0].message if errors else None


def as_run_passes_it(argv: list[str]) -> list[str]:
    """The arguments redline-load gets in a run: the suite's without redline's own options,
    then redline's (redline.load.redline_load.LoadRequest.argv)."""
    request = LoadRequest(arguments=argv, host="127.0.0.1", port=6379, json_path=Path("/tmp/unused.json"))
    return request.argv()[1:]


def rust_verdicts(argvs: list[list[str]]) -> list[str | None]:
    """redline-load's decision for each line (None: accepted), all lines through one process."""
    stdin = "".join(json.dumps(as_run_passes_it(argv)) + "\n" for argv in argvs)
    proc = subprocess.run([str(loadgen_binary()), "--check-arguments"], input=stdin, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(answers) == len(argvs), proc.stdout[-2000:]
    return [None if answer["ok"] else answer["error"] for answer in answers]


def disagreements(lines: list[tuple[str, list[str]]]) -> list[str]:
    rust = rust_verdicts([argv for _, argv in lines])
    return [f"{where}: {shlex.join(argv)}\n    suite check: {python or 'accepts'}\n    redline-load: {loadgen or 'accepts'}"
            for (where, argv), loadgen in zip(lines, rust)
            for python in [python_verdict(argv)]
            if (python is None) != (loadgen is None)]


def test_every_built_in_suite_line_is_read_alike():
    lines = suite_lines(sorted(builtin_suites_dir().glob("*/*.yml")))
    assert len(lines) >= 10, lines
    assert disagreements(lines) == []


@needs_upstream
def test_every_upstream_suite_line_is_read_alike():
    lines = suite_lines(sorted(UPSTREAM.glob("*.yml")))
    assert len(lines) > 800, len(lines)     # 490 suites: clients and preloads
    assert disagreements(lines) == []
    # the catalogue has lines both refuse (and the test would notice a parser accepting them)
    refused = [where for where, argv in lines if python_verdict(argv) is not None]
    assert len(refused) < len(lines) // 10, refused


def sample_lines() -> list[tuple[str, list[str]]]:
    """Every option of the table once, with a value of its type."""
    samples = {"protocol": "resp3", "print-percentiles": "50,99.9", "requests": "allkeys", "ratio": "1:0",
               "data-size-range": "1-8", "data-size-pattern": "S", "key-pattern": "S:S",
               "command-key-pattern": "G", "command": "SCAN 0", "io": "epoll"}
    lines = []
    for spec in option_table().values():
        argv = [] if spec.name in ("ratio", "key-pattern") else ["--command", "SCAN 0"]
        argv.append(f"--{spec.name}")
        if spec.takes_value:
            argv.append(samples.get(spec.name, "1" if spec.value in ("int", "float") else "text"))
        if spec.name == "thread-conn-start-min-jitter-micros":
            argv += ["--thread-conn-start-max-jitter-micros", "9"]
        lines.append((f"--{spec.name}", argv))
    return lines


def test_every_option_of_the_table_is_read_alike():
    lines = sample_lines()
    assert disagreements(lines) == []
    refused = {where for where, argv in lines if python_verdict(argv) is not None}
    assert refused == {f"--{s.name}" for s in option_table().values()
                       if s.status == "refused" and s.name not in CLIENT_OPTIONS}   # owned: dropped first


# (line, accepted?) — each former disagreement between the two parsers, and the edges of the
# rules that are code on both sides.
HAND_WRITTEN = [
    ("--expiry-range 1-10", False),                        # passed validate, refused by redline-load
    ("--data-size-list 10:1,20:1", False),                 # the same
    ("--data-offset 3", False),
    ("--monitor-input commands.txt", False),               # was a warning only
    ("--command 'SET __key__ x' --command-ratio 0 --command 'GET __key__'", True),  # was an error in validate
    ("--command 'SET __key__ x' --command-ratio 0", False),
    ("--client 5", False),                                 # ambiguous, not --clients
    ("--clients 5", True),
    ("--key-max 100", True),                               # a unique prefix
    ("--test-time 5 -n allkeys", False),                   # either order
    ("-n allkeys --test-time 5", False),
    ("-c 0", False),
    ("-c 4294967296", False),
    ("-c +5", False),
    ("-c5 -t1", True),
    ("--key-maximum 0", False),
    ("--key-minimum 0 --key-maximum 10", True),
    ("--key-minimum 11 --key-maximum 10", False),
    ("--reconnect-interval 0", False),
    ("--key-zipf-exp 5", False),
    ("--key-zipf-exp 4.5", True),
    ("--key-zipf-exp inf", False),
    ("--key-stddev 0", False),
    ("--ratio 0:0", False),
    ("--ratio 0:1", True),
    ("--ratio 1:4294967296", False),
    ("--data-size-range 5-4", False),
    ("--data-size-range 4-5", True),
    ("--print-percentiles 50,inf", False),
    ("--print-percentiles 50,99.99", True),
    ("--command ''", False),
    ("--command 'SET __key__ a__data__'", False),
    ("--command 'SET pre__key__ __data__'", True),
    ("--command 'SET \"a\"b'", False),
    ("--command-key-pattern R --command 'GET __key__'", False),
    ("--command 'GET __key__' --command-key-pattern RR", False),
    ("--command 'GET __key__' --command-key-pattern P --command 'SET __key__ x'", False),
    ("--thread-conn-start-min-jitter-micros 5", False),
    ("--thread-conn-start-min-jitter-micros 5 --thread-conn-start-max-jitter-micros 10", True),
    ("--scan-incremental-iteration --command 'SCAN 0 COUNT 10'", True),
    ("--scan-incremental-iteration --command 'SCAN 0' --pipeline 2", False),
    ("--scan-incremental-iteration --command 'GET x'", False),
    ("--scan-incremental-iteration", False),
    ("--cluster-mode --reconnect-interval 5", False),
    ("--command 'GET x' --ratio 1:1", False),
    ("--protocol memcache_text", False),
    ("--warmup-time 5 --events", True),                    # redline-load's own: set by redline, dropped
    ("--port 0 --run-count 0", True),                      # owned: dropped before redline-load
    ("-R -n 5 extra", True),                               # a stray argument is ignored
]


@pytest.mark.parametrize("line, accepted", HAND_WRITTEN, ids=[line for line, _ in HAND_WRITTEN])
def test_hand_written_lines(line, accepted):
    argv = shlex.split(line)
    [loadgen] = rust_verdicts([argv])
    python = python_verdict(argv)
    assert (python is None, loadgen is None) == (accepted, accepted), (python, loadgen)


# Where the hand-written lines' decision is not memtier_benchmark's own, and why.
NOT_AS_MEMTIER = {
    "--expiry-range 1-10": "not implemented by redline-load",
    "--data-size-list 10:1,20:1": "not implemented by redline-load",
    "--data-offset 3": "not implemented by redline-load",
    "--protocol memcache_text": "redline-load speaks RESP only",
    "--test-time 5 -n allkeys": "memtier checks the pair only when --test-time comes second",
    "-c +5": "memtier's strtoul takes a sign; both redline parsers take digits only",
    "--ratio 1:4294967296": "memtier's strtoul wraps past 2**32-1",
    "--key-minimum 0 --key-maximum 10": "memtier refuses 0 although 0 is its default; redline accepts it",
    "--key-minimum 11 --key-maximum 10": "memtier does not check that the range is not empty",
    "--data-size-range 5-4": "memtier does not check MIN <= MAX",
    "--print-percentiles 50,inf": "memtier takes inf",
    "--command ''": "memtier starts with an empty command",
}
# Not run through memtier_benchmark: it never gets to connecting (spins with nothing to send).
MEMTIER_HANGS = {"--command 'SET __key__ x' --command-ratio 0"}


def memtier_verdict(argv: list[str]) -> str | None:
    """None when memtier_benchmark accepts the line (it starts connecting to a socket listening
    here), else what it printed when it refused (it exited first). No timing is involved:
    whichever happens first decides; the 60 s limit only guards against a hang."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = str(listener.getsockname()[1])
        proc = subprocess.Popen([MEMTIER, *argv, "--server", "127.0.0.1", "--port", port, "--hide-histogram"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if select.select([listener], [], [], 0.05)[0]:
                    return None
                if proc.poll() is not None:
                    return proc.stderr.read().strip() or f"exit {proc.returncode}"
            pytest.fail(f"memtier_benchmark neither connected nor exited in 60 s: {argv}")
        finally:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not MEMTIER, reason="no memtier_benchmark binary ($MEMTIER_BENCHMARK or PATH)")
def test_hand_written_lines_against_memtier_benchmark():
    """The decisions above are memtier_benchmark's own, except where NOT_AS_MEMTIER says why
    (the line as a run passes it: without the options redline owns)."""
    differs = {line for line, accepted in HAND_WRITTEN if line not in MEMTIER_HANGS
               and (memtier_verdict(without_options(shlex.split(line), CLIENT_OPTIONS)) is None) != accepted}
    assert differs == set(NOT_AS_MEMTIER)


@pytest.mark.slow      # about 25 s: one memtier_benchmark process per line
@pytest.mark.skipif(not MEMTIER, reason="no memtier_benchmark binary ($MEMTIER_BENCHMARK or PATH)")
@needs_upstream
def test_every_upstream_suite_line_is_decided_as_memtier_benchmark_decides():
    lines = suite_lines(sorted(UPSTREAM.glob("*.yml")))
    differs = [where for where, argv in lines
               if (python_verdict(argv) is None) != (memtier_verdict(without_options(argv, CLIENT_OPTIONS)) is None)]
    assert differs == []


def test_the_table_is_read_with_its_line_on_a_bad_row(tmp_path, monkeypatch):
    table = tmp_path / "memtier_options.tsv"
    good = (REPO / "loadgen" / "memtier_options.tsv").read_text()
    table.write_text(good + "frobnicate\t-\tint\t[1,5\tsupported\t-\n")
    monkeypatch.setattr(memtier_options, "TABLE_PATH", table)
    option_table.cache_clear()
    try:
        with pytest.raises(RunError, match=r"memtier_options.tsv:\d+: range '\[1,5' is not an interval"):
            option_table()
        table.unlink()
        option_table.cache_clear()
        with pytest.raises(RunError, match="cannot be read"):
            option_table()
    finally:
        option_table.cache_clear()


SUITE_WITH = """\
version: 0.4
name: refused-option
description: a memtier flag redline-load does not implement, on its own line
dbconfig:
  configuration-parameters:
    save: '""'
tested-groups:
- string
tested-commands:
- set
redis-topologies:
- oss-standalone
clientconfig:
  tool: memtier_benchmark
  arguments: >-
    --command "SET __key__ __data__"
    {option}
    -c 1 -t 1 --test-time 1
"""


@pytest.mark.parametrize("option", ["--expiry-range 1-10", "--data-size-list 10:1,20:1"])
def test_validate_refuses_what_redline_load_refuses_at_its_line(tmp_path, option):
    path = tmp_path / "refused.yml"
    path.write_text(SUITE_WITH.format(option=option))
    redline = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin" / "redline"
    proc = subprocess.run([str(redline), "suites", "validate", str(path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "300"})
    name = option.split()[0]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{path}:17: error: clientconfig.arguments: {name} is not supported by redline-load" in proc.stdout
    [loadgen] = rust_verdicts([shlex.split(option)])
    assert loadgen.startswith(f"option '{name}' is not supported by redline-load")


def test_check_arguments_answers_a_bad_line_and_goes_on():
    proc = subprocess.run([str(loadgen_binary()), "--check-arguments"], input='nope\n["-c","2"]\n[1]\n',
                          capture_output=True, text=True, timeout=60)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and [a["ok"] for a in answers] == [False, True, False]
    assert "must be a JSON array of strings" in answers[0]["error"] and answers[2]["input"] is True
