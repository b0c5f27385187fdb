"""One scheduler for counted and timed work on this machine (DESIGN.md §6).

It decides which job runs where and when, and nothing else: every job is executed the one way jobs
are executed (redline.lab.local.execute_job over an engine made for its cores, by default
local_engine), so its runs go to the store and the sinks exactly as they do there.

* **Counted** jobs (the test's measure is instructions: the server under callgrind) run side by
  side in *lanes*. The machine's cores are split into `lanes` groups of consecutive cores, one
  group per lane; a lane runs one job at a time, its server and its client on its own cores.
  Never more lanes than cores.
* **Timed** jobs wait until every lane is empty, then hold the whole machine (every core) until
  they end: no lane runs beside a timed run. Between processes (another gate, a fleet agent, a
  `redline compare`) the engine's machine lock keeps the same rule (redline.system.machine_share).
* Memory is shared like the cores: a counted job starts beside others only while the memory the
  running jobs hold (their preloads' estimate, every side, redline.bench.admission) plus its own
  stays within the share of the machine's available memory a preload may take; a job that needs
  more runs alone.
* Jobs start in the order given (`priority(job)` first, when given; asked again whenever jobs
  start, so it may follow what ended jobs found). A job at the head of the queue is not overtaken
  by the jobs behind it: the lanes drain for a timed job (or a big one).
* `stop()` returning true stops new work: no job starts any more, the running ones finish, and
  the jobs that never started are `not_started`.
* `on_done(job, runs)` is called here, in the scheduler's process, as each job ends; the jobs it
  returns join the queue (a gate's timed confirmation of a test whose counts moved).

**Lanes are processes, forked per job**, not threads, for four reasons found in this code base
(docs/gate.md, "Threads or processes", has the evidence):

1. Interruption. Python delivers SIGINT and SIGTERM (redline turns SIGTERM into
   KeyboardInterrupt) to the main thread only. The engine marks a run `interrupted` by catching
   the KeyboardInterrupt raised *inside* the measuring code; a lane thread blocked in a
   subprocess wait never sees one, so its run would end `failed` (its server killed under it) or
   stay `running`. A lane process is a main thread: Ctrl-C reaches it, the scheduler forwards
   SIGTERM, and the parent-death signal (SIGTERM) covers a scheduler killed with SIGKILL — each
   lane marks its own run `interrupted` by the same path a lone `redline run` does.
2. The store. A sqlite3 connection refuses use from another thread (check_same_thread); each
   lane process opens its own connection to the same WAL store, as two redline processes do.
3. Child processes die with the *thread* that forked them (PR_SET_PDEATHSIG,
   redline.system.children): a lane thread that ends before its servers would kill them.
4. The GIL: parsing a callgrind dump and rendering its profile is Python work that threads would
   take turns at.

Forking (rather than spawning a fresh interpreter) keeps what the scheduler's process resolved —
built targets, loaded tests, the server-traits cache — and lets a caller's adaptive rule (a
closure) go with the job. The scheduler's process runs no threads of its own, and closes its store
connection for the moment of each fork (`Store.disconnected`: SQLite's lock bookkeeping of an open
connection must not be inherited; the lane opens its own).

**Shared preparation.** Before the first fork the traits of every side's binary are read once
(redline.server.traits: its RDB version keys the snapshots), so every lane inherits them. A
dataset is prepared once for every lane and side: the first lane to need a snapshot that is not
cached yet prepares and saves it under the snapshot's preparation lock
(redline.datasets.snapshot.SnapshotCache.preparing), a lane that needs the same one meanwhile
waits and then restores it — the same-state rule (redline.bench.state) holds across lanes.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence

from redline.core.errors import RunError, UsageError
from redline.core.run import Run
from redline.engine.engine import Engine, MoreRuns
from redline.engine.job import Job, JobResolver
from redline.engine.run_plan import OBSERVER_EVENTS, Observer
from redline.engine.sinks import ResultSink
from redline.system.children import PR_SET_PDEATHSIG, _libc, signals_deferred
from redline.system.pinning import available_cpus

if TYPE_CHECKING:
    from redline.suites import TestSpec

STOP_GRACE_S = 60.0        # an interrupted lane gets this long to mark its run and stop its servers
UNDER_VALGRIND = 1.5       # a server under valgrind holds about this much more memory than natively
POLL_S = 0.5               # how often stop() is asked while every lane is busy


class _Lost(Exception):
    """A lane process that ended without saying how its job went."""


@dataclass(frozen=True)
class Lane:
    """Where a job runs: a lane's cores, or the whole machine (`index` MACHINE) for a timed job."""

    index: int
    cpus: tuple[int, ...]

    MACHINE = -1

    @property
    def name(self) -> str:
        return "machine" if self.index == Lane.MACHINE else f"lane {self.index + 1}"


