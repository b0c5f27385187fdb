"""Runs the Rust unit tests of redline-load (RESP parser, key patterns, CLI, workload)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CARGO = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")


@pytest.mark.skipif(not Path(CARGO).exists(), reason="cargo not installed")
def test_cargo_unit_tests():
    proc = subprocess.run([CARGO, "test", "--quiet", "--manifest-path",
                           str(REPO / "loadgen" / "Cargo.toml")],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "CARGO_TERM_COLOR": "never"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "test result: ok" in proc.stdout
