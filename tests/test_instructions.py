"""--measure instructions (issue #21): callgrind dumps, the request-count rule, the verdict rule
(pure logic, on hand-written dumps and values) and, with Debian's valgrind and redis-server, real
windows: A/A spread, appendonly's cost on SET and not on GET, the flame graph."""

from __future__ import annotations

import os
import re
import signal
import shutil
from pathlib import Path

import pytest

from redline.instructions.callgrind import control_of, under_callgrind
from redline.instructions.callgrind_file import base_name, parse_callgrind
from redline.instructions.costs import estimated_cycles, window_metrics
from redline.instructions.folded import folded_stacks
from redline.instructions.profile import callgrind_profile
from redline.analysis.counted import deterministic_verdict, spread_pct
from redline.instructions import window as window_module
from redline.instructions.window import (EARLIER, TooCostlyToCount, check_countable, FIRST_PHASE_S, GIVEN, LOAD_GRACE_S, MAX_REQUESTS,
                                        MIN_PER_CONNECTION, PIPELINES_PER_WINDOW, RequestPlan, _first_plan, choose_requests,
                                        least_per_connection,
                                        measure_window, phase_bound)
from redline.core.errors import RunError
from redline.load.redline_load import LoadRequest, run_load
from redline.server.process import ManagedServer, ServerSettings
from redline.analysis.stats import Verdict

from conftest import start_redis_server

REDIS_SERVER = Path("/usr/bin/redis-server")

# main → aeMain → call (twice: once from processCommand, once recursively from call itself) → setCommand
DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 1000 300 200 10 20 5 1 2 3

ob=/usr/bin/redis-server
fn=aeMain
0 150 10 10
cfn=call
calls=4 0
0 700 200 150 8 15 4 1 2 3
cfn=serverCron
calls=1 0
0 150 50

fn=call
0 300 100 50 2 5 1
cfn=call
calls=1 0
0 120 40 20
cfn=setCommand
calls=4 0
0 400 100 100 6 10 3 1 2 3

fn=setCommand
0 400 100 100 6 10 3 1 2 3

fn=serverCron
0 150 50
"""


def _dump(tmp_path: Path, text: str = DUMP):
    path = tmp_path / "callgrind.out.1.1"
    path.write_text(text)
    return parse_callgrind(path)


def test_dump_totals_self_costs_and_inclusive_cost_counting_recursion_once(tmp_path):
    dump = _dump(tmp_path)
    assert dump.total("Ir") == 1000 and dump.total("DLmw") == 3
    assert dump.self_cost["aeMain"][0] == 150 and dump.self_cost["setCommand"][:3] == [400, 100, 100]
    assert dump.inclusive("call") == 700            # the recursive call's 120 is inside the 700 already
    assert dump.calls_of("call") == 4 and dump.calls_of("setCommand") == 4
    assert dump.inclusive("noSuchFunction") is None
    # Ir + 10 × (I1mr + D1mr + D1mw) + 100 × (ILmr + DLmr + DLmw), serverCron's 150 instructions left out
    assert estimated_cycles(dump) == 850 + 10 * 35 + 100 * 6
    metrics = window_metrics(dump, ops=4)
    # serverCron (time-driven: hz per wall-clock second) is left out of the per-op figures
    assert metrics["instructions_per_op"] == (1000 - 150) / 4 and metrics["instructions_per_op_command"] == 175
    assert metrics["est_cycles_per_op"] == (850 + 350 + 600) / 4
    assert metrics["window_cron_instructions"] == 150 and metrics["cron_calls"] == 1


# a Lua script's redis.call() inside EVAL's call(): callgrind (--separate-recs=2) names the nested
# activation call'2. The summary: line is what callgrind writes as the first dump after an
# instrumentation restart without a zero: (counter - the previous dump's mark) mod 2^64.
NESTED = f"""events: Ir
summary: {2 ** 64 - 4_395_151_636}

fn=processCommand
0 100
cfn=call
calls=2 0
0 900

fn=call
0 100
cfn=evalCommand
calls=2 0
0 800

