"""A callgrind dump of the measured window → the per-operation metrics.

    instructions_per_op          Ir of the whole server process over the window, less the
                                 time-driven work (serverCron and what it calls), ÷ operations
    instructions_per_op_command  Ir inside the command-execution function (Redis's, Valkey's and
                                 KeyDB's `call()`), inclusive of everything it calls ÷ operations
    est_cycles_per_op            (Ir + 10 × L1 misses + 100 × LL misses) ÷ operations, where
                                 L1 misses = I1mr + D1mr + D1mw and LL misses = ILmr + DLmr + DLmw
                                 (the usual callgrind/KCachegrind estimate, no branch term),
                                 also less serverCron's own share

Why serverCron is left out: it runs `hz` times per wall-clock second, not per request. Under
callgrind a second holds 20-50x fewer requests than natively, so its cost per request is
inflated 20-50x and moves with the machine's load (measured: 13 to 19 cron runs in the same
5,000-SET window on a busy machine, 2.5% between A/A runs of the whole-process count; 0.3%
without it). Its cost is recorded apart (`window_cron_instructions`, `cron_calls`).
"""

from __future__ import annotations

from redline.instructions.callgrind_file import CallgrindDump

COMMAND_FUNCTION = "call"
TIME_DRIVEN_FUNCTION = "serverCron"
L1_MISSES = ("I1mr", "D1mr", "D1mw")
LL_MISSES = ("ILmr", "DLmr", "DLmw")
L1_MISS_CYCLES, LL_MISS_CYCLES = 10, 100


def request_driven(dump: CallgrindDump, event: str = "Ir") -> int:
    """The window's count of `event` without the time-driven function's inclusive share."""
    return dump.total(event) - (dump.inclusive(TIME_DRIVEN_FUNCTION, event) or 0)


def estimated_cycles(dump: CallgrindDump) -> int | None:
    """Ir + 10 × L1 misses + 100 × LL misses of the request-driven work; None without the cache
    simulation's events."""
    if not all(event in dump.events for event in (*L1_MISSES, *LL_MISSES)):
        return None
    return (request_driven(dump, "Ir") + L1_MISS_CYCLES * sum(request_driven(dump, e) for e in L1_MISSES)
            + LL_MISS_CYCLES * sum(request_driven(dump, e) for e in LL_MISSES))


def window_metrics(dump: CallgrindDump, ops: int, command_function: str = COMMAND_FUNCTION) -> dict[str, float | None]:
    """The three per-operation metrics and the raw window totals behind them."""
    if ops <= 0:
        return {"instructions_per_op": None, "instructions_per_op_command": None, "est_cycles_per_op": None}
    command = dump.inclusive(command_function)
    cycles = estimated_cycles(dump)
    return {
        "instructions_per_op": request_driven(dump, "Ir") / ops,
        "instructions_per_op_command": command / ops if command is not None else None,
        "est_cycles_per_op": cycles / ops if cycles is not None else None,
        "window_instructions": float(dump.total("Ir")),
        "window_l1_misses": float(sum(dump.total(e) for e in L1_MISSES)),
        "window_ll_misses": float(sum(dump.total(e) for e in LL_MISSES)),
        "command_calls": float(dump.calls_of(command_function)),
        "window_cron_instructions": float(dump.inclusive(TIME_DRIVEN_FUNCTION) or 0),
        "cron_calls": float(dump.calls_of(TIME_DRIVEN_FUNCTION)),
    }
