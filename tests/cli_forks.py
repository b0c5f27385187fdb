"""Many short redline command lines, each in a process of its own, without paying for Python's
start and redline's imports once per command line (about 1-2 s of CPU each on these machines).

`run_many(cases, cwd)` starts one Python process that imports redline.cli and every command module,
then forks one child per command line. A child changes to `cwd`, points its stdout and stderr at
files and calls `redline.cli.main(arguments)`, the function `python -m redline.cli` runs, and exits
with what it returned: exit code, stdout and stderr are those of `redline ARGS...`. Children run
two at a time; one that has not ended after `timeout_s` is killed (exit code -9).

Only what happens before Python reaches `main()` differs from a fresh `redline` process, so the
tests that need the real start (signals, atexit, the console script) run the CLI as a user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARALLEL = 2


def run_many(cases: list[list[str]], cwd: Path, *, timeout_s: float = 300) -> list[subprocess.CompletedProcess]:
    """One CompletedProcess per command line of `cases`, in their order."""
    with tempfile.TemporaryDirectory(prefix="redline-forks-") as scratch:
        request = Path(scratch) / "cases.json"
        request.write_text(json.dumps({"cases": [[str(a) for a in case] for case in cases], "cwd": str(cwd),
                                       "scratch": scratch, "timeout_s": timeout_s}))
        server = subprocess.run([sys.executable, __file__, str(request)], capture_output=True, text=True,
                                timeout=timeout_s * len(cases) + 120, env={**os.environ, "COLUMNS": "200"},
                                cwd=REPO)
        if server.returncode != 0:
            raise AssertionError(f"the forking process failed ({server.returncode}):\n{server.stderr[-3000:]}")
        codes = json.loads(server.stdout)
        return [subprocess.CompletedProcess(["redline", *case], codes[i],
                                            Path(scratch, f"{i}.out").read_text(errors="replace"),
                                            Path(scratch, f"{i}.err").read_text(errors="replace"))
                for i, case in enumerate(cases)]


def _child(arguments: list[str], cwd: str, out: str, err: str) -> None:
    """In the forked child: run main() as `redline ARGS` would, then leave with its exit code."""
    code = 1
    try:
        os.chdir(cwd)
        for fd, path in ((1, out), (2, err)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        from redline.cli import main
        code = main(arguments)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


def _serve(request_path: str) -> None:
    import signal
    import time

    from redline.cli import build_parser
    build_parser()                          # every command module imported once, before any fork
    request = json.loads(Path(request_path).read_text())
    cases, cwd, scratch, timeout_s = request["cases"], request["cwd"], request["scratch"], request["timeout_s"]
    codes: list[int | None] = [None] * len(cases)
    running: dict[int, tuple[int, float]] = {}            # pid -> (case index, deadline)
    pending = list(range(len(cases)))
    while pending or running:
        while pending and len(running) < PARALLEL:
            index = pending.pop(0)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(cases[index], cwd, f"{scratch}/{index}.out", f"{scratch}/{index}.err")
            running[pid] = (index, time.monotonic() + timeout_s)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for late, (index, deadline) in list(running.items()):
                if time.monotonic() > deadline:
                    os.kill(late, signal.SIGKILL)
            time.sleep(0.01)
            continue
        index, _ = running.pop(pid)
        codes[index] = os.waitstatus_to_exitcode(status)
    print(json.dumps(codes))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    _serve(sys.argv[1])