fn=evalCommand
0 200
cfn=luaRedisGenericCommand
calls=6 0
0 600

fn=luaRedisGenericCommand
0 180
cfn=call'2
calls=6 0
0 420

fn=call'2
0 60
cfn=hsetCommand
calls=6 0
0 360

fn=hsetCommand
0 360
totals: 1000
"""


def _all_arcs_into(dump, function: str) -> int:
    """How call()'s cost was summed before: every arc into any activation, self-calls left out."""
    return sum(costs[0] for (caller, callee), costs in dump.calls.items()
               if base_name(callee) == function and base_name(caller) != function)


def test_nested_command_executions_count_once_and_the_total_is_the_sum_of_the_costs(tmp_path):
    dump = _dump(tmp_path, NESTED)
    assert dump.total("Ir") == 1000                   # totals:, not the wrapped summary:
    assert dump.inclusive("call") == 900 and dump.calls_of("call") == 2      # the two EVALs, outermost
    assert _all_arcs_into(dump, "call") == 1320 > dump.total("Ir")           # what was reported before
    assert window_metrics(dump, ops=2)["instructions_per_op_command"] == 450 <= \
        window_metrics(dump, ops=2)["instructions_per_op"]


def test_a_call_arc_that_wrapped_below_zero_is_refused_with_its_line(tmp_path):
    wrapped = NESTED.replace("cfn=evalCommand\ncalls=2 0\n0 800", f"cfn=evalCommand\ncalls=2 0\n0 {2 ** 64 - 189_665}")
    with pytest.raises(RunError, match=r"callgrind.out.1.1:14: callgrind counts 18,446,744,073,709,361,951 Ir for "
                                       r"the calls call → evalCommand, more than the whole dump's 1,000 "
                                       r"\(2\^64 - 189,665: a difference that wrapped below zero\)"):
        _dump(tmp_path, wrapped)


def test_a_load_phase_bound_is_positive_finite_and_paced_by_the_phase_before_it():
    # the bound this replaced: 300 s + requests × (instructions per request) / 1M instructions per s,
    # with the per-request estimate from the probe's dump: request_driven = summary - serverCron's arcs,
    # both wrapped mod 2^64 on a later run: (2^64 + p - L) - (2^64 + c - L') = -496.8M for 200
    # requests, -2.48M per request, 300 + 800 × -2.48M / 1M = -1,687 s (measured; and ±7.4e13 s
    # when only one of the two wrapped)
    first = phase_bound(200)
    assert first.limit_s == FIRST_PHASE_S and "first phase" in first.expected
    warmup = phase_bound(800, ("probe", 200, 2.0))
    assert warmup.limit_s == LOAD_GRACE_S + 5 * 8.0
    assert "expected about 8.0s for 800 requests at the pace of the probe (200 requests in 2.0s)" == warmup.expected
    window = phase_bound(500_000, ("warm-up", 800, 1.6))
    assert window.limit_s == LOAD_GRACE_S + 5 * 1000.0
    later_probe = phase_bound(200, ("previous run's window", 400, 2000.0))      # a costly test's later run
    assert later_probe.limit_s == LOAD_GRACE_S + 5 * 1000.0 and "previous run's window" in later_probe.expected
    # nothing measured can make it negative, zero or infinite
    for requests in (0, 1, 200, 500_000):
        for earlier in (None, ("probe", 0, 0.0), ("probe", 200, 0.0), ("probe", 1, 1e-9), ("probe", 200, -1.0),
                        ("warm-up", 800, 3600.0)):
            limit = phase_bound(requests, earlier).limit_s
            assert LOAD_GRACE_S <= limit < float("inf"), (requests, earlier, limit)


