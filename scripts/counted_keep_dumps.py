#!/usr/bin/env python3
"""Run a redline command (`run`, `compare`, …) with every callgrind dump of every counted window kept
in DIR (numbered in the order written: probe, warm-up, the INFO edge, window per run) and one line
per dump (its summary: and the sum of its costs, serverCron's arcs) and per load phase (its bound).
How the first-dump arithmetic and the nested call() figures of docs/measure-instructions.md were
taken.

    .venv/bin/python scripts/counted_keep_dumps.py DIR compare SUITE --measure instructions …
"""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import redline.instructions.window as window  # noqa: E402
from redline.instructions.callgrind_file import base_name  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    numbers = itertools.count()
    parse, run_load = window.parse_callgrind, window.run_load

    def kept(path):
        copy = out / f"{next(numbers):03d}.callgrind"
        shutil.copy(path, copy)
        summary = next((line.split()[1] for line in copy.read_text().splitlines() if line.startswith("summary:")), "?")
        dump = parse(path)
        cron = sum(costs[0] for (caller, callee), costs in dump.calls.items()
                   if base_name(callee) == "serverCron" and base_name(caller) != "serverCron")
        print(f"  dump {copy.name}: summary: {int(summary):,} totals {dump.total('Ir'):,} serverCron {cron:,}", flush=True)
        return dump

    def bounded(request, **options):
        print(f"  load -n {request.requests}: bound {options.get('timeout_s'):,.0f}s", flush=True)
        return run_load(request, **options)

    window.parse_callgrind, window.run_load = kept, bounded
    from redline.cli import main as redline
    return redline(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
