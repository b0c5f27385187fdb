"""Upstream's own `redis-benchmarks-compare` (PyPI redis-benchmarks-specification, installed in a
throwaway virtual environment) reads redline's exported series: scripts/upstream_compare_check.py.
Slow (installs upstream's dependencies, measures two sessions): `pytest -m slow`."""

import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_upstream_compare_tables_redline_series_with_the_stored_medians(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "upstream_compare_check.py"), "--workdir",
                           str(tmp_path)], capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.stdout.count("### Comparison between unstable and feature.") == 2
    assert proc.stdout.count(": same") == 4 and "DIFFERENT" not in proc.stdout