def test_a_later_runs_probe_is_bounded_for_every_connection_it_opens(monkeypatch, tmp_path):
    # measured on the upstream stream-100Kentries-pel-xpending-idle-scan (200 connections, 2.2 s per
    # XPENDING under callgrind): later probes were bounded as 1 request (311 s) while they send 200
    # (about 430 s), so every later run failed with "0 of 200 requests had completed after 310s"
    seen = []

    def load_until_the_probe(request, *, timeout_s, expected, **_):
        seen.append((request.requests, timeout_s, expected))
        raise RunError("stopped after the probe")

    class Control:
        def instrumentation_restart(self):
            pass

    monkeypatch.setattr(window_module, "run_load", load_until_the_probe)
    plan = RequestPlan(per_connection=2, connections=200, estimate_per_op=4e7, window_instructions=10**9)
    request = LoadRequest(["--command", "XPENDING s g IDLE 1 - + 10"], "127.0.0.1", 1, tmp_path / "run.json")
    with pytest.raises(RunError, match="after the probe"):
        measure_window(Control(), request, plan=plan, earlier_pace=("previous run's window", 400, 860.0))
    [(per_connection, limit_s, expected)] = seen
    assert per_connection == 1 and limit_s == LOAD_GRACE_S + 5 * 430.0
    assert expected.startswith("the probe: expected about 430.0s for 200 requests"), expected


def test_a_test_too_costly_to_count_is_said_after_its_first_probe(monkeypatch, tmp_path):
    # as the upstream CLIENT LIST suites: 1,000 connections, each request walking all of them; at 2M
    # instructions a request, 2 requests per connection make 4,000M, 80x a gate's 50M window
    phases = []

    class Report:
        def __init__(self, ops):
            self.ops, self.connections_opened = ops, 1000

    class Result:
        def __init__(self, ops):
            self.report = Report(ops)

    def load(request, **_):
        phases.append(request.requests)
        if len(phases) == 3:
            raise RunError("stopped at the window")
        return Result(request.requests * 1000)

    class Control:
        def instrumentation_restart(self):
            pass

    monkeypatch.setattr(window_module, "run_load", load)
    monkeypatch.setattr(window_module, "_dumped", lambda control: None)
    monkeypatch.setattr(window_module, "request_driven", lambda dump: 2e9)     # 1,000 requests of 2M
    request = LoadRequest(["--command", "CLIENT LIST"], "127.0.0.1", 1, tmp_path / "run.json")
    with pytest.raises(TooCostlyToCount) as refused:
        measure_window(Control(), request, window_instructions=50_000_000)
    assert phases == [1], "nothing after the probe"
    message = str(refused.value)
    assert "2 requests on each of 1,000 connections at about 2,000,000 instructions each" in message
    assert "4,000M instructions, 80x the 50M asked for" in message and "--window-instructions" in message
    # a window asked to be large enough counts it (the guard is relative to what was asked)
    check_countable(2e6, 1000, 200_000_000, ("probe", 1000, 100.0))
    # so does a later run, whose plan the first run made: only the first window decides
    phases.clear()
    plan = RequestPlan(per_connection=2, connections=1000, estimate_per_op=2e6, window_instructions=50_000_000)
    with pytest.raises(RunError, match="stopped at the window"):
        measure_window(Control(), request, plan=plan, window_instructions=50_000_000)
    assert phases == [1, 2, 2]                             # probe, warm-up, window: no refusal


def test_a_counted_server_keeps_no_slow_log_and_no_active_rehashing_unless_the_suite_sets_them():
    # under valgrind fast commands pass the slow log's 10 ms: entries inside call(), as many as the load makes;
    # serverCron's 1 ms of rehashing follows wall time and leaves the rest to dictAdd/dictFind inside call()
    assert under_callgrind(ServerSettings(binary=REDIS_SERVER)).config == {"slowlog-log-slower-than": "-1",
                                                                            "activerehashing": "no"}
    own = under_callgrind(ServerSettings(binary=REDIS_SERVER, config={"slowlog-log-slower-than": "5000", "hz": "10",
                                                                      "activerehashing": "yes"}))
    assert own.config == {"slowlog-log-slower-than": "5000", "hz": "10", "activerehashing": "yes"}


def test_a_file_that_is_not_a_callgrind_dump_is_refused_with_its_line(tmp_path):
    with pytest.raises(RunError, match=r"callgrind.out.1.1:2: a cost line before the events"):
        _dump(tmp_path, "# callgrind format\n0 12 13\n")
    with pytest.raises(RunError, match="not a complete callgrind dump"):
        _dump(tmp_path, "events: Ir\nfn=main\n0 5\n")