def plan_lanes(cpus: Sequence[int], lanes: int) -> list[Lane]:
    """`lanes` groups of consecutive cores out of `cpus`, as equal as possible; UsageError when
    there are fewer cores than lanes (a lane needs a core of its own)."""
    cpus = sorted(cpus)
    if not 1 <= lanes <= len(cpus):
        raise UsageError(f"--jobs {lanes}: this machine gives redline {len(cpus)} core(s) "
                         f"({','.join(map(str, cpus))}); each lane needs one of its own")
    size, extra = divmod(len(cpus), lanes)
    out, start = [], 0
    for index in range(lanes):
        width = size + (1 if index < extra else 0)
        out.append(Lane(index, tuple(cpus[start:start + width])))
        start += width
    return out


def default_lanes(cpus: Sequence[int]) -> int:
    """One lane per core: a counted server runs under valgrind, which runs its threads one at a
    time, and its client mostly waits for it (tests/test_scheduler_real.py: counts in lanes of one
    core agree with counts taken alone on two)."""
    return max(1, len(cpus))


def counted(job: Job, test: TestSpec) -> bool:
    """Does the job count instructions (a lane job) rather than time (a whole-machine job)?"""
    return job.run_settings().counts(test)


class SchedulerObserver:
    """What the scheduler tells the outside world: which job starts where, what the engine in each
    lane reports (the events of redline.engine.run_plan.Observer, with the lane), what ended, and
    how much is left."""

    def job_started(self, lane: Lane, job: Job, test: TestSpec) -> None: ...
    def lane_event(self, lane: Lane, event: str, *args, **kwargs) -> None: ...
    def job_finished(self, lane: Lane, job: Job, runs: list[Run], lost: str | None) -> None: ...
    def status(self, status: Status) -> None: ...


class EngineEvents(SchedulerObserver):
    """A plain engine Observer (e.g. the console's) fed with every lane's events, one after another."""

    def __init__(self, observer: Observer):
        self.observer = observer

    def lane_event(self, lane: Lane, event: str, *args, **kwargs) -> None:
        getattr(self.observer, event)(*args, **kwargs)


@dataclass
class Status:
    """The queue and the lanes, and a time-left estimate from the jobs that ended so far."""

    lanes: int
    running: dict[str, str]            # lane name -> test
    waiting_counted: int
    waiting_timed: int
    finished: int
    mean_counted_s: float | None       # wall time of a counted job in a lane
    mean_timed_s: float | None

    @property
    def left_s(self) -> float | None:
        """Counted work shares the lanes, timed work runs alone; None until a job of each waiting
        kind has ended (`at_least_s` gives what is known meanwhile)."""
        left, complete = self.at_least_s
        return left if complete else None

    @property
    def at_least_s(self) -> tuple[float, bool]:
        """(the time left for the waiting jobs of the kinds whose cost is known, whether that is all)."""
        left, complete = 0.0, True
        for waiting, mean, share in ((self.waiting_counted, self.mean_counted_s, self.lanes),
                                     (self.waiting_timed, self.mean_timed_s, 1)):
            if waiting and mean is None:
                complete = False
            elif waiting:
                left += waiting * mean / share
        return left, complete


EngineFactory = Callable[[Lane, Observer], Engine]


def local_engines(store_path: Path, sinks: Sequence[ResultSink] = ()) -> EngineFactory:
    """The real engine for a lane, made in the lane's process: its own connection to the store
    (first sink), then `sinks`, on the lane's cores."""
    from redline.lab.local import local_engine
    from redline.store.results import Store

    def engine_for(lane: Lane, observer: Observer) -> Engine:
        return local_engine(Store(store_path), observers=[observer], sinks=sinks, cpus=list(lane.cpus))
    return engine_for


@dataclass
class _Running:
    job: Job
    lane: Lane
    pid: int
    fd: int
    started: float
    kind: str                          # "counted" | "timed"
    memory: int = 0                    # bytes its servers hold (estimated)
    buffer: bytes = b""
    outcome: dict | None = None        # the lane's last word: {"done": [...]}, {"interrupted": …}, {"error": …}


@dataclass
class _Queued:
    job: Job
    test: TestSpec
    kind: str
    order: tuple
    memory: int = 0


