"""A server process under valgrind's callgrind: how it is started and how its counters are
emptied and written around the measured requests.

The server starts with instrumentation off (`--instr-atstart=no`): valgrind runs it
uninstrumented, several times faster than under callgrind's cache simulation, so starting,
loading a snapshot and preparing a dataset cost seconds rather than minutes (the other way to
keep preparation out of the counts, `--collect-atstart=no`, simulates everything from the start
and cannot be switched on by a monitor command). Each run switches instrumentation off and on
again before its probe and warm-up (which clears callgrind's cache simulation: the second run on
a server starts as cold as the first); `dump` after the warm-up writes and empties the counters,
and `dump` after the fixed number of measured requests writes exactly that window's costs to a
new numbered file (redline.instructions.window).

These are callgrind's monitor commands, sent with `vgdb` (the program `callgrind_control` itself
calls; calling it directly saves a Perl start and a process listing per command). vgdb returns
once the server executed the command: it is delivered the next time the server runs (redis
wakes at least `hz` times a second) or, while the server sleeps in a system call, through
ptrace. Each command is therefore complete before the next load starts, and the window holds
the measured requests and nothing of the warm-up.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from redline.core.errors import RunError

# --separate-recs=2 (callgrind's default, pinned: the command metric relies on it) names an
# activation entered while another of the same function is active `name'2`, so the outermost
# command execution is told from nested ones (redline.instructions.callgrind_file)
VALGRIND_OPTIONS = ("--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no", "--vgdb=yes",
                    "--compress-strings=no", "--compress-pos=no", "--error-limit=no", "--separate-recs=2")
OUT_NAME = "callgrind.out"
VGDB_PREFIX_NAME = "vgdb"
COMMAND_TIMEOUT_S = 120.0       # a command waits for the server's next wake-up or a ptrace; never this long
# Under callgrind a server runs 20-50x slower; uninstrumented (until `instrumentation on`) about 4-8x.
START_SLOWDOWN = 10.0


def find_valgrind() -> tuple[Path, Path]:
    """valgrind and vgdb, as Debian's `valgrind` package installs them (setup.sh)."""
    valgrind, vgdb = shutil.which("valgrind"), shutil.which("vgdb")
    if not valgrind or not vgdb:
        raise RunError("valgrind is not installed (needed by --measure instructions): run `bash setup.sh`")
    return Path(valgrind), Path(vgdb)


def valgrind_prefix(workdir: Path) -> list[str]:
    """The command line that runs a server under callgrind, its dumps and vgdb FIFOs in `workdir`,
    with the fixed hash seed preloaded (redline.server.seed)."""
    from redline.server.seed import preloaded
    valgrind, _ = find_valgrind()
    workdir = Path(workdir)
    return preloaded([str(valgrind), *VALGRIND_OPTIONS, f"--vgdb-prefix={workdir / VGDB_PREFIX_NAME}",
                      f"--callgrind-out-file={workdir / OUT_NAME}.%p"])


class CallgrindControl:
    """The monitor commands of one server process running under `valgrind_prefix(workdir)`."""

    def __init__(self, pid: int, workdir: Path):
        self.pid, self.workdir = pid, Path(workdir)
        _, self.vgdb = find_valgrind()

    def _monitor(self, *command: str) -> str:
        argv = [str(self.vgdb), f"--vgdb-prefix={self.workdir / VGDB_PREFIX_NAME}", f"--pid={self.pid}", *command]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise RunError(f"callgrind did not execute '{' '.join(command)}' within {COMMAND_TIMEOUT_S:.0f}s "
                           f"(server pid {self.pid})") from None
        if proc.returncode != 0:
            said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            raise RunError(f"callgrind command '{' '.join(command)}' failed for pid {self.pid}: "
                           f"{said[-1] if said else f'vgdb exit {proc.returncode}'}")
        return proc.stdout

    def instrumentation_restart(self) -> None:
        """Instrumentation off (if it was on) and on again, then the counters zeroed: callgrind
        starts from a cleared cache simulation, so every run's simulated caches start equally
        cold, whatever ran before on this server.

        The zero is needed. Switching instrumentation on restarts callgrind's running counter
        from 0 but keeps the counter's value L at the previous dump (a previous run's window),
        and does not empty the per-function costs: the next dump would report its total as
        (counter - L) mod 2^64, every call active at the switch with an entry cost of L (its arc
        wraps the same way), and the functions' own costs of everything since that dump (the
        server idling between runs). `zero` empties the costs and sets the mark to the counter
        (callgrind's zero_all_cost), so the probe's dump holds the probe."""
        self._monitor("instrumentation", "off")
        self._monitor("instrumentation", "on")
        self._monitor("zero")

    def dump(self) -> Path:
        """Write the counters since the last zero or dump to a new file and return it (the
        counters restart from zero)."""
        before = set(self._dumps())
        self._monitor("dump")
        new = sorted(set(self._dumps()) - before, key=lambda p: int(p.name.rsplit(".", 1)[1]))
        if not new:
            raise RunError(f"callgrind wrote no dump file for pid {self.pid} in {self.workdir}")
        return new[-1]

    def _dumps(self) -> list[Path]:
        """Numbered dumps (`callgrind.out.PID.N`); the one written at exit has no number."""
        return list(self.workdir.glob(f"{OUT_NAME}.{self.pid}.*"))


# Under valgrind a command runs 20-50x slower and the server is descheduled on a busy machine, so
# commands that natively take microseconds pass the slow log's 10 ms and get an entry (argv copied,
# the oldest entry freed): inside call(), as many as the machine's load makes. Measured on GET
# windows: 4-10 entries in 3,750 requests, +14-17 instructions per op in call() (1.0-1.3%, varying
# with the load); with the slow log off, call() read 1,444.5-1,445.1 in three runs. A suite's own
# setting is kept.
# Active rehashing is the same kind of thing: serverCron rehashes a growing dict for 1 ms of wall
# time per call, and whatever it did not do, dictAdd/dictFind do inside call(); under valgrind on a
# busy machine that split follows the load. Measured (`redline compare quick --name
# 'string-set-100B-pipeline-1$' --measure instructions --window-instructions 20000000 --runs 2`,
# one binary, 3 busy loops beside it, three A/As each way, alternating): SET's instructions per op
# inside call() 2,589.7-2,663.5 by default (a 2.8% spread, the CI's false A/A verdict) and
# 2,663.5-2,666.8 with `activerehashing no` (0.1%): every rehash step is then counted in call(), as
# the command's own cost, the same on every run.
COUNTED_CONFIG = {"slowlog-log-slower-than": "-1", "activerehashing": "no"}


def under_callgrind(settings):
    """`settings` (a redline.server.process.ServerSettings) for the same server under callgrind: the
    valgrind prefix, a start timeout that allows for valgrind's start and slower loading, and
    COUNTED_CONFIG where the configuration does not say otherwise."""
    from dataclasses import replace
    return replace(settings, launcher=valgrind_prefix, start_timeout_s=settings.start_timeout_s * START_SLOWDOWN,
                   config={**COUNTED_CONFIG, **settings.config})


def control_of(server) -> CallgrindControl:
    """The callgrind commands of a started server (a ManagedServer, or a one-server deployment's
    entry node) that runs under callgrind."""
    node = getattr(server, "entry", server)
    pids = node.pids()
    if not pids:
        raise RunError("the server under callgrind is not running")
    return CallgrindControl(pids[0], node.workdir)