def test_folded_stacks_keep_every_instruction_and_split_shared_callees_by_cost(tmp_path):
    stacks = folded_stacks(_dump(tmp_path))
    assert sum(stacks.values()) == 1000
    assert stacks["aeMain;call;setCommand"] == 400
    assert stacks["aeMain;serverCron"] == 150
    assert stacks["aeMain;call"] == 300          # its own cost; the recursive arc stays in the frame
    assert stacks["aeMain"] == 150


def test_request_count_rule():
    cheap = choose_requests(5_000, connections=50)
    assert cheap.requests * 5_000 >= 150_000_000 and cheap.per_connection == 750
    assert choose_requests(5_200, connections=50).per_connection == cheap.per_connection   # a few % apart: same
    costly = choose_requests(3_400_000, connections=50)
    assert costly.per_connection == MIN_PER_CONNECTION
    assert choose_requests(10, connections=1).requests == MAX_REQUESTS
    assert "150,000,000 instructions" in cheap.as_dict()["rule"]


def test_a_pipelined_window_holds_several_pipelines_on_each_connection():
    # the gate's 50M window at pipeline 100 and ~8,400 instructions a request chose 75 requests a
    # connection: one burst, not a pipeline's batching
    burst = choose_requests(8_400, connections=100, window_instructions=50_000_000)
    assert burst.per_connection < 100
    deep = choose_requests(8_400, connections=100, window_instructions=50_000_000, pipeline=100)
    assert deep.per_connection == least_per_connection(100) == PIPELINES_PER_WINDOW * 100
    assert choose_requests(8_400, connections=100, window_instructions=50_000_000, pipeline=10).per_connection == 75
    assert choose_requests(8_400, connections=5_000, pipeline=500).requests <= MAX_REQUESTS      # the cap holds
    # GEOSEARCH of a 60M-member set, 58M instructions a request, 8 connections at pipeline 10: 5
    # pipelines would be 470x the window; it sends what 20x allows (those system calls cannot show)
    costly = choose_requests(58_475_834, connections=8, window_instructions=50_000_000, pipeline=10)
    assert costly.per_connection == MIN_PER_CONNECTION
    between = choose_requests(1_000_000, connections=50, window_instructions=50_000_000, pipeline=10)
    assert between.per_connection == 20 and between.requests * 1_000_000 == 20 * 50_000_000   # 2 of 5 pipelines
    # a store's earlier count that holds fewer pipelines is not carried
    assert _first_plan(8_400, 100, 50_000_000, given=None, earlier=75, pipeline=100).per_connection == 500
    assert _first_plan(8_400, 100, 50_000_000, given=None, earlier=75, pipeline=10).origin == EARLIER


def test_a_test_keeps_its_earlier_request_count_while_the_window_fits():
    target = 150_000_000
    chosen = choose_requests(4_400, connections=50)
    # the store's earlier count is kept whether this run estimates 3,200 or 7,000 per request ...
    for estimate in (3_200, 4_400, 7_000):
        plan = _first_plan(estimate, 50, target, given=None, earlier=chosen.per_connection)
        assert plan.per_connection == chosen.per_connection and plan.origin == EARLIER
    # ... not when it would make the window under half or over four times the target
    assert _first_plan(1_000, 50, target, given=None, earlier=chosen.per_connection).origin != EARLIER
    assert _first_plan(40_000, 50, target, given=None, earlier=chosen.per_connection).origin != EARLIER
    # a given count (a bisection's endpoints') always wins
    assert _first_plan(40_000, 50, target, given=7, earlier=chosen.per_connection).per_connection == 7
    assert _first_plan(40_000, 50, target, given=7, earlier=None).origin == GIVEN
    assert "earlier counted runs" in _first_plan(4_400, 50, target, given=None, earlier=1000).as_dict()["rule"]


