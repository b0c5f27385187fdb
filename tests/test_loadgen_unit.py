"""Runs the Rust unit tests of redline-load (RESP parser, key patterns, CLI, workload)."""
import os
import shutil
import subprocess
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
CARGO = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")


CARGO_TARGET_DIR = Path(os.environ.get("REDLINE_CACHE") or Path.home() / ".cache" / "redline") / "cargo-target"


def test_cargo_unit_tests():
    # the build directory setup.sh uses, so compiled dependencies are shared
    proc = subprocess.run([CARGO, "test", "--quiet", "--manifest-path",
                           str(REPO / "loadgen" / "Cargo.toml")],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "CARGO_TERM_COLOR": "never", "CARGO_TARGET_DIR": str(CARGO_TARGET_DIR)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "test result: ok" in proc.stdout
