"""The README's commands behave as they did before the package was regrouped: each command of its
"Commands" block that needs nothing but this machine runs (shrunk: two quick tests, 1 s windows)
against Debian's redis-server, and the shape of what it gives — exit status, the keys of every
--json document, the terminal table's columns, the files it writes — is compared with the shapes
recorded by the code before the regrouping (tests/golden/readme_shapes.json, written by this test
with REDLINE_WRITE_SHAPES=1 at commit 2a541d6).

Commands that need a network, a repository or infrastructure (git: and src: targets, tcp://, the
fleet, RedisTimeSeries, bisect, accuracy, build) are exercised by their own tests; the check below that
every README command is either run here or named as elsewhere makes a new README line choose."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "readme_shapes.json"
SHRINK = ["--name", "string-get-100B-pipeline-10$|set-sadd", "--duration", "1s", "--warmup", "0s"]

# README command (as written, comments stripped) → the arguments run here (shrunk), or None: elsewhere.
RUN_HERE = {
    "redline run": ["run", *SHRINK],
    "redline run quick --runs 3 --duration 5s --json out.json": ["run", "quick", "--runs", "2", *SHRINK,
                                                                 "--json", "out.json"],
    "redline compare --comparison-config appendonly=yes": ["compare", "--comparison-config", "appendonly=yes",
                                                            "--runs", "2", "--max-runs", "2", *SHRINK,
                                                            "--json", "compare.json", "--markdown", "compare.md"],
    "redline calibrate quick": ["calibrate", "quick", "--runs", "2", *SHRINK, "--json", "calibrate.json"],
    "redline history --name geo --metric server_cpu_us_per_op": ["history", "--name", "set-sadd", "--metric",
                                                                   "server_cpu_us_per_op", "--json", "history.json"],
    "redline report latest -o report.html": ["report", "latest", "-o", "report.html"],
    "redline report --history --metric server_cpu_us_per_op -o history.html": [
        "report", "--history", "--metric", "server_cpu_us_per_op", "-o", "history.html"],
    "redline suites list standard --group stream": ["suites", "list", "standard", "--group", "stream"],
}
ELSEWHERE = ("redline run standard", "redline run path/to/suites/", "redline run --target",
             "redline run --topology", "redline run --profile", "redline compare --baseline git:",
             "redline compare --measure instructions", "redline export", "redline compare …",
             "redline bisect", "redline accuracy", "redline build", "redline fleet", "redline submit",
             "redline agent", "redline collector", "redline api", "redline suites validate", "redline show",
             "redline gate",      # gate: tests/test_scheduler_real.py runs it end to end, tests/test_gate.py on fakes
             "redline compare --resume",      # tests/test_compare_resume.py: interrupted by SIGTERM, then resumed
             "redline compare --duet")        # tests/test_compare_cli.py: a real duet (windows overlap, same cores)


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text[text.index("## Commands"):]
    block = block[block.index("```sh") + 5:block.index("```", block.index("```sh") + 5)]
    commands = []
    for line in block.splitlines():
        line = re.sub(r"\s+#.*$", "", line).rstrip(" \\")
        if line.startswith("redline "):
            commands.append(" ".join(line.split()))
    return commands


def shape(value):
    """The structure of a JSON value: a dict's keys with their shapes, a list's element shapes
    (each distinct one once), a scalar's type. A key whose value is an empty list reads as absent
    (a per-second series without a sample: the store keeps no row for it)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in sorted(value.items()) if item != []}
    if isinstance(value, list):
        shapes = []
        for item in value:
            if shape(item) not in shapes:
                shapes.append(shape(item))
        return shapes
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def loose(json_shape):
    """A value may be a number in one run and null in another: both read as "number"; the
    documents of a list are merged into one (their keys together)."""
    if isinstance(json_shape, dict):
        return {key: loose(value) for key, value in json_shape.items()}
    if isinstance(json_shape, list):
        merged: dict = {}
        for item in json_shape:
            if isinstance(item, dict):
                merged = merge(merged, loose(item))
        return [merged] if merged else sorted({str(loose(i)) for i in json_shape})
    return "number" if json_shape == "NoneType" else json_shape


def merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for key, value in b.items():
        out[key] = merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else \
            out.get(key, value) if out.get(key) not in (None, "number") else value
    return out