def test_verdict_rule_on_near_deterministic_values():
    same = deterministic_verdict([6000, 6012], [6006, 5996])
    assert same.verdict == Verdict.NO_CHANGE and same.tau_pct == 1.0
    slower = deterministic_verdict([6000, 6012, 6003], [9900, 9950, 9890])
    assert slower.verdict == Verdict.REGRESSION and slower.delta_pct == pytest.approx(65.0, abs=0.2)
    faster = deterministic_verdict([6000, 6012], [5700, 5710])
    assert faster.verdict == Verdict.IMPROVEMENT
    overlapping = deterministic_verdict([6000, 6100], [6090, 6200])     # B spreads 1.8% → τ 5.4%; 1.6% apart
    assert overlapping.verdict == Verdict.NO_CHANGE and overlapping.tau_pct == pytest.approx(3 * spread_pct([6090, 6200]))
    calibrated = deterministic_verdict([6000, 6030], [6050, 6090], aa_spread_pct=1.0)   # +1.0% [+0.3%, +1.5%], A/A 1%
    assert calibrated.verdict == Verdict.NO_CHANGE and calibrated.tau_pct == 3.0
    # every B run 2% beyond every A run: a shift, below τ 3% — not "no change"
    shifted = deterministic_verdict([6000, 6001], [6120, 6121], aa_spread_pct=1.0)
    assert shifted.verdict == Verdict.INCONCLUSIVE and shifted.tau_pct == 3.0
    # MGET of 5 keys of 512 B, 7.0.5 vs 7.0.7, the whole process: -5.5% [-6.9%, -4.0%], τ 9.3%
    mget = deterministic_verdict([13002.0, 12604.2], [12100.3, 12101.1], least_change_pct=4.0)
    assert mget.ci_high_pct < 0 and mget.tau_pct > abs(mget.delta_pct) and mget.verdict == Verdict.INCONCLUSIVE
    # a shift under the metric's least change stays "no change" (whole process: 4%)
    assert deterministic_verdict([7000, 7100], [7150, 7180], least_change_pct=4.0).verdict == Verdict.NO_CHANGE
    near_tau = deterministic_verdict([6000, 6060], [6150, 6200])          # τ 3%, +2.4%, interval reaches 3.3%
    assert near_tau.verdict == Verdict.INCONCLUSIVE
    assert deterministic_verdict([6000], [9000]).verdict == Verdict.INCONCLUSIVE          # one run: spread unknown
    assert deterministic_verdict([6000, 6600], [9000, 9900]).verdict == Verdict.INCONCLUSIVE   # 10% spread


@pytest.mark.skipif(not REDIS_SERVER.exists(), reason="needs /usr/bin/redis-server (setup.sh installs it)")
def test_a_load_phase_past_its_bound_says_what_was_expected_and_what_it_had_done(tmp_path):
    with pytest.raises(RunError, match=r"internal: redline-load given a time bound of -1687.0s"):
        run_load(LoadRequest(["--ratio", "0:1"], "127.0.0.1", 1, tmp_path / "never.json"), timeout_s=-1687.0)
    server = start_redis_server()
    try:
        # a 60 s load stopped after 2 s: whatever this machine's speed, it cannot have finished
        request = LoadRequest(["--ratio", "0:1", "-c", "2", "-t", "1", "--test-time", "60"], server.host, server.port,
                              tmp_path / "load.json")
        with pytest.raises(RunError) as stopped:
            run_load(request, timeout_s=2.0, expected="the window: expected about 0.4s for 2,000 requests")
    finally:
        server.stop()
    assert re.fullmatch(r"redline-load did not finish within 2s and was stopped \(the window: expected about 0\.4s "
                        r"for 2,000 requests\); (it had reported no progress|[\d,]+ requests had completed after \d+s)",
                        str(stopped.value)), str(stopped.value)


