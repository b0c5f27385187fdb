"""What a bisection step's build costs with and without ccache (docs/bisect.md).

Makes the bisect fixture repository (scripts/make_redis_bisect_repo.sh) from Debian's redis
source, then, each in a fresh build cache of its own, side by side in one run:
  1. commit `good` with ccache, its object cache empty        (cold: what the first build costs)
  2. the next commit (bad~15) with that ccache                 (warm: a nearby commit)
  3. the same next commit without ccache                        (what every step cost before)
Prints the three wall times and the warm/plain ratio.

    nice -n 10 .venv/bin/python scripts/bisect_build_cost.py [--variant libc-malloc]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from redline.builder import builder, build_git, load_variant  # noqa: E402
from redline.builder.cache import BuildCache  # noqa: E402


def timed_build(repo: Path, ref: str, variant, cache: BuildCache, *, ccache: bool) -> float:
    builder.ccache_available = (lambda: True) if ccache else (lambda: False)
    started = time.monotonic()
    result = build_git(repo, ref, variant, cache=cache)
    assert not result.cache_hit
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="libc-malloc")
    args = parser.parse_args()
    variant = load_variant(args.variant)
    tree = subprocess.run(["bash", str(ROOT / "scripts" / "redis_source.sh")], capture_output=True, text=True,
                          check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="redline-bisect-cost-") as scratch:
        repo = Path(scratch) / "repo"
        subprocess.run(["bash", str(ROOT / "scripts" / "make_redis_bisect_repo.sh"), tree, str(repo)], check=True,
                       capture_output=True)
        with_ccache = BuildCache(root=Path(scratch) / "with-ccache" / "builds")
        cold = timed_build(repo, "good", variant, with_ccache, ccache=True)
        warm = timed_build(repo, "bad~15", variant, with_ccache, ccache=True)
        plain = timed_build(repo, "bad~15", variant, BuildCache(root=Path(scratch) / "plain" / "builds"),
                            ccache=False)
    print(f"variant {args.variant}: cold build of good with ccache {cold:.1f} s; the next commit: "
          f"with a warm ccache {warm:.1f} s, without ccache {plain:.1f} s ({plain / warm:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
