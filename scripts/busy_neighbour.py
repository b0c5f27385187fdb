"""A busy neighbour for measurements under load: N unpinned processes, each spinning for 20–200 ms
and then sleeping for 10–100 ms, over and over, until stopped (Ctrl-C or SIGTERM).

It stands in for what shares a benchmark machine (a test suite, another job) in a way one can
repeat: docs/statistics.md ("Duets", the pages a restarted server gets) measures duet A/As beside it.

    .venv/bin/python scripts/busy_neighbour.py --processes 3 &
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import signal
import time


def spin_and_sleep(seed: int) -> None:
    draw = random.Random(seed)
    while True:
        until = time.monotonic() + draw.uniform(0.02, 0.2)
        while time.monotonic() < until:
            pass
        time.sleep(draw.uniform(0.01, 0.1))


def _stop(*_) -> None:
    raise SystemExit(0)        # the workers are terminated on the way out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="busy processes (default 3)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first process's bursts (default 1)")
    args = parser.parse_args()
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, not {args.processes}")
    workers = [multiprocessing.Process(target=spin_and_sleep, args=(args.seed + n,), daemon=True)
               for n in range(args.processes)]
    for worker in workers:
        worker.start()
    signal.signal(signal.SIGTERM, _stop)
    try:
        for worker in workers:
            worker.join()
    except KeyboardInterrupt:
        pass
    finally:
        for worker in workers:
            worker.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