@pytest.mark.skipif(not REDIS_SERVER.exists(), reason="needs /usr/bin/redis-server (setup.sh installs it)")
def test_a_load_that_completes_nothing_is_stopped_by_its_progress_bound_and_says_so(tmp_path):
    """A preload has no bound on its whole length, only on progress: a server that answers nothing
    (stopped by SIGSTOP, not watched here) stalls the load whatever this machine's speed."""
    server = start_redis_server()
    try:
        os.kill(server.process.pid, signal.SIGSTOP)
        request = LoadRequest(["--ratio", "1:0", "-c", "2", "-t", "1", "--test-time", "600"], server.host, server.port,
                              tmp_path / "load.json")
        with pytest.raises(RunError) as stopped:
            run_load(request, stall_s=2.0)
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        server.stop()
    assert re.fullmatch(r"redline-load completed no request for 2s and was stopped; (it had reported no progress|"
                        r"0 requests had completed after \d+s)", str(stopped.value)), str(stopped.value)


# -- real valgrind, real redis-server -----------------------------------------------------------------
needs_valgrind = pytest.mark.skipif(not shutil.which("valgrind") or not REDIS_SERVER.exists(),
                                    reason="needs valgrind and /usr/bin/redis-server (setup.sh installs both)")
PRELOAD = "--ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 --key-maximum 20000 --data-size 100 -c 4 -t 1 --pipeline 50"
LOADS = {
    "SET": "--ratio 1:0 --data-size 100 --key-pattern R:R --key-minimum 1 --key-maximum 20000 --distinct-client-seed -c 10 -t 1",
    "GET": "--ratio 0:1 --key-pattern R:R --key-minimum 1 --key-maximum 20000 --distinct-client-seed -c 10 -t 1",
}
WINDOW = 20_000_000          # instructions: ~1 s under callgrind, enough for a test


def _measure(tmp_path: Path, name: str, plans: dict | None = None, **config: str) -> dict:
    """A fresh server under callgrind, 20K keys preloaded, then a SET and a GET window (with the
    request counts of `plans`, as the runs of one test share theirs); the SET window's profile
    in tmp_path/name (made while the dump is still in the server's work directory)."""
    server = ManagedServer(under_callgrind(ServerSettings(binary=REDIS_SERVER, config=config))).start()
    try:
        run_load(LoadRequest(PRELOAD.split(), server.host, server.port, tmp_path / f"{name}-preload.json"))
        control = control_of(server)
        windows = {command: measure_window(control, LoadRequest(arguments.split(), server.host, server.port,
                                                                tmp_path / f"{name}-{command}.json"),
                                           window_instructions=WINDOW, plan=(plans or {}).get(command))
                   for command, arguments in LOADS.items()}
        windows["profile"] = callgrind_profile(windows["SET"].dump, tmp_path / name, title="SET under callgrind",
                                               ops=windows["SET"].load.report.ops)
        return windows
    finally:
        server.stop()


@needs_valgrind
def test_real_windows_aa_spread_appendonly_and_the_flame_graph(tmp_path):
    first = _measure(tmp_path, "a1")
    plans = {command: first[command].plan for command in LOADS}
    second, aof = _measure(tmp_path, "a2", plans), _measure(tmp_path, "aof", plans, appendonly="yes")
    for command in LOADS:
        a, b = first[command], second[command]
        assert a.plan.requests == a.load.report.ops and a.metrics["command_calls"] == a.plan.requests
        for metric, most in (("instructions_per_op", 2.0), ("instructions_per_op_command", 0.5),
                             ("est_cycles_per_op", 3.0)):
            assert spread_pct([a.metrics[metric], b.metrics[metric]]) <= most, (command, metric, a.metrics, b.metrics)
        assert 0 < a.metrics["instructions_per_op_command"] < a.metrics["instructions_per_op"]
        # A/A through the verdict rule: no change claimed
        verdict = deterministic_verdict([a.metrics["instructions_per_op"]], [b.metrics["instructions_per_op"]])
        assert verdict.verdict not in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    set_ratio = aof["SET"].metrics["instructions_per_op"] / first["SET"].metrics["instructions_per_op"]
    get_ratio = aof["GET"].metrics["instructions_per_op"] / first["GET"].metrics["instructions_per_op"]
    assert set_ratio > 1.3, set_ratio              # the issue measured +68%: every SET is written to the AOF
    assert abs(get_ratio - 1) < 0.05, get_ratio     # a GET writes nothing
    set_runs = [first["SET"].metrics["instructions_per_op"], second["SET"].metrics["instructions_per_op"]]
    assert deterministic_verdict(set_runs, [aof["SET"].metrics["instructions_per_op"]] * 2).verdict == Verdict.REGRESSION

    profile = first["profile"]
    svg = Path(profile["svg_path"]).read_text()
    assert "<svg" in svg and "call" in svg and "setCommand" in svg
    assert profile["instructions"] == first["SET"].dump.total("Ir")
    assert any(entry["symbol"] == "call" for entry in profile["top_total"])
    assert Path(profile["callgrind_path"]).stat().st_size > 0