def kept(old, new, where: str = "") -> list[str]:
    """What the old shape had that the new one lacks (keys added since are allowed). A run's
    per-second series are there only when sampled (a short run on a loaded machine may see no
    second of server CPU), so a series missing from `series` is not a lost key."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [f"{where or '/'}: was an object"]
        optional = where.endswith("/series")
        return [problem for key, value in old.items()
                for problem in ([] if key not in new and optional else
                                [f"{where}/{key}: missing"] if key not in new else
                                kept(value, new[key], f"{where}/{key}"))]
    if isinstance(old, list):
        if not isinstance(new, list):
            return [f"{where or '/'}: was a list"]
        return [problem for i, item in enumerate(old) if new
                for problem in kept(item, new[min(i, len(new) - 1)], f"{where}[]")] if old and new else \
            ([f"{where}: was a non-empty list"] if old and not new else [])
    return [] if old == new or "number" in (old, new) and {old, new} <= {"number", "NoneType"} \
        else [f"{where}: was {old}, is {new}"]


def columns(terminal: str) -> list[str]:
    """The header cells of the terminal tables (rich's box characters split them)."""
    headers = []
    for line in terminal.splitlines():
        if "┃" in line:
            headers += [cell.strip() for cell in line.split("┃") if cell.strip()]
    return headers


def observe(workdir: Path, arguments: list[str]) -> dict:
    env = {**os.environ, "COLUMNS": "200", "REDLINE_CACHE": os.environ.get("REDLINE_CACHE", "")}
    env = {k: v for k, v in env.items() if v != ""}
    done = subprocess.run([sys.executable, "-m", "redline.cli", *arguments, "--store", "readme.db"]
                          if arguments[0] not in ("suites",) else [sys.executable, "-m", "redline.cli", *arguments],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
    seen = {"exit": done.returncode, "columns": columns(done.stdout)}
    for name in sorted(arguments):
        path = workdir / name
        if name.endswith(".json") and path.exists():
            seen[name] = loose(shape(json.loads(path.read_text())))
        elif name.endswith((".html", ".md")) and path.exists():
            seen[name] = "written"
    return seen


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("readme")
    return {command: observe(workdir, arguments) for command, arguments in RUN_HERE.items()}


def test_every_readme_command_is_run_here_or_named_as_tested_elsewhere():
    unplaced = [c for c in readme_commands() if c not in RUN_HERE and not c.startswith(ELSEWHERE)]
    assert not unplaced, f"README commands neither run by this test nor named in ELSEWHERE: {unplaced}"
    assert set(RUN_HERE) <= set(readme_commands()), "RUN_HERE names a command the README no longer has"


def test_readme_commands_keep_their_shapes(observed):
    if os.environ.get("REDLINE_WRITE_SHAPES"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(observed, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(GOLDEN.read_text())
    for command, seen in observed.items():
        before = recorded[command]
        assert seen["exit"] == before["exit"], f"{command}: exit status {seen['exit']}, was {before['exit']}"
        assert seen["columns"] == before["columns"], f"{command}: terminal columns changed"
        assert sorted(seen) == sorted(before), f"{command}: files written changed"
        lost = [problem for name in before if name not in ("exit", "columns")
                for problem in kept(before[name], seen[name], name)]
        assert not lost, f"{command}: {lost}"


def test_the_shape_check_sees_a_lost_key():
    before = loose(shape([{"test": "a", "metrics": {"ops_per_sec": 1.0}}]))
    after = loose(shape([{"test": "a", "metrics": {"p50_ms": 1.0}}]))
    assert kept(before, after) == ["[]/metrics/ops_per_sec: missing"]
    assert kept(before, loose(shape([{"test": "a", "metrics": {"ops_per_sec": None, "new": 1}}]))) == []
    sampled = loose(shape([{"test": "a", "series": {"ops": [1.0], "server_cpu_util": [0.5]}}]))
    unsampled = loose(shape([{"test": "a", "series": {"ops": [1.0]}}]))
    assert kept(sampled, unsampled) == [], "a series without a sample is not a lost key"
    assert kept(sampled, loose(shape([{"test": "a"}]))) == ["[]/series: missing"]
