"""The one list of metrics: what each is called, its unit, which way is better, whether compare
judges it, how a table shows it. Everything but the computation (engine._metrics) derives from it:
the JSON keys of a run, the results table's columns, the compared set, the short labels, the
markdown runs table, the progress line, the `history --metric` help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from redline.core.numbers import format_bytes, format_count, format_ms


def _two_places(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _grouped(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _plain(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


TIME, INSTRUCTIONS = "time", "instructions"      # the two ways of measuring (--measure); never compared with each other


@dataclass(frozen=True)
class Metric:
    name: str                          # the key in the store, in --json, in compare and history
    label: str                         # column header in tables
    unit: str
    better: str | None = None          # "higher", "lower", or None (a fact, not a goal)
    compared: bool = False             # judged by compare (and calibrated by calibrate)
    table: str | None = None           # "narrow": in every results table; "wide": from 120 columns on
    short: str | None = None           # label where space is short (narrow verdict table)
    progress: str | None = None        # the live line after each run: "{} ops/s"
    format: Callable[[float | None], str] = _plain
    measure: str = TIME                # TIME: a timed run's metric; INSTRUCTIONS: a run under callgrind
    least_change_pct: float | None = None   # counted metrics: the smallest change a verdict may name

    @property
    def higher_is_better(self) -> bool:
        return self.better == "higher"


REGISTRY: tuple[Metric, ...] = (
    Metric("ops_per_sec", "ops/sec", "ops/s", better="higher", compared=True, table="narrow", short="ops/s",
           progress="{} ops/s", format=format_count),
    Metric("p50_ms", "p50 ms", "ms", better="lower", compared=True, table="narrow", short="p50",
           progress="p50 {} ms", format=format_ms),
    Metric("p90_ms", "p90 ms", "ms", better="lower", compared=True, table="wide", short="p90", format=format_ms),
    Metric("p99_ms", "p99 ms", "ms", better="lower", compared=True, table="narrow", short="p99",
           progress="p99 {} ms", format=format_ms),
    Metric("p999_ms", "p99.9 ms", "ms", better="lower", table="wide", format=format_ms),
    Metric("server_cpu_us_per_op", "µs/op", "µs", better="lower", compared=True, table="narrow", short="cpu/op",
           progress="server {} µs/op", format=_two_places),
    Metric("client_cpu_util", "client", "share of a core", table="wide", format=_percent),
    Metric("used_memory_bytes", "memory", "bytes", table="wide", format=format_bytes),
    Metric("keyspace_hits", "hits", "keys"),
    Metric("keyspace_misses", "misses", "keys"),
    Metric("server_cpu_s", "server CPU s", "s"),
    Metric("server_user_s", "server user s", "s"),
    Metric("server_system_s", "server system s", "s"),
    Metric("client_cpu_s", "client CPU s", "s"),
    # what one request costs the load generator: its efficiency, run by run (docs/loadgen.md)
    Metric("client_cpu_us_per_op", "client µs/op", "µs", better="lower", format=_two_places),
    # the server's read and write events on client connections per request (INFO stats
    # total_reads_processed / total_writes_processed, Redis 6.0 on): each a system call, so what
    # batching (pipelines, many connections) saved the kernel; also recorded under callgrind, whose
    # counts see no system call
    Metric("server_reads_per_op", "reads/op", "reads", format=_two_places),
    Metric("server_writes_per_op", "writes/op", "writes", format=_two_places),
    Metric("ops", "ops", "ops"),
    Metric("measured_s", "measured s", "s"),
    Metric("errors", "errors", "replies"),
    # --measure instructions (redline/instructions, docs/measure-instructions.md): callgrind's counts
    # over exactly the measured requests
    # Whole-process counts move with the layout of the server's dictionaries: by up to 1.6% between
    # hash seeds on the same binary (GET +1.58%, SET -1.3%, measured), so between builds whose
    # command tables differ even under the fixed seed; 4% is twice that. Inside call() the layout
    # moved the counts by 0.3% at most: a 1% change is nameable there (docs/measure-instructions.md
    # "Sides that count differently").
    Metric("instructions_per_op", "instr/op", "instructions", better="lower", compared=True, table="narrow",
           short="instr/op", progress="{} instr/op", format=_grouped, measure=INSTRUCTIONS, least_change_pct=4.0),
    Metric("instructions_per_op_command", "instr/op in call()", "instructions", better="lower", compared=True,
           table="narrow", short="in call()", progress="{} in call()", format=_grouped, measure=INSTRUCTIONS,
           least_change_pct=1.0),
    Metric("est_cycles_per_op", "est. cycles/op", "cycles", better="lower", compared=True, table="narrow",
           short="cycles/op", progress="est. {} cycles/op", format=_grouped, measure=INSTRUCTIONS,
           least_change_pct=4.0),
    Metric("window_instructions", "window instructions", "instructions", measure=INSTRUCTIONS),
    Metric("window_l1_misses", "window L1 misses", "misses", measure=INSTRUCTIONS),
    Metric("window_ll_misses", "window LL misses", "misses", measure=INSTRUCTIONS),
    Metric("command_calls", "outermost call() entries", "calls", measure=INSTRUCTIONS),
    Metric("window_cron_instructions", "serverCron instructions", "instructions", measure=INSTRUCTIONS),
    Metric("cron_calls", "serverCron runs", "calls", measure=INSTRUCTIONS),
)

BY_NAME = {metric.name: metric for metric in REGISTRY}
NAMES = tuple(BY_NAME)
COMPARED = tuple(metric for metric in REGISTRY if metric.compared and metric.measure == TIME)


def compared(measure: str = TIME) -> tuple[Metric, ...]:
    """The metrics compare judges (and calibrate calibrates) in one way of measuring."""
    return tuple(metric for metric in REGISTRY if metric.compared and metric.measure == measure)


def measure_of(runs_metrics) -> str:
    """INSTRUCTIONS when any of these runs' metric dicts holds a callgrind count, else TIME."""
    return INSTRUCTIONS if any(m.get("instructions_per_op") is not None for m in runs_metrics) else TIME


def table_metrics(*, wide: bool, measure: str = TIME) -> tuple[Metric, ...]:
    return tuple(m for m in REGISTRY
                 if m.measure == measure and (m.table == "narrow" or (wide and m.table == "wide")))


@dataclass(frozen=True)
class PerSecond:
    """A per-second series of the measured window (the store's `series` table)."""
    name: str                          # the key in the series table
    label: str
    unit: str
    scale: float = 1.0                 # stored value × scale = value in `unit`


# Written by the load generator (ops, p50, p99 each second) and the server CPU probe.
SERIES: tuple[PerSecond, ...] = (
    PerSecond("ops", "ops/sec", "ops/s"),
    PerSecond("p50_ms", "p50 ms", "ms"),
    PerSecond("p99_ms", "p99 ms", "ms"),
    PerSecond("server_cpu_util", "server CPU", "% of a core", scale=100.0),
)
SERIES_BY_NAME = {series.name: series for series in SERIES}