@needs_valgrind
def test_a_later_run_on_one_server_counts_its_first_dump_exactly(tmp_path):
    """A run's first dump on a server that has dumped before: callgrind's summary agrees with the sum
    of the dump's costs (before the zero after each restart it was 2^64 minus the earlier run's count)."""
    server = ManagedServer(under_callgrind(ServerSettings(binary=REDIS_SERVER))).start()
    try:
        run_load(LoadRequest(PRELOAD.split(), server.host, server.port, tmp_path / "preload.json"))
        control = control_of(server)

        def phase(per_connection: int, name: str) -> Path:
            run_load(LoadRequest(LOADS["GET"].split(), server.host, server.port, tmp_path / f"{name}.json",
                                 requests=per_connection))
            return control.dump()

        control.instrumentation_restart()
        earlier = phase(200, "earlier")                 # 2,000 GETs: the mark L is their count
        control.instrumentation_restart()
        later = phase(1, "later")                       # 10 GETs, far fewer instructions than L
        written = dict(line.split(":", 1) for line in later.read_text().splitlines()
                       if line.startswith(("summary:", "totals:")))
        summary, totals = (int(written[name].split()[0]) for name in ("summary", "totals"))
        # equal but for a few dozen instructions callgrind counts apart (the dump's own bookkeeping)
        assert abs(summary - totals) < 1000, written
        assert 0 < parse_callgrind(later).total("Ir") < parse_callgrind(earlier).total("Ir")
        assert server.client().config_get("slowlog-log-slower-than") == {"slowlog-log-slower-than": "-1"}
    finally:
        server.stop()


SCRIPT = ";".join(f"redis.call('incr','k{n}')" for n in range(8))
NESTING = {
    "GET": LOADS["GET"].split(),
    "EVAL": [f'--command=EVAL "{SCRIPT}" 0', "-c", "10", "-t", "1"],
    "MULTI": ["--command=MULTI", *(f"--command=INCR k{n}" for n in range(4)), "--command=EXEC", "-c", "10", "-t", "1"],
}


@needs_valgrind
def test_nested_command_executions_are_counted_once(tmp_path):
    """EVAL's redis.call() and EXEC's commands run call() inside call(): the command metric is the
    outermost activations' cost (no more than the whole process's), the same as the caller-side
    arc processCommand → call; a plain GET, which nests nothing, reads as before."""
    server = ManagedServer(under_callgrind(ServerSettings(binary=REDIS_SERVER))).start()
    try:
        run_load(LoadRequest(PRELOAD.split(), server.host, server.port, tmp_path / "preload.json"))
        control = control_of(server)
        windows = {name: measure_window(control, LoadRequest(arguments, server.host, server.port,
                                                             tmp_path / f"{name}.json"), window_instructions=WINDOW)
                   for name, arguments in NESTING.items()}
    finally:
        server.stop()
    for name, window in windows.items():
        dump, metrics = window.dump, window.metrics
        outermost = dump.inclusive("call")
        assert outermost == dump.calls[("processCommand", "call")][0], name
        assert window.pace[1] == window.load.report.ops and window.pace[2] > 0      # bounds the next run's probe
        assert metrics["instructions_per_op_command"] <= metrics["instructions_per_op"], (name, metrics)
        if name == "GET":
            assert outermost == _all_arcs_into(dump, "call") and metrics["command_calls"] == window.load.report.ops
        else:          # the nested activations (call'2) were added again before
            assert _all_arcs_into(dump, "call") > outermost, name
    assert windows["EVAL"].metrics["command_calls"] == windows["EVAL"].load.report.ops    # one outermost call per EVAL


