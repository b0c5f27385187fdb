"""The server runner's failure and flag logic, with fakes below it: a ServerFactory of fake servers
whose watch and probe play what a real server does (hangs, exits, INFO and CPU readings) and a
LoadRunner that plays redline-load's contract (phases, server_alive polled, NotAResult when it
refuses its own numbers) with canned reports in the JSON shape loadgen writes. The real Engine and
the real ServerRunner run in between; no process starts, each test takes milliseconds.

The same paths on real servers and a real redline-load are in test_faults.py (a stopped server)
and test_run_cli.py (a crash, a window in which nothing completed, lost connections, error
replies); the run documents asserted here are the ones those tests see."""

from __future__ import annotations

import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from redline.bench.server_runner import ServerRunner
from redline.bench.state import Prepared
from redline.core.errors import RunError
from redline.core.run import EMPTY
from redline.engine.engine import Engine
from redline.engine.run_plan import RunSettings, Side
from redline.load.groups import group_summary
from redline.load.redline_load import LoadResult, NotAResult, ServerGone
from redline.load.report import LoadReport
from redline.server.probes import CpuSample, WindowProbe
from redline.server.process import Server
from redline.server.targets import Target
from redline.server.watch import ServerHung
from redline.suites import load_test
from redline.system.steadiness import CoreProbe, Steadiness
from redline.topology import CpuPlan
from test_engine_fakes import Heard
from test_run_cli import write_suite

CRASH_LINE = "1234:M 01 Jan 2025 00:00:00.000 # Redis 7.0.15 crashed by signal: 11, si_code: 0"
STOPPED = "process {pid} is stopped (state T in /proc: SIGSTOP or a debugger)"     # redline.server.watch's words
LOST = ("95 connections were lost during the run (the server closed them); their requests waited for a "
        "reconnect, so the results are not the server's (--reconnect-on-error accepts them)")   # loadgen's words