def estimated_memory(job: Job, test: TestSpec) -> int:
    """What a job's servers hold while it runs: the preload's estimate for every side (both sides'
    servers are up for the whole job), more under valgrind."""
    from redline.bench.admission import estimated_preload_bytes
    factor = UNDER_VALGRIND if counted(job, test) else 1.0
    return int(estimated_preload_bytes(test) * len(job.sides) * factor)


class Scheduler:
    """Scheduler(store, lanes=N).run(jobs, session_id=…) -> {job_id: runs}; see the module docstring.

    `store`: the result store (its path is opened again in each lane process). `cpus`: the cores
    to use (default: this process's). `engines`: how a lane makes its engine (default
    local_engines(store.path, sinks)); tests give fakes. `sinks` run in the lane's process: they
    must open their connections there."""

    def __init__(self, store, *, lanes: int | None = None, cpus: Sequence[int] | None = None,
                 observers: Sequence[SchedulerObserver] = (), sinks: Sequence[ResultSink] = (),
                 engines: EngineFactory | None = None, clock: Callable[[], float] = time.monotonic,
                 memory: Callable[[Job, TestSpec], int] = estimated_memory, memory_limit: int | None = None):
        self.cpus = tuple(sorted(cpus if cpus is not None else available_cpus()))
        self.lanes = plan_lanes(self.cpus, lanes if lanes is not None else default_lanes(self.cpus))
        self.machine = Lane(Lane.MACHINE, self.cpus)
        self.observers = list(observers)
        self.store = store
        self.engines = engines or local_engines(Path(store.path), sinks)
        self.warm = _warm_traits if engines is None else (lambda resolver: None)   # fakes start no server
        self.clock = clock
        self.memory, self.memory_limit = memory, memory_limit
        self.not_started: list[Job] = []
        self.lost: dict[str, str] = {}           # job_id -> why its lane gave no runs
        self._durations: dict[str, list[float]] = {"counted": [], "timed": []}

    # -- the one call ----------------------------------------------------------------------------
    def run(self, jobs: Iterable[Job], *, session_id: int | None, resolver: JobResolver | None = None,
            floors: dict | None = None, more_runs: Callable[[Job], MoreRuns | None] | None = None,
            on_done: Callable[[Job, list[Run]], Iterable[Job] | None] | None = None,
            stop: Callable[[], bool] | None = None,
            priority: Callable[[Job], object] | None = None) -> dict[str, list[Run]]:
        """Every job, counted ones in lanes and timed ones alone, until the queue is empty or
        `stop()`; returns each finished job's runs by job_id. `more_runs(job)`: the job's adaptive
        rule (None: compare's, as execute_job). `resolver`: tests and ready sides (built targets)
        the jobs name, resolved here once and inherited by every lane."""
        resolver = resolver or JobResolver()
        self.not_started, self.lost = [], {}
        queue: list[_Queued] = []
        sequence = iter(range(1 << 62))
        results: dict[str, list[Run]] = {}
        running: dict[int, _Running] = {}          # fd -> the job running there
        selector = selectors.DefaultSelector()
        started = 0

        def enqueue(new: Iterable[Job]) -> None:
            for job in new:
                test = resolver.test(job)
                for spec in job.sides:
                    resolver.side(spec)            # built (or found in the build cache) here, once
                kind = "counted" if counted(job, test) else "timed"
                queue.append(_Queued(job, test, kind, (0, next(sequence)), self.memory(job, test)))

        def reorder() -> None:
            """Asked again once jobs have ended: a priority may follow what they found."""
            if priority is not None:
                for queued in queue:
                    queued.order = (priority(queued.job), queued.order[1])
            queue.sort(key=lambda queued: queued.order)

        if self.memory_limit is None:
            from redline.bench.admission import MEMORY_SHARE, available_memory_bytes
            self.memory_limit = int(MEMORY_SHARE * available_memory_bytes())
        enqueue(jobs)
        changed = True
        self.warm(resolver)
        try:
            while True:
                if stop is not None and queue and stop():
                    # jobs that ended after the stop may still add some (their confirmations): kept too
                    self.not_started += [queued.job for queued in queue]
                    queue.clear()
                if changed:
                    reorder()
                    changed = False
                while queue:
                    head = queue[0]
                    lane = self._free_lane(head, running)
                    if lane is None:
                        break
                    queue.pop(0)
                    started += 1
                    entry = self._start(head, lane, session_id=session_id, resolver=resolver, floors=floors,
                                        more_runs=more_runs(head.job) if more_runs else None,
                                        position=(started, started + len(queue) + len(running)))
                    entry.memory = head.memory
                    running[entry.fd] = entry
                    selector.register(entry.fd, selectors.EVENT_READ)
                    self._tell("job_started", entry.lane, entry.job, head.test)
                    self._status(queue, running)
                if not running:
                    break
                for key, _ in selector.select(timeout=POLL_S):
                    entry = running[key.fd]
                    if self._read(entry, resolver):
                        selector.unregister(entry.fd)
                        del running[entry.fd]
                        runs = self._finish(entry)
                        results[entry.job.job_id] = runs
                        changed = True
                        if on_done is not None:
                            enqueue(on_done(entry.job, runs) or ())
                        self._status(queue, running)
        except BaseException:
            self._stop_lanes(running, selector, resolver)
            raise
        finally:
            selector.close()
        return results

    # -- where and when ----------------------------------------------------------------------------
    def _free_lane(self, queued: _Queued, running: dict[int, _Running]) -> Lane | None:
        """A lane for a counted job (none while a timed job holds the machine, nor while the memory
        the running jobs hold leaves too little for it); the machine for a timed job once every
        lane is empty."""
        if queued.kind == "timed":
            return self.machine if not running else None
        busy = {entry.lane.index for entry in running.values()}
        if Lane.MACHINE in busy:
            return None
        if running and sum(entry.memory for entry in running.values()) + queued.memory > self.memory_limit:
            return None
        return next((lane for lane in self.lanes if lane.index not in busy), None)

    def _start(self, queued: _Queued, lane: Lane, *, session_id, resolver, floors, more_runs, position) -> _Running:
        read_fd, write_fd = os.pipe()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        with signals_deferred(), _no_connection(self.store):   # a Ctrl-C now is delivered once the lane is known
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _lane_main(write_fd, queued.job, lane, self.engines, session_id=session_id, resolver=resolver,
                           floors=floors, more_runs=more_runs, position=position)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        return _Running(queued.job, lane, pid, read_fd, self.clock(), queued.kind)

    # -- what the lanes say ----------------------------------------------------------------------
    def _read(self, entry: _Running, resolver: JobResolver) -> bool:
        """Take what the lane wrote; True when its pipe closed (the job ended)."""
        try:
            chunk = os.read(entry.fd, 1 << 16)
        except BlockingIOError:
            return False
        if chunk:
            entry.buffer += chunk
            *lines, entry.buffer = entry.buffer.split(b"\n")
            for line in lines:
                self._message(entry, json.loads(line), resolver)
            return False
        return True

    def _message(self, entry: _Running, message: dict, resolver: JobResolver) -> None:
        if "event" in message:
            event, args, kwargs = message["event"], message.get("args") or [], message.get("kwargs") or {}
            if event in ("test_started", "test_skipped"):
                args = [resolver.test(entry.job), *args[1:]]
            elif event == "run_finished":
                args = [Run.from_json(args[0])]
            self._tell("lane_event", entry.lane, event, *args, **kwargs)
        else:
            entry.outcome = message

    def _finish(self, entry: _Running) -> list[Run]:
        """Reap the lane's process; its runs, or none and why (`lost`). A lane that reports bad
        input or a failure of redline itself (the store, a build) ends the scheduler with it."""
        os.close(entry.fd)
        _, status = os.waitpid(entry.pid, 0)
        self._durations[entry.kind].append(self.clock() - entry.started)
        outcome = entry.outcome or {}
        runs: list[Run] = []
        lost = None
        if "done" in outcome:
            runs = [Run.from_json(document) for document in outcome["done"]]
        elif "error" in outcome:
            error = UsageError if outcome.get("usage") else RunError
            raise error(outcome["error"])
        else:       # killed (the OOM killer), or interrupted on its own while the scheduler was not
            why = "it was interrupted" if "interrupted" in outcome else _exit_description(status)
            lost = f"the {entry.lane.name} process running {entry.job.test} ended without a result ({why})"
            self.lost[entry.job.job_id] = lost
        self._tell("job_finished", entry.lane, entry.job, runs, lost)
        return runs

    def _stop_lanes(self, running: dict[int, _Running], selector, resolver: JobResolver) -> None:
        """Interrupted (or failing): every lane is told to stop (SIGTERM: it marks its run
        interrupted and stops its servers) and is waited for; one that does not end within
        STOP_GRACE_S, or a second interrupt, kills them (their runs are then marked interrupted
        when the session ends)."""
        for entry in running.values():
            _signal(entry.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        try:
            while running and time.monotonic() < deadline:
                for key, _ in selector.select(timeout=POLL_S):
                    entry = running[key.fd]
                    try:
                        ended = self._read(entry, resolver)
                    except (ValueError, KeyError):
                        ended = False
                    if ended:
                        selector.unregister(entry.fd)
                        os.close(entry.fd)
                        os.waitpid(entry.pid, 0)
                        del running[key.fd]
        finally:
            for entry in running.values():
                _signal(entry.pid, signal.SIGKILL)
                os.waitpid(entry.pid, 0)
                os.close(entry.fd)
            running.clear()

    # -- observers -------------------------------------------------------------------------------
    def _tell(self, event: str, *args, **kwargs) -> None:
        for observer in self.observers:
            getattr(observer, event)(*args, **kwargs)

    def _status(self, queue: list[_Queued], running: dict[int, _Running]) -> None:
        def mean(values: list[float]) -> float | None:
            return sum(values) / len(values) if values else None
        status = Status(lanes=len(self.lanes),
                        running={entry.lane.name: entry.job.test for entry in running.values()},
                        waiting_counted=sum(1 for q in queue if q.kind == "counted"),
                        waiting_timed=sum(1 for q in queue if q.kind == "timed"),
                        finished=sum(len(v) for v in self._durations.values()),
                        mean_counted_s=mean(self._durations["counted"]), mean_timed_s=mean(self._durations["timed"]))
        self._tell("status", status)


@contextmanager
def _no_connection(store) -> Iterator[None]:
    """The scheduler's store has no open SQLite connection while it forks (the lane opens its own):
    SQLite's lock bookkeeping of an open connection must not be inherited."""
    disconnected = getattr(store, "disconnected", None)
    if disconnected is None:
        yield
        return
    with disconnected():
        yield


def _warm_traits(resolver: JobResolver) -> None:
    """Read each managed binary's traits (RDB version, configuration, writing commands) once, here,
    so that every lane forked later has them instead of starting its own throwaway server."""
    from redline.server.traits import binary_traits
    for side in resolver.sides.values():
        if side.target.managed and side.target.binary is not None:
            binary_traits(side.target.binary)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _exit_description(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}"


# -- inside a lane's process ---------------------------------------------------------------------
class _Pipe:
    """JSON lines to the scheduler; a scheduler that is gone is not an error here (the parent-death
    signal ends the lane)."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, message: dict) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:
            pass


class _PipeObserver(Observer):
    """The engine's events, sent to the scheduler (a test as its name, a run as its document)."""

    def __init__(self, pipe: _Pipe):
        self.pipe = pipe


def _sender(event: str):
    def send(self: _PipeObserver, *args, **kwargs) -> None:
        if event in ("test_started", "test_skipped"):
            args = (args[0].name, *args[1:])
        elif event == "run_finished":
            args = (args[0].to_json(),)
        self.pipe.send({"event": event, "args": list(args), "kwargs": kwargs})
    send.__name__ = event
    return send


for _event in OBSERVER_EVENTS:
    setattr(_PipeObserver, _event, _sender(_event))


def _interrupted_once(signum, frame):
    """The first SIGINT or SIGTERM ends the lane's job like Ctrl-C ends `redline run` (the run is
    marked interrupted, the servers stopped); the ones after it (Ctrl-C reaches the lane, then the
    scheduler's SIGTERM) must not break off that cleanup."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def _lane_main(fd: int, job: Job, lane: Lane, engines: EngineFactory, *, session_id, resolver, floors, more_runs,
               position) -> None:
    """The forked lane: one job through execute_job, its runs sent back; never returns."""
    code = 1
    pipe = _Pipe(fd)
    try:
        signal.signal(signal.SIGINT, _interrupted_once)
        signal.signal(signal.SIGTERM, _interrupted_once)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)    # the scheduler killed: stop cleanly
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
        if os.getppid() == 1:
            raise KeyboardInterrupt
        # the scheduler's console may have been mid-write when it forked: the lane writes its own
        sys.stdout = open(os.devnull, "w")
        sys.stderr = open(os.devnull, "w")
        from redline.lab.local import execute_job
        engine = engines(lane, _PipeObserver(pipe))
        runs = execute_job(job, engine=engine, session_id=session_id, resolver=resolver, floors=floors,
                           position=position, more_runs=more_runs)
        pipe.send({"done": [run.to_json() for run in runs]})
        code = 0
    except KeyboardInterrupt:
        pipe.send({"interrupted": True})
        code = 130
    except UsageError as exc:
        pipe.send({"error": str(exc), "usage": True})
        code = 2
    except BaseException as exc:          # RunError (the store, a build), or a bug: said, never hidden
        detail = str(exc) if isinstance(exc, RunError) else \
            f"{lane.name}, {job.test}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        pipe.send({"error": detail})
    finally:
        os._exit(code)