def test_a_call_arc_over_its_dump_by_a_few_events_is_taken_as_the_whole(tmp_path):
    """Seen in a counted bisection: aeMain → aeProcessEvents, active across the zeroing of the
    counters, 1 data write over its dump's 131,353. Not a wrap: the run is kept, the arc capped."""
    over = NESTED.replace("cfn=evalCommand\ncalls=2 0\n0 800", "cfn=evalCommand\ncalls=2 0\n0 1001")
    dump = _dump(tmp_path, over)
    assert dump.calls[("call", "evalCommand")] == [1000]
    far_over = NESTED.replace("cfn=evalCommand\ncalls=2 0\n0 800", "cfn=evalCommand\ncalls=2 0\n0 1017")
    with pytest.raises(RunError, match=r"callgrind counts 1,017 Ir for the calls call → evalCommand, more than"):
        _dump(tmp_path, far_over)


def test_the_preloaded_library_pins_the_seeds_of_srand_and_srandom_too():
    """Redis seeds srand()/srandom() from the time and its pid, and draws a sorted set's skiplist
    levels from random(): two counted servers built different skiplists from one RDB file (a false
    +7.0% in ZRANK's call(), docs/measure-instructions.md). With the library preloaded, processes
    that seed differently draw the same numbers; without it they do not."""
    import os
    import subprocess
    import sys
    from redline.server.seed import fixed_seed_library
    draw = ("import ctypes, sys; libc = ctypes.CDLL(None); seed = int(sys.argv[1]); libc.srandom(seed); "
            "first = libc.random(); libc.srand(seed + 1); print(first, libc.rand())")

    def numbers(seed: int, preload: bool) -> str:
        env = {**os.environ, "LD_PRELOAD": str(fixed_seed_library())} if preload else dict(os.environ)
        return subprocess.run([sys.executable, "-c", draw, str(seed)], env=env, capture_output=True, text=True,
                              check=True, timeout=60).stdout
    assert numbers(1234, preload=False) != numbers(98765, preload=False)
    assert numbers(1234, preload=True) == numbers(98765, preload=True)


RECURSIVE = """events: Ir

fn=sortCommand
0 100
cfn=msort
calls=1 0
0 900

fn=msort
0 100
cfn=msort'2
calls=2 0
0 800

fn=msort'2
0 800
cfn=msort'2
calls=4 0
0 1200
totals: 1000
"""


def test_an_arc_between_recursion_activations_may_sum_past_its_dump_but_not_wrap(tmp_path):
    """Seen on the upstream SORT … pipeline 10 suite: callgrind folds recursion levels from 2 down
    into one name, so msort'2 → msort'2 sums calls nested in one another (1200 here, over the dump's
    1000: each level's inclusive cost holds the levels under it). That is not a wrap: the dump is
    read, and what redline reads of it (the outermost calls, the total) stays right."""
    dump = _dump(tmp_path, RECURSIVE)
    assert dump.total("Ir") == 1000 and dump.inclusive("msort") == 900 and dump.calls_of("msort") == 1
    wrapped = RECURSIVE.replace("calls=4 0\n0 1200", f"calls=4 0\n0 {2 ** 64 - 5}")
    with pytest.raises(RunError, match=r"callgrind.out.1.1:\d+: callgrind counts .* for the calls msort'2 → msort'2, "
                                       r"more than the whole dump's 1,000 \(2\^64 - 5: a difference that wrapped"):
        _dump(tmp_path, wrapped)
    level_one = RECURSIVE.replace("calls=2 0\n0 800", "calls=2 0\n0 1200")     # msort → msort'2: not nested
    with pytest.raises(RunError, match=r"the calls msort → msort'2, more than the whole dump's 1,000"):
        _dump(tmp_path, level_one)
