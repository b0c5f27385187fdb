"""How steady the machine is as a timed test starts (redline.system.steadiness): the arithmetic
of a probe on given slices, stored probes read back as untrusted data, the session's sentence,
and the real probe on this machine's cores (with a busy process beside it on one core)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from redline.core.run import Run
from redline.system.steadiness import (BUSY_SHARE, CoreProbe, Steadiness, SteadinessSummary, measure_steadiness,
                                       probe_of, summarize)


def test_the_spread_is_p90_over_p10_of_the_slices_cpu_time_and_the_share_cpu_over_wall():
    even = CoreProbe.of(0, [0.002] * 100, [0.002] * 100, steal=0.0)
    assert (even.spread, even.share, even.troubles()) == (1.0, 1.0, [])
    toggling = CoreProbe.of(1, [0.002] * 60 + [0.0035] * 40, [0.004] * 100, steal=0.08)   # slow 40% of the time
    assert toggling.spread == 1.75 and toggling.share == pytest.approx(0.65, abs=0.001)
    assert toggling.troubles() == ["core 1's speed moved 1.75x (p90/p10 of equal work)",
                                   "other processes took 35% of core 1", "the hypervisor took 8% of core 1"]
    one_hiccup = CoreProbe.of(0, [0.002] * 99 + [0.02], [0.002] * 99 + [0.02], steal=None)
    assert one_hiccup.spread == 1.0 and one_hiccup.troubles() == []          # an interrupt is not unsteadiness
    probe = Steadiness((even, toggling), 0.5)
    assert not probe.steady and probe.spread == 1.75
    assert probe.describe().startswith("unsteady: core 1's speed moved 1.75x")
    assert Steadiness((even,), 0.5).describe() == "steady: equal work took equal time on cores 0 (spread ≤ 1.00x)"


@pytest.mark.parametrize("stored", [None, "x", {}, {"cores": []}, {"cores": "x", "seconds": 1},
                                    {"cores": [{"core": "zero", "slices": 1, "spread": 1, "share": 1}], "seconds": 1},
                                    {"cores": [{"core": 0}], "seconds": 1}])
def test_a_stored_probe_that_is_not_one_is_left_out(stored):
    runs = [Run(test="t", target="a", side="baseline", run_index=0, facts={"machine": {"steadiness": stored}})]
    assert probe_of(runs) is None and summarize(runs) is None
    assert SteadinessSummary.from_json({"tests": 1, "unsteady": 0, "worst": stored}) is None


def _runs(test: str, spread: float) -> list[Run]:
    probe = Steadiness((CoreProbe(0, 100, spread, 1.0, 0.0), CoreProbe(1, 100, 1.01, 1.0, 0.0)), 0.5)
    return [Run(test=test, target=side, side=side, run_index=i, facts={"machine": {"steadiness": probe.as_json()}})
            for i in range(3) for side in ("baseline", "comparison")]


def test_a_session_says_how_many_of_its_timed_tests_met_an_unsteady_machine_and_the_worst():
    counted = [Run(test="d", target="a", side="baseline", run_index=0, facts={"machine": {}})]      # counted runs are not probed
    found = summarize(_runs("a", 1.03) + _runs("b", 1.62) + _runs("c", 1.2) + counted)
    assert (found.tests, found.unsteady, found.worst.spread) == (3, 2, 1.62)
    assert found.sentence() == ("Machine unsteady during 2 of 3 timed tests probed (worst: core 0's speed moved 1.62x "
                                "(p90/p10 of equal work)): timed intervals are wider than this machine gives when "
                                "quiet; counted runs are not affected")
    assert SteadinessSummary.from_json(found.as_json()) == found            # the gate's document keeps it
    calm = summarize(_runs("a", 1.03))
    assert calm.sentence() == ("Machine steady during the 1 timed tests probed: equal work took equal time on every "
                               "core (spread ≤ 1.03x)")


def test_the_real_probe_measures_each_core_it_is_given():
    probe = measure_steadiness([0], seconds=0.2)
    [core] = probe.cores
    assert core.core == 0 and core.slices >= 5 and core.spread >= 1.0 and 0.0 < core.share <= 1.0
    assert Steadiness.from_json(probe.as_json()) == probe


def test_a_busy_process_on_the_probed_core_is_seen_as_other_work():
    busy = subprocess.Popen(["taskset", "--cpu-list", "0", sys.executable, "-c", "while True: pass"])
    try:
        probe = measure_steadiness([0], seconds=0.5)
    finally:
        busy.kill()
        busy.wait()
    [core] = probe.cores
    assert core.share < BUSY_SHARE - 0.15            # the scheduler shares the core: about half each
    assert not probe.steady and any("other processes took" in t for t in probe.troubles())


def test_the_busy_neighbour_script_starts_its_processes_and_takes_them_down_on_sigterm():
    """scripts/busy_neighbour.py, the load docs/statistics.md measures duets beside: a stray spinner
    left behind would load every measurement after it."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "busy_neighbour.py"
    neighbour = subprocess.Popen([sys.executable, str(script), "--processes", "2"])
    try:
        workers: list[str] = []
        deadline = time.monotonic() + 30
        while len(workers) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            workers = subprocess.run(["pgrep", "-P", str(neighbour.pid)], capture_output=True,
                                     text=True).stdout.split()
        assert len(workers) == 2, workers
        neighbour.send_signal(signal.SIGTERM)
        assert neighbour.wait(timeout=30) == 0
        for pid in workers:          # gone, not orphaned spinning on
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not Path(f"/proc/{pid}").exists(), pid
    finally:
        if neighbour.poll() is None:
            neighbour.kill()
            neighbour.wait()