# -- canned reports: the JSON redline-load writes (loadgen/src/report.rs), reduced to what is read ----------
def canned_report(*, ops: int, measured_s: float = 2.0, client_cpu: tuple[float, float] = (0.25, 0.125),
                  connections: int = 50, lost: int = 0, pipeline: int = 10, commands: tuple[str, ...] = ("GET",),
                  errors: dict | None = None, error_examples: dict | None = None, warnings: tuple[str, ...] = (),
                  role_counts: dict | None = None, io_note: str | None = None, p50_ms: float = 0.5,
                  rate_limit_per_conn: int | None = None) -> dict:
    seconds = max(1, round(measured_s))
    percentiles = {"p50.00": p50_ms, "p90.00": 1.5 * p50_ms, "p99.00": 3 * p50_ms, "p99.90": 6 * p50_ms,
                   "p99.99": 12 * p50_ms}
    point = {"Count": ops // seconds, "p50.00": p50_ms, "p99.00": 3 * p50_ms}
    totals = {"Count": ops, "Ops/sec": ops / measured_s, "Percentile Latencies": percentiles,
              "Time-Serie": {str(second): point for second in range(seconds)}}
    own = {"warmup_seconds": 0.0, "measured_seconds": measured_s,
           "client_cpu": {"user_s": client_cpu[0], "system_s": client_cpu[1]},
           "connections": {"configured": connections, "opened": connections, "reconnects": 0, "lost": lost},
           "ops": ops, "errors": errors or {}, "error_examples": error_examples or {},
           "send_pattern": {"pipeline": pipeline, "threads": 1, "clients_per_thread": connections,
                            "rate_limit_per_conn": rate_limit_per_conn,
                            "commands": [{"name": c.title() + "s", "type": c} for c in commands]},
           "warnings": list(warnings),
           "io": {"path": "epoll" if io_note else "io_uring", "requested": "auto", "note": io_note}}
    if role_counts is not None:
        own["role_counts"] = role_counts
    return {"ALL STATS": {"Runtime": {"Total duration": int(measured_s * 1000)}, "Totals": totals}, "redline": own}


@dataclass
class Turn:
    """One run as the fakes play it."""

    report: dict                          # what redline-load wrote
    refused: str | None = None            # its last stderr line when it exited non-zero after writing it
    server: str | None = None             # "hangs" or "exits" while the load runs (not before it)
    server_cpu_s: float = 1.0             # the server's CPU over the measured window
    info_start: dict = field(default_factory=dict)
    info_end: dict = field(default_factory=dict)


# -- fakes below the runner ---------------------------------------------------------------------------
class FakeServer(Server):
    host, managed = "127.0.0.1", True

    def __init__(self, port: int):
        self.port, self.pid, self.running, self.crashed = port, 40000 + port, True, False

    def alive(self) -> bool:
        return self.running

    def stop(self) -> None:
        self.running = False

    def crash(self) -> None:
        self.running, self.crashed = False, True

    def exit_description(self) -> str:
        return "killed by signal SIGSEGV" if self.crashed else "running"

    def crash_reason(self) -> str | None:
        return CRASH_LINE.split("# ", 1)[1] if self.crashed else None

    def log_tail(self, lines: int = 20) -> str:
        return f"{CRASH_LINE}\n..." if self.crashed else "Ready to accept connections"


class CannedProbe(WindowProbe):
    """The window probe with the turn's readings instead of /proc and INFO."""

    def __init__(self, turn: Turn):
        super().__init__(pids=[], client=None)
        self.turn = turn

    def mark_start(self, *, wait: bool = False) -> None:
        self.cpu_start, self.info_start = CpuSample(0.0, 0.0, 0.0, 0.0), self.turn.info_start

    def mark_end(self) -> None:
        cpu = self.turn.server_cpu_s
        self.cpu_end, self.info_end = CpuSample(2.0, cpu, cpu * 0.75, cpu * 0.25), self.turn.info_end
        self.cpu_per_second = [cpu / 2, cpu / 2]


class FakeServers:
    """A ServerFactory: a new FakeServer (port 7001, 7002 …) for every start; the turns say what each
    run's server does while the load runs."""

    def __init__(self, turns: list[Turn], *, restart_fails_at: int | None = None, spread: float | None = 1.02):
        self.turns, self.restart_fails_at = turns, restart_fails_at
        self.started: list[FakeServer] = []
        self.runs = 0
        self.spread = spread                      # what the steadiness probe finds
        self.probed: list[list[int]] = []

    def plan(self) -> str:
        return "server state: empty (fake servers)"

    def start(self, side: Side) -> Prepared:
        server = FakeServer(7001 + len(self.started))
        self.started.append(server)
        return Prepared(server, CpuPlan(roles=("primary",), servers=((0,),), client_cpus=(1,)),
                        {"server_port": server.port, "state": {"origin": EMPTY}})

    def before_slot(self, slot, every) -> list:
        """Fake servers hold no pages and never restart; one may fail to come back."""
        ready = []
        for side, prepared in slot:
            if self.runs == self.restart_fails_at:
                prepared.server.stop()
                ready.append(RunError("the server did not come back: fake restart failure"))
                continue
            self.runs += 1
            prepared.runs += 1
            ready.append(prepared)
        return ready

    def watch(self, server: FakeServer):
        turn = self.turns[self.runs - 1]
        polls = []

        def server_alive() -> bool:
            polls.append(1)
            if len(polls) == 1:          # the check before the load: the turn's fault comes during it
                return server.alive()
            if turn.server == "hangs":
                raise ServerHung(STOPPED.format(pid=server.pid))
            if turn.server == "exits":
                server.crash()
            return server.alive()
        return server_alive

    def probe(self, server: FakeServer) -> WindowProbe:
        return CannedProbe(self.turns[self.runs - 1])

    def at_run_start(self, server: FakeServer) -> dict:
        return {"keys": 0, "keys_with_ttl": 0, "used_memory": 1_000_000}

    def steadiness(self, cores: list[int]) -> Steadiness | None:
        self.probed.append(cores)
        if self.spread is None:          # the probe could not run
            return None
        return Steadiness(tuple(CoreProbe(core, 100, self.spread, 1.0, 0.0) for core in cores), 0.5)


class CannedLoad:
    """A LoadRunner with run_load's contract over the turns' canned reports."""

    def __init__(self, turns: list[Turn]):
        self.turns, self.calls = turns, 0
        self.windows: list[float | None] = []          # each load's measured window, as asked

    def __call__(self, test, request, arguments_for, *, listener=None, server_alive=None, timeout_s=None):
        turn = self.turns[self.calls]
        self.calls += 1
        self.windows.append(request.duration_s)
        listener.on_phase("measure", 0.0)
        if server_alive is not None and not server_alive():      # ServerHung passes through, as in run_load
            raise ServerGone("the server exited while load was running")
        listener.on_phase("done", 0.0)
        result = LoadResult(argv=request.argv(), report=LoadReport(turn.report))
        if turn.refused:
            raise NotAResult(turn.refused, result)
        return result


@dataclass
class Played:
    runs: list[dict]          # the run documents, as --json writes them
    notes: list[str]
    servers: FakeServers
    windows: list[float | None]    # each load's measured window, as the runner asked for it


@pytest.fixture(autouse=True)
def stub_loadgen(tmp_path, monkeypatch):
    """The load generator's path goes into every run's facts; this one is never started."""
    stub = tmp_path / "redline-load"
    stub.write_text("#!/bin/sh\nexit 99\n")
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("REDLINE_LOAD", str(stub))


def play(tmp_path: Path, turns: list[Turn], *, runs: int, arguments: str = "--ratio 0:1 -c 5 -t 1 --pipeline 10",
         restart_fails_at: int | None = None, spread: float | None = 1.02, names: tuple = (None,),
         duet: bool = False, load: type = None, test_time: int = 2, duration_s: float = 2.0) -> Played:
    """The real Engine and ServerRunner over the fakes: one side (or one per name), `runs` runs."""
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    test = load_test(write_suite(suites, "seam", f"{arguments} --test-time {test_time}"))
    servers, heard = FakeServers(turns, restart_fails_at=restart_fails_at, spread=spread), Heard()
    loads = (load or CannedLoad)(turns)

    def runners(test, topology, sides, settings, observer, workdir):
        return ServerRunner(test, topology, sides, settings, observer=observer, servers=servers,
                            load=loads, workdir=workdir, artifacts=lambda run: tmp_path)

    binaries = [Path("/fake/redis-server" + (f"-{name}" if name else "")) for name in names]
    sides = [Side(Target(f"bin:{binary}", binary=binary), name) for binary, name in zip(binaries, names)]
    records = Engine(runners=runners, observers=[heard]).execute_test(
        test, sides=sides, settings=RunSettings(runs=runs, duration_s=duration_s, warmup_s=0.0, duet=duet),
        session_id=None)
    return Played([run.to_json() for run in records], heard.notes, servers, loads.windows)


def ok_turn(**report) -> Turn:
    return Turn(canned_report(ops=40_000, **report), info_start={"keyspace_hits": 100, "keyspace_misses": 0},
                info_end={"keyspace_hits": 40_100, "keyspace_misses": 0, "used_memory": 2_000_000})


# -- the four of issue #31 ---------------------------------------------------------------------------
def test_a_hung_server_fails_its_run_is_killed_and_the_next_run_gets_a_fresh_server(tmp_path):
    played = play(tmp_path, [Turn(canned_report(ops=1), server="hangs"), ok_turn(), ok_turn()], runs=3)
    runs, first = played.runs, played.servers.started[0]
    assert [r["status"] for r in runs] == ["failed", "ok", "ok"]
    assert runs[0]["error"] == (f"the server stopped answering during the run: process {first.pid} is stopped "
                                "(state T in /proc: SIGSTOP or a debugger); it was killed")
    assert runs[0]["ops_per_sec"] is None and runs[0]["flags"] == []
    assert [r["ops_per_sec"] for r in runs[1:]] == [20_000.0, 20_000.0]
    assert "bin:/fake/redis-server: the server hung and was killed; a fresh one is started for the next run" \
        in played.notes
    assert not first.running                                   # killed, not left stopped
    ports = [r["facts"]["server_port"] for r in runs]
    assert ports[1] != ports[0] and ports[2] == ports[1]       # a fresh server from the second run on
    assert len(played.servers.started) == 2


def test_a_server_that_crashes_mid_run_fails_that_run_with_its_crash_line_and_runs_no_more(tmp_path):
    played = play(tmp_path, [Turn(canned_report(ops=1), server="exits"), ok_turn(), ok_turn()], runs=3)
    [run] = played.runs
    assert run["status"] == "failed"
    assert run["error"] == ("the server exited during the run (killed by signal SIGSEGV): "
                            "Redis 7.0.15 crashed by signal: 11, si_code: 0")
    assert "crashed by signal" in run["server_log_tail"]
    assert "bin:/fake/redis-server: the server exited; the remaining runs of seam are skipped" in played.notes
    assert len(played.servers.started) == 1


@pytest.mark.parametrize("connections, per_call_usec, ending", [
    (10, 50, "the server spent 0.05 ms per call over 10 calls (INFO commandstats), so the replies were held "
             "back rather than slow (a blocking command waiting for data?)"),
    (500, 7_000, "the server spent 7.00 ms per call over 10 calls (INFO commandstats), so one round of those "
                 "requests takes about 7.0 s — a longer --duration measures it"),
])
def test_a_window_with_zero_ops_is_a_failed_run_that_says_why(tmp_path, connections, per_call_usec, ending):
    report = canned_report(ops=0, measured_s=1.0, connections=connections, pipeline=2, commands=("BLPOP",))
    blpop = {"cmdstat_blpop": {"calls": 10, "usec": 10 * per_call_usec}}
    played = play(tmp_path, [Turn(report, refused="no request completed in the measured 1.0 s", info_end=blpop)],
                  runs=1, arguments='--command="BLPOP nothing 0" --pipeline 2')
    [run] = played.runs
    assert run["status"] == "failed" and run["ops_per_sec"] is None
    assert run["error"] == (f"no reply completed in the measured 1 s with {2 * connections} requests in flight "
                            f"({connections} connections × pipeline 2); {ending}")


def test_a_client_that_saturated_its_core_is_flagged_and_every_metric_is_computed(tmp_path):
    saturated = ok_turn(client_cpu=(1.5, 0.375))                  # 1.875 s of 2 s on the one client core
    played = play(tmp_path, [saturated, ok_turn()], runs=2)
    runs = played.runs
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert runs[0]["flags"] == ["client saturated its core"] and runs[1]["flags"] == []
    assert {name: runs[0][name] for name in (
        "ops_per_sec", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "server_cpu_us_per_op", "client_cpu_util",
        "used_memory_bytes", "keyspace_hits", "keyspace_misses", "server_cpu_s", "server_user_s",
        "server_system_s", "client_cpu_s", "client_cpu_us_per_op", "ops", "measured_s", "errors")} == {
        "ops_per_sec": 20_000.0, "p50_ms": 0.5, "p90_ms": 0.75, "p99_ms": 1.5, "p999_ms": 3.0,
        "server_cpu_us_per_op": 25.0, "client_cpu_util": 0.9375, "used_memory_bytes": 2_000_000.0,
        "keyspace_hits": 40_000, "keyspace_misses": 0, "server_cpu_s": 1.0, "server_user_s": 0.75,
        "server_system_s": 0.25, "client_cpu_s": 1.875, "client_cpu_us_per_op": 46.875, "ops": 40_000.0,
        "measured_s": 2.0, "errors": 0.0}
    assert runs[1]["client_cpu_util"] == 0.1875
    assert runs[0]["series"] == {"ops": [20_000.0, 20_000.0], "p50_ms": [0.5, 0.5], "p99_ms": [1.5, 1.5],
                                 "server_cpu_util": [0.5, 0.5]}
    assert runs[0]["facts"]["loadgen"] == saturated.report["redline"]
    argv = runs[0]["facts"]["loadgen_argv"]
    assert argv[0] == str(tmp_path / "redline-load") and argv[-2:] == ["--test-time", "2"]


# -- the other failures and flags ---------------------------------------------------------------------
@pytest.mark.parametrize("ops, refused", [
    (1_200, LOST),
    (0, "no request completed in the measured 1.0 s (95 connections lost)"),
])
def test_lost_connections_fail_the_run_with_the_reason_and_the_servers_error_reply(tmp_path, ops, refused):
    report = canned_report(ops=ops, measured_s=1.0, lost=95, errors={"ERR": 1},
                           error_examples={"ERR": "ERR Protocol error: invalid bulk length"})
    [run] = play(tmp_path, [Turn(report, refused=refused)], runs=1).runs
    assert run["status"] == "failed" and run["ops_per_sec"] is None
    assert run["error"] == f"{refused}; 1 error replies: 1 × ERR Protocol error: invalid bulk length"


def test_error_replies_misses_and_load_warnings_are_flags_of_an_ok_run(tmp_path):
    errors = {"ERR": 400, "WRONGTYPE": 30, "NOAUTH": 2, "BUSYKEY": 1}
    examples = {"ERR": "ERR syntax error", "WRONGTYPE": "WRONGTYPE Operation against a key holding the wrong kind "
                "of value", "NOAUTH": "NOAUTH Authentication required."}
    turn = ok_turn(errors=errors, error_examples=examples, warnings=("--key-pattern G: a warning of redline-load",),
                   io_note="io_uring is not available here (io_uring_setup: Operation not permitted)")
    turn.info_start = {"keyspace_hits": 0, "keyspace_misses": 0}
    turn.info_end = {"keyspace_hits": 1_000, "keyspace_misses": 9_000, "used_memory": 2_000_000}
    [run] = play(tmp_path, [turn], runs=1).runs
    assert run["status"] == "ok" and run["errors"] == 433.0
    assert run["flags"] == [
        "measures the miss path (90% misses)",
        "433 error replies: 400 × ERR syntax error; 30 × WRONGTYPE Operation against a key holding the wrong "
        "kind of value; 2 × NOAUTH Authentication required.; 1 more types",
        "--key-pattern G: a warning of redline-load",
        "load generator I/O on epoll: io_uring is not available here (io_uring_setup: Operation not permitted)"]


def test_a_server_that_cannot_be_restarted_into_the_state_fails_the_run_and_the_side_runs_no_more(tmp_path):
    played = play(tmp_path, [ok_turn(), ok_turn(), ok_turn()], runs=3, restart_fails_at=1)
    assert [(r["status"], r["error"]) for r in played.runs] == [
        ("ok", None), ("failed", "the server did not come back: fake restart failure")]
    assert ("bin:/fake/redis-server: the server could not be restarted into the test's state; the remaining "
            "runs of seam are skipped") in played.notes


# -- the reader --------------------------------------------------------------------------------------------
def test_a_group_summary_is_read_from_the_groups_report():
    report = canned_report(ops=3_000, measured_s=3.0, errors={"ERR": 2}, role_counts={"published": 3_000})
    summary = group_summary("group 1 (pubsub-sub-bench)", LoadResult(argv=["redline-load"], report=LoadReport(report)))
    assert summary == {"group": "group 1 (pubsub-sub-bench)", "argv": ["redline-load"], "ops": 3_000,
                       "ops_per_sec": 1_000.0, "p50_ms": 0.5, "p99_ms": 1.5, "measured_s": 3.0,
                       "errors": {"ERR": 2}, "role_counts": {"published": 3_000},
                       "io": {"path": "io_uring", "requested": "auto", "note": None}}


def test_the_reader_reads_memtiers_file_and_an_unreadable_one_is_a_run_error(tmp_path):
    memtier = LoadReport({"ALL STATS": {"Runtime": {"Total duration": 10_500},
                                        "Totals": {"Count": 21, "Ops/sec": 2.0,
                                                   "Percentile Latencies": {"p99.90": 4.5}}}})
    assert (memtier.count, memtier.runtime_s, memtier.ops_per_sec, memtier.percentile_ms(99.9)) == (21, 10.5, 2.0, 4.5)
    assert (memtier.ops, memtier.client_cpu_s, memtier.role_counts, memtier.measured_s) == (None, None, None, None)
    assert (memtier.errors, memtier.warnings, memtier.connections_lost, memtier.pipeline) == ({}, [], 0, 1)
    assert memtier.per_second() == {} and memtier.percentile_ms(50) is None
    (tmp_path / "cut.json").write_text('{"ALL STATS": ')
    with pytest.raises(RunError, match="^redline-load wrote no readable JSON to .*cut.json: "):
        LoadReport.read(tmp_path / "cut.json")


# -- how steady the machine was ------------------------------------------------------------------------
def test_the_first_run_of_a_timed_test_probes_its_cores_once_and_every_run_carries_that_probe(tmp_path):
    played = play(tmp_path, [ok_turn(), ok_turn(), ok_turn()], runs=3)
    assert played.servers.probed == [[0, 1]]                  # the server's core and the client's, once
    probes = [r["facts"]["machine"]["steadiness"] for r in played.runs]
    assert probes[0] == probes[1] == probes[2]
    assert probes[0]["steady"] is True and [c["core"] for c in probes[0]["cores"]] == [0, 1]
    assert not any("unsteady" in note for note in played.notes)


def test_an_unsteady_machine_is_said_as_the_test_starts(tmp_path):
    played = play(tmp_path, [ok_turn(), ok_turn()], runs=2, spread=1.6)
    assert played.runs[0]["facts"]["machine"]["steadiness"]["steady"] is False
    [note] = [note for note in played.notes if "unsteady" in note]
    assert note == ("the machine is unsteady: core 0's speed moved 1.60x (p90/p10 of equal work); core 1's speed "
                    "moved 1.60x (p90/p10 of equal work): this test's timed intervals will be wider than on a "
                    "quiet machine")


def test_a_probe_that_could_not_run_leaves_the_runs_without_one_and_says_nothing(tmp_path):
    played = play(tmp_path, [ok_turn(), ok_turn()], runs=2, spread=None)
    assert played.servers.probed == [[0, 1]]                  # tried once, not again for the second run
    assert [r["status"] for r in played.runs] == ["ok", "ok"]
    assert all("steadiness" not in r["facts"]["machine"] for r in played.runs)
    assert not any("steady" in note for note in played.notes)


# -- duets -----------------------------------------------------------------------------------------
class MeetingLoad(CannedLoad):
    """Each load waits, inside its run, for the other side's to be running too: the duet's loads
    can only both end if they ran at once (one after the other, the first waits out the barrier
    and the test fails with BrokenBarrierError)."""

    def __init__(self, turns: list[Turn]):
        super().__init__(turns)
        self.meeting = threading.Barrier(2, timeout=60)
        self.lock = threading.Lock()
        self.ports: list[int] = []

    def __call__(self, test, request, arguments_for, **kwargs):
        with self.lock:
            self.ports.append(request.port)
        self.meeting.wait()
        with self.lock:
            return super().__call__(test, request, arguments_for, **kwargs)


def test_a_duet_runs_both_sides_loads_at_once_after_one_probe_and_says_so_in_each_run(tmp_path):
    played = play(tmp_path, [ok_turn() for _ in range(6)], runs=3, names=("baseline", "comparison"), duet=True,
                  load=MeetingLoad)
    assert [(r["side"], r["run_index"], r["status"]) for r in played.runs] == [
        ("baseline", 0, "ok"), ("comparison", 0, "ok"), ("comparison", 1, "ok"), ("baseline", 1, "ok"),
        ("baseline", 2, "ok"), ("comparison", 2, "ok")]
    assert played.servers.probed == [[0, 1]]                  # once, before any load
    label = {"baseline": "bin:/fake/redis-server-baseline", "comparison": "bin:/fake/redis-server-comparison"}
    for run in played.runs:
        assert run["facts"]["duet"]["with"] == [label["comparison" if run["side"] == "baseline" else "baseline"]]
        assert run["facts"]["duet"]["overlap"] == 1.0 and run["flags"] == []    # the fakes' windows are one
    # the side whose load starts first alternates, as interleaved runs alternate A B, B A
    assert [r["facts"]["duet"]["load_order"] for r in played.runs[::2]] == [
        [label["baseline"], label["comparison"]], [label["comparison"], label["baseline"]],
        [label["baseline"], label["comparison"]]]


def test_a_duet_whose_partner_cannot_start_its_run_measures_neither_and_ends(tmp_path):
    played = play(tmp_path, [ok_turn() for _ in range(6)], runs=3, names=("baseline", "comparison"), duet=True,
                  load=MeetingLoad, restart_fails_at=3)     # run 1: the first side's restart fails
    statuses = [(r["side"], r["run_index"], r["status"]) for r in played.runs]
    assert statuses == [("baseline", 0, "ok"), ("comparison", 0, "ok"),
                        ("comparison", 1, "failed"), ("baseline", 1, "failed")], statuses
    assert played.runs[2]["error"].startswith("not measured: a duet of bin:/fake/redis-server-comparison, "
                                              "bin:/fake/redis-server-baseline needs every side")
    assert played.runs[3]["error"] == "the server did not come back: fake restart failure"
    assert "could not be restarted" in " ".join(played.notes)


# -- a window fitted to calls that take seconds (redline.bench.window_fit) -----------------------------
def slow_turn(*, p50_ms: float, measured_s: float) -> Turn:
    return Turn(canned_report(ops=40, measured_s=measured_s, p50_ms=p50_ms, connections=1, pipeline=1))


def test_a_window_too_short_for_the_calls_is_lengthened_and_the_run_measured_again(tmp_path):
    """Calls of 1 s in a 3 s window (3 rounds): the window becomes 15 rounds, 15 s, within the
    suite's own 120 s; run 0 is measured again with it and every later run measures it too."""
    turns = [slow_turn(p50_ms=1000, measured_s=3)] + [slow_turn(p50_ms=1000, measured_s=15) for _ in range(3)]
    played = play(tmp_path, turns, runs=3, arguments="-c 1 -t 1", test_time=120, duration_s=3.0)
    assert played.windows == [3.0, 15.0, 15.0, 15.0]
    assert [(r["run_index"], r["status"]) for r in played.runs] == [(0, "ok"), (1, "ok"), (2, "ok")]
    assert ("window lengthened: the test's calls take about 1.00 s a round of requests per connection, so a 3 s "
            "window holds 3.0 rounds; its runs measure 15 s (15 rounds); run 0 is measured again") in played.notes
    assert all(r["facts"]["duration_s"] == 15.0 and r["facts"]["window_fitted"] == {"asked_s": 3.0, "round_s": 1.0}
               for r in played.runs)
    assert not any(f.startswith("window too short") for r in played.runs for f in r["flags"])
    assert played.runs[0]["error"] is None


def test_a_window_in_which_no_reply_completed_is_lengthened_up_to_the_suites_own_test_time(tmp_path):
    """500 connections × pipeline 2 at 7 ms a call: a round takes 7 s; 15 rounds would be 105 s,
    the suite's own --test-time is 60 s, and the window stops there."""
    report = canned_report(ops=0, measured_s=2.0, connections=500, pipeline=2, commands=("BLPOP",))
    blpop = {"cmdstat_blpop": {"calls": 10, "usec": 70_000}}
    turns = [Turn(report, refused="no request completed in the measured 2.0 s", info_end=blpop), ok_turn()]
    played = play(tmp_path, turns, runs=1, arguments='--command="BLPOP nothing 0" --pipeline 2', test_time=60)
    assert played.windows == [2.0, 60.0]
    [run] = played.runs
    assert run["status"] == "ok" and run["facts"]["window_fitted"] == {"asked_s": 2.0, "round_s": 7.0}
    assert any(note.startswith("window lengthened: the test's calls take about 7.00 s a round") and
               "so a 2 s window holds 0.3 rounds; its runs measure 60 s (the suite's own --test-time)" in note
               for note in played.notes), played.notes


def test_a_fitted_window_takes_the_next_step_so_that_nearby_rounds_measure_one_window():
    from redline.bench.window_fit import WindowFit
    from redline.core.run import Run
    windows = set()
    for p50_ms in (3050, 3210, 3900):            # 15 rounds: 46, 48, 59 s
        fit = WindowFit.for_test(3.0, 120)
        run = Run(test="t", target="bin:x", side=None, run_index=0, status="ok", metrics={"p50_ms": p50_ms})
        assert fit.after_slot([run]) is not None
        windows.add(fit.duration_s)
    assert windows == {60.0}
    capped = WindowFit.for_test(3.0, 50)
    assert capped.after_slot([Run(test="t", target="bin:x", side=None, run_index=0, status="ok",
                                  metrics={"p50_ms": 3210})]) and capped.duration_s == 50.0 and capped.settled


def test_a_rate_limited_load_is_never_fitted_and_a_load_behind_its_rate_is_flagged(tmp_path):
    """2 connections at 100 requests/s each: a median reply of 2 s in a 3 s window is the backlog of
    a load that fell behind its 200 requests/s (replies are timed from their intended send time),
    not a slow call, so the window stays 3 s and the run says the load fell behind. A run that kept
    its rate carries no such flag."""
    behind = Turn(canned_report(ops=450, measured_s=3, p50_ms=2000, connections=2, pipeline=1,
                                rate_limit_per_conn=100))
    kept = Turn(canned_report(ops=600, measured_s=3, p50_ms=2000, connections=2, pipeline=1,
                              rate_limit_per_conn=100))
    played = play(tmp_path, [behind, kept], runs=2, arguments="-c 2 -t 1 --rate-limiting 100", test_time=120,
                  duration_s=3.0)
    assert played.windows == [3.0, 3.0]
    assert not any("lengthened" in note for note in played.notes), played.notes
    assert [r["status"] for r in played.runs] == ["ok", "ok"]
    assert played.runs[0]["flags"] == ["the load fell behind its rate: 150 of 200 requests/s; its latencies are "
                                       "timed from each request's intended send time, so they measure the backlog"]
    assert played.runs[1]["flags"] == []
    assert "window_fitted" not in played.runs[0]["facts"]


def test_a_window_that_measured_whole_once_stays_and_a_later_short_run_is_only_flagged(tmp_path):
    turns = [ok_turn(measured_s=3.0), slow_turn(p50_ms=1000, measured_s=3)]
    played = play(tmp_path, turns, runs=2, test_time=120, duration_s=3.0)
    assert played.windows == [3.0, 3.0] and [r["status"] for r in played.runs] == ["ok", "ok"]
    assert any(f.startswith("window too short") for f in played.runs[1]["flags"])
    assert not any("lengthened" in note for note in played.notes)


def test_a_duet_whose_one_side_ran_too_short_a_window_measures_the_pair_again_with_the_longer_one(tmp_path):
    """The pair measures one window: when one side's calls need a longer one, both runs of the
    pair are measured again with it, and so is every later pair."""
    turns = [slow_turn(p50_ms=1000, measured_s=3), ok_turn(measured_s=3.0)] + [ok_turn() for _ in range(4)]
    played = play(tmp_path, turns, runs=2, names=("baseline", "comparison"), duet=True, load=MeetingLoad,
                  test_time=120, duration_s=3.0)
    assert [(r["run_index"], r["status"]) for r in played.runs] == [(0, "ok"), (0, "ok"), (1, "ok"), (1, "ok")]
    assert sorted(played.windows) == [3.0, 3.0, 15.0, 15.0, 15.0, 15.0]


def test_a_counted_windows_flags_never_read_the_loads_own_time(tmp_path):
    """A counted window is a request count under callgrind, where replies take 20-50x longer and the
    client waits: a saturated client or a window of few median latencies says nothing there. Seen
    on the upstream SORT_RO … pipeline 10 suite: 'window too short: the median reply took 107.41 s'
    on a counted run, advising a --duration counted runs do not have."""
    from redline.bench.server_runner import _metrics
    from redline.server.probes import WindowProbe
    from redline.topology.cpus import CpuPlan
    test = load_test(write_suite(tmp_path, "slow", "--ratio 0:1 -c 5 -t 1 --pipeline 10 --test-time 2"))
    report = LoadReport(canned_report(ops=40, measured_s=2.0, p50_ms=1_500.0, client_cpu=(1.5, 0.375)))
    probe = WindowProbe(pids=[], client=None, info_start={"keyspace_hits": 0, "keyspace_misses": 0},
                        info_end={"keyspace_hits": 40, "keyspace_misses": 0, "used_memory": 1})
    plan = CpuPlan(roles=("primary",), servers=((0,),), client_cpus=(1,))
    _, _, timed_flags = _metrics(test, report, probe, plan)
    assert "client saturated its core" in timed_flags
    assert any(flag.startswith("window too short") for flag in timed_flags)
    _, _, counted_flags = _metrics(test, report, probe, plan, window_is_time=False)
    assert counted_flags == []
