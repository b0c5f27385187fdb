#!/usr/bin/env python3
"""What preparing a dataset under valgrind costs: the same preload into Debian's redis-server
natively and under callgrind with instrumentation off (how counted runs prepared their data before
snapshots were prepared natively), side by side in interleaved rounds; prints each one's seconds.

    .venv/bin/python scripts/counted_preparation_cost.py [--keys 500000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from redline.instructions.callgrind import under_callgrind  # noqa: E402
from redline.load.redline_load import LoadRequest, run_load  # noqa: E402
from redline.server.process import ManagedServer, ServerSettings  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    preload = (f"--ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 --key-maximum {args.keys} "
               "--data-size 100 -c 50 -t 2 --pipeline 50").split()
    workdir = Path(tempfile.mkdtemp(prefix="preparation-"))
    native = ServerSettings(binary=Path("/usr/bin/redis-server"))
    for round_ in range(args.rounds):
        for label, settings in (("native", native), ("valgrind, instrumentation off", under_callgrind(native))):
            server = ManagedServer(settings).start()
            try:
                started = time.monotonic()
                result = run_load(LoadRequest(preload, server.host, server.port, workdir / "preload.json"))
                print(f"round {round_} {label}: {result.report.ops:,} SETs in {time.monotonic() - started:.1f} s",
                      flush=True)
            finally:
                server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
