#!/usr/bin/env python3
"""What the slow log costs inside call() under callgrind: GET windows on Debian's redis-server
(20K keys preloaded), each round one server with the slow log as configured by default and one
with it off, side by side; prints call() and whole-process instructions per op and the slow log's
entries and cost per op.

    .venv/bin/python scripts/counted_slowlog_cost.py [--rounds 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from redline.instructions.callgrind import control_of, under_callgrind  # noqa: E402
from redline.instructions.window import measure_window  # noqa: E402
from redline.load.redline_load import LoadRequest, run_load  # noqa: E402
from redline.server.process import ManagedServer, ServerSettings  # noqa: E402

PRELOAD = "--ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 --key-maximum 20000 --data-size 100 -c 4 -t 1 --pipeline 50"
GET = "--ratio 0:1 --key-pattern R:R --key-minimum 1 --key-maximum 20000 --distinct-client-seed -c 50 -t 1"
SETTINGS = (("slow log at 10 ms", {"slowlog-log-slower-than": "10000"}), ("slow log off", {"slowlog-log-slower-than": "-1"}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.mkdtemp(prefix="slowlog-")))
    args = parser.parse_args()
    plan = None
    for round_ in range(args.rounds):
        for label, config in SETTINGS:
            server = ManagedServer(under_callgrind(ServerSettings(binary=Path("/usr/bin/redis-server"),
                                                                  config=config))).start()
            try:
                run_load(LoadRequest(PRELOAD.split(), server.host, server.port, args.workdir / "preload.json"))
                window = measure_window(control_of(server), LoadRequest(GET.split(), server.host, server.port,
                                                                        args.workdir / "get.json"),
                                        window_instructions=20_000_000, plan=plan)
            finally:
                server.stop()
            plan = plan or window.plan
            dump, ops = window.dump, window.load.report.ops
            push = dump.inclusive("slowlogPushEntryIfNeeded") or 0
            print(f"round {round_} {label:18s} {ops} GETs: call() {window.metrics['instructions_per_op_command']:,.1f}/op, "
                  f"whole {window.metrics['instructions_per_op']:,.1f}/op, slow log entries "
                  f"{dump.calls_of('slowlogCreateEntry')}, slow log {push / ops:,.1f}/op", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
