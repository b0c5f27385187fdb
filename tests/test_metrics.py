"""The metric registry is the one place a metric is described: the outputs derive from it."""

from rich.console import Console

from redline.core import metrics
from redline.analysis.comparison import COMPARED_METRICS
from redline.core.run import Run
from redline.output.tables import results_table


def test_every_compared_metric_has_a_direction_a_short_label_and_a_table_place():
    for metric in metrics.COMPARED:
        assert metric.better in ("higher", "lower"), metric.name
        assert metric.short and metric.table, metric.name
    assert COMPARED_METRICS == {"ops_per_sec": True, "p50_ms": False, "p90_ms": False, "p99_ms": False,
                                "server_cpu_us_per_op": False}
    assert len(set(metrics.NAMES)) == len(metrics.REGISTRY)


def test_the_results_table_columns_follow_the_registry():
    record = Run(test="t", target="bin:x", side=None, run_index=0, status="ok",
                 metrics={"ops_per_sec": 120_000.0, "p50_ms": 0.5, "p90_ms": 0.75, "p99_ms": 1.0,
                                "p999_ms": 2.0, "server_cpu_us_per_op": 3.25, "client_cpu_util": 0.5,
                                "used_memory_bytes": 2.0 * 2**20, "keyspace_hits": 3.0, "keyspace_misses": 1.0})
    wide, _ = results_table([record], width=200)
    assert [c.header for c in wide.columns] == ["test", "runs", "ops/sec", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms",
                                                 "µs/op", "client", "memory", "hits"]
    console = Console(width=200, record=True)
    console.print(wide)
    row = console.export_text().splitlines()[-2]
    assert [cell.strip() for cell in row.split("│")[1:-1]] == ["t", "1/1", "120.00k", "0.500", "0.750", "1.000",
                                                             "2.000", "3.25", "50%", "2.0 MiB", "75%"]
    narrow, _ = results_table([record], width=100)
    assert [c.header for c in narrow.columns] == ["test", "ops/sec", "p50 ms", "p99 ms", "µs/op", "hits"]


def test_a_run_as_json_carries_every_registered_metric():
    record = Run(test="t", target="bin:x", side=None, run_index=0, status="ok", metrics={"p90_ms": 0.75})
    document = record.to_json()
    assert all(name in document for name in metrics.NAMES)
    assert document["p90_ms"] == 0.75 and document["ops_per_sec"] is None
