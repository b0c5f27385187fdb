"""Try a topology by hand: deploy it, print the CPU plan and the facts, optionally run
redline-load workloads against it (with --cluster-mode on a cluster), then stop it.

    python -m redline.topology oss-cluster-3-primaries \
        --load "--ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 --key-maximum 100000 -d 100 -c 4 -t 1 --pipeline 50" \
        --load "--ratio 0:1 --key-pattern R:R --key-minimum 1 --key-maximum 100000 -c 50 -t 1 --test-time 5"
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from redline.core.errors import RunError, UsageError
from redline.load.redline_load import LoadRequest, run_load
from redline.server.probes import read_cpu
from redline.system.pinning import available_cpus
from redline.topology import deploy, parse_topology, plan_cpus, wait_replicas_in_sync


def _config_pairs(pairs: list[str]) -> dict[str, str]:
    config = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--config expects NAME=VALUE, got {pair!r}")
        config[name] = value
    return config


def _cpu_list(text: str | None) -> list[int]:
    if text is None:
        return available_cpus()
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--cpus expects a comma-separated list of cpu numbers, got {text!r}") from None


def _run_one(deployment, arguments: str, workdir: Path, index: int) -> dict:
    argv = deployment.load_arguments(shlex.split(arguments))
    request = LoadRequest(arguments=argv, host=deployment.host, port=deployment.port,
                          json_path=workdir / f"load-{index}.json", cpus=deployment.cpu_plan.client_cpus)
    cpu_before = read_cpu(deployment.pids())
    report = run_load(request, server_alive=deployment.alive).report
    cpu_after = read_cpu(deployment.pids())
    server_cpu = cpu_after.total_s - cpu_before.total_s if cpu_before and cpu_after else 0.0
    ops = report.ops or 0
    return {
        "arguments": " ".join(argv),
        "ops_per_sec": report.ops_per_sec,
        "p99_ms": report.percentile_ms(99),
        "server_cpu_s": round(server_cpu, 3),
        "server_cpu_us_per_op": round(server_cpu * 1e6 / ops, 3) if ops else None,
        "keys_per_server": {f"{role}:{server.port}": server.client().dbsize()
                            for role, server in zip(deployment.roles, deployment.servers)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m redline.topology", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topology", help="an upstream topology name, e.g. oss-cluster-3-primaries")
    parser.add_argument("--binary", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    parser.add_argument("--cpus", help="comma-separated cpus to plan on (default: all this process may use)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--load", action="append", default=[], metavar="ARGS",
                        help="redline-load arguments to run, in order (repeatable)")
    args = parser.parse_args(argv)
    try:
        spec = parse_topology(args.topology)
        plan = plan_cpus(spec, _cpu_list(args.cpus))
        deployment = deploy(spec, binary=Path(args.binary), config=_config_pairs(args.config),
                            cpu_plan=plan, progress=lambda text: print(text, file=sys.stderr))
    except (UsageError, RunError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    workdir = Path(tempfile.mkdtemp(prefix="redline-topology-load-"))
    report = {"facts": deployment.facts, "loads": []}
    try:
        for index, arguments in enumerate(args.load):
            report["loads"].append(_run_one(deployment, arguments, workdir, index))
            if deployment.replicas:
                report["loads"][-1]["replica_catch_up_s"] = round(wait_replicas_in_sync(deployment), 3)
    except (UsageError, RunError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if not deployment.alive():
            print(deployment.log_tail(), file=sys.stderr)
        return exc.exit_code
    finally:
        deployment.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
