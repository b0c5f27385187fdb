"""Upstream's own comparison tool reads redline's exported series.

Installs the Redis Benchmarks Specification (PyPI `redis-benchmarks-specification`) in a throwaway
virtual environment, measures two sessions with redline (the second with appendonly=yes, a real
difference for writes), exports them as branches `unstable` and `feature` into a redis-server
with the RedisTimeSeries module (tests/timeseries_server.py), and runs upstream's
`redis-benchmarks-compare` on them; its comparison table is printed. docs/export.md quotes it.

    .venv/bin/python scripts/upstream_compare_check.py [--workdir DIR] [--spec-version X.Y.Z]

Needs the test extras (`pip install -e '.[test]'`, done by setup.sh) and PyPI. Takes a few
minutes, most of them installing upstream's dependencies (pandas, numpy, docker, …).
Exit 0 when upstream's table shows, for every exported test and both branches, the median of
exactly the runs redline stored (as upstream formats it); 1 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from timeseries_server import TimeSeriesServer  # noqa: E402

REDLINE = [sys.executable, "-m", "redline.cli"]
SUITES = REPO / "redline" / "suites" / "quick"
TESTS = "string-(get|set)-100B-pipeline-10$"
MEASURE = ("--runs", "3", "--duration", "2s", "--warmup", "0s")
PLATFORM = "redline-check"
PROJECT = ("--github-org", "redis", "--github-repo", "redis", "--triggering-env", "redline", "--platform", PLATFORM)
INSTALL_TIMEOUT_S = 1800
STEP_TIMEOUT_S = 900


def step(title: str, argv: list[str], *, cwd: Path, timeout: float = STEP_TIMEOUT_S) -> subprocess.CompletedProcess:
    print(f"$ {' '.join(argv)}", file=sys.stderr, flush=True)
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        sys.exit(f"{title} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-3000:]}")
    return proc


def upstream_venv(workdir: Path, version: str | None) -> Path:
    venv = workdir / "upstream-venv"
    step("creating the virtual environment", [sys.executable, "-m", "venv", str(venv)], cwd=workdir)
    package = f"redis-benchmarks-specification=={version}" if version else "redis-benchmarks-specification"
    step(f"pip install {package}", [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                                    package], cwd=workdir, timeout=INSTALL_TIMEOUT_S)
    shown = step("pip show", [str(venv / "bin" / "pip"), "show", "redis-benchmarks-specification"], cwd=workdir).stdout
    print(next(line for line in shown.splitlines() if line.startswith("Version:")).replace("Version:", "upstream"),
          flush=True)
    return venv


def compare(venv: Path, server: TimeSeriesServer, workdir: Path, *metric: str) -> str:
    argv = [str(venv / "bin" / "redis-benchmarks-compare"), "--redistimeseries_host", "127.0.0.1",
            "--redistimeseries_port", str(server.port), "--github_org", "redis", "--github_repo", "redis",
            "--triggering_env", "redline", "--running_platform", PLATFORM, "--test-suites-folder", str(SUITES),
            "--baseline-branch", "unstable", "--comparison-branch", "feature",
            "--baseline_deployment_name", "oss-standalone",
            "--comparison_deployment_name", "oss-standalone-appendonly-yes", "--last_n", "100", *metric]
    return step("redis-benchmarks-compare", argv, cwd=workdir).stdout


def stored_medians(store: Path, metric: str) -> dict[tuple[int, str], float]:
    """(session, test) → the median of the stored runs' metric: what upstream's table must show."""
    values: dict[tuple[int, str], list[float]] = {}
    for session, test, value in sqlite3.connect(store).execute(
            "SELECT r.session_id, r.test, m.value FROM runs r JOIN metrics m ON m.run_id = r.id "
            "WHERE m.name = ? AND r.status = 'ok' AND r.purpose = 'measure'", (metric,)):
        values.setdefault((session, test), []).append(value)
    return {key: statistics.median(runs) for key, runs in values.items()}


def shows_the_stored_medians(table: str, medians: dict[tuple[int, str], float], number_format: str) -> bool:
    """Each test's row of upstream's full results table holds session 1's median (baseline column)
    and session 2's (comparison column), formatted as upstream formats them."""
    ok = True
    for test in sorted({test for _, test in medians}):
        row = next((line for line in table.splitlines() if line.startswith(f"|[{test}]")), "")
        cells = [cell.strip() for cell in row.split("|")[2:4]]
        expected = [format(medians[(session, test)], number_format) for session in (1, 2)]
        found = len(cells) == 2 and all(cell == value or cell.startswith(value + " ") for cell, value in zip(cells, expected))
        print(f"{test}: upstream {cells}, stored medians {expected}: {'same' if found else 'DIFFERENT'}", flush=True)
        ok = ok and found
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="keep everything here (default: a temporary directory)")
    parser.add_argument("--spec-version", help="redis-benchmarks-specification version (default: the newest)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="redline-upstream-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        venv = upstream_venv(workdir, args.spec_version)
        store = workdir / "r.db"
        step("baseline session", [*REDLINE, "run", "quick", "--name", TESTS, *MEASURE, "--store", str(store)],
             cwd=workdir)
        step("comparison session", [*REDLINE, "run", "quick", "--name", TESTS, *MEASURE, "--store", str(store),
                                    "--config", "appendonly=yes"], cwd=workdir)
        server = TimeSeriesServer(workdir / "timeseries")
        try:
            for session, branch in (("1", "unstable"), ("2", "feature")):
                print(step(f"export of session {session}", [*REDLINE, "export", "redistimeseries", session, "--redis",
                                                             server.url, "--store", str(store), "--branch", branch,
                                                             *PROJECT], cwd=workdir).stderr.strip(), flush=True)
            throughput = compare(venv, server, workdir)
            latency = compare(venv, server, workdir, "--metric_name", "ALL_STATS.Totals.Percentile_Latencies.p50.00",
                              "--metric_mode", "lower-better")
        finally:
            server.stop()
        ok = True
        for output, metric, number_format in ((throughput, "ops_per_sec", ".0f"), (latency, "p50_ms", ".3f")):
            print(output.strip(), flush=True)
            full = output[output.index("Full Results table"):] if "Full Results table" in output else ""
            ok = shows_the_stored_medians(full, stored_medians(store, metric), number_format) and ok
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
