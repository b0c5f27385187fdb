"""--profile through the CLI: profiled runs, flame graphs, `redline hotspots`, and profiles
explaining compare verdicts. Real perf, real servers."""

import json
import sqlite3
from pathlib import Path


def test_run_profile_then_hotspots_ranks_the_suites_hot_symbols(tmp_path, redline_cli):
    db, out = tmp_path / "r.db", tmp_path / "out.json"
    proc = redline_cli("run", "quick", "--name", "geo|string-get-100B-pipeline-1$", "--duration", "2s",
                       "--warmup", "1s", "--scale", "0.002", "--profile", "--json", out, "--store", db,
                       check_exit=0, timeout=600)
    runs = json.loads(out.read_text())
    assert len(runs) == 2 and all(r.get("purpose", "measure") == "measure" for r in runs)   # no profiled runs
    assert "flame graph:" in proc.stdout
    rows = sqlite3.connect(db).execute("SELECT r.test, p.svg_path, p.folded_path, p.detail FROM profiles p "
                                       "JOIN runs r ON r.id = p.run_id").fetchall()
    assert len(rows) == 2
    for test, svg, folded, detail in rows:
        assert (tmp_path / svg).exists() or Path(svg).exists()
        assert json.loads(detail)["samples"] > 0
    geo = json.loads(next(d for t, _, _, d in rows if "geo" in t))
    top = [s["symbol"] for s in geo["top_self"][:10]]
    assert any(s.startswith(("geohash", "geoGetPointsInRange", "__cos", "__sin", "geoWithin")) for s in top), top
    # the profile run starts from the measured runs' state (issue #13): the geo key restored from one snapshot
    states = [(purpose, json.loads(facts)["state"]) for purpose, facts in sqlite3.connect(db).execute(
        "SELECT purpose, facts FROM runs WHERE test LIKE '%geo%' ORDER BY id")]
    assert [purpose for purpose, _ in states] == ["measure", "profile"]
    assert {s["origin"] for _, s in states} == {"restored"} and len({s["snapshot_key"] for _, s in states}) == 1
    hot = redline_cli("hotspots", "latest", "--store", db, "--top", "10", check_exit=0)
    assert "Hot symbols across 2 tests" in hot.stdout and "Hot stacks" in hot.stdout
    assert "geo" in hot.stdout


def test_hotspots_without_profiles_is_a_clear_error(tmp_path, redline_cli):
    proc = redline_cli("hotspots", "--store", tmp_path / "none.db", check_exit=2)
    assert "no result store" in proc.stderr


def test_compare_profile_names_the_symbols_behind_a_regression(tmp_path, redline_cli):
    out = tmp_path / "cmp.json"
    # 3 s windows: at load 20 a 1 s window once gave both sides' profiles nothing to tell apart
    redline_cli("compare", "quick", "--name", "string-set-100B-pipeline-10$", "--comparison-config",
                "appendonly=yes", "--runs", "6", "--max-runs", "6", "--duration", "3s", "--warmup", "0.5s",
                "--profile", "--json", out, "--store", tmp_path / "r.db", timeout=600)
    comparisons = json.loads(out.read_text())["comparisons"]
    cpu = next(c for c in comparisons if c["metric"] == "server_cpu_us_per_op")
    assert cpu["diff_flamegraph"] and Path(cpu["diff_flamegraph"]).exists()
    assert cpu["moved_symbols"], cpu
    assert all({"symbol", "baseline_share", "comparison_share"} <= set(m) for m in cpu["moved_symbols"])
