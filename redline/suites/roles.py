"""The client tools redline-load plays as native roles (`redline-load --role TOOL ...`).

`loadgen/role_options.tsv` is the one table of their flags: redline-load compiles it in, this
module reads it to check a suite's `clientconfig.arguments` for such a tool (an unknown flag or a
bad value is an error at its line, the same decision redline-load takes) and to say which Redis
commands each role sends (what the server must know, and whether the run writes).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .memtier import ArgumentProblem

TABLE_PATH = Path(__file__).resolve().parents[2] / "loadgen" / "role_options.tsv"
REDLINE_ROLE = "*"          # redline's own flags every role takes (where, how long, the output)
INT_KINDS = ("int",)

# The Redis commands each role sends (docs/suites.md, "Roles"): checked against the server's
# COMMAND INFO like a memtier line's, and deciding whether a run writes.
ROLE_COMMANDS: dict[str, list[list[str]]] = {
    "pubsub-sub-bench": [["SUBSCRIBE"], ["SSUBSCRIBE"]],
    "bcast-listener": [["HELLO"], ["CLIENT", "TRACKING"], ["ACL", "SETUSER"], ["ACL", "DELUSER"]],
    "sidekiq-bench": [["SADD"], ["LPUSH"], ["BRPOP"], ["CLIENT", "UNBLOCK"]],
    "celery-bench": [["LPUSH"], ["BRPOP"], ["HSET"], ["ZADD"], ["ZREM"], ["HDEL"], ["CLIENT", "UNBLOCK"]],
    "resque-bench": [["SADD"], ["RPUSH"], ["LPOP"]],
    # BullMQ's steps run in scripts (EVALSHA): the commands inside them are listed too
    "bullmq-bench": [["SCRIPT", "LOAD"], ["EVALSHA"], ["BZPOPMIN"], ["HSET"], ["LPUSH"], ["ZADD"], ["RPOPLPUSH"],
                     ["SET"], ["HGET"], ["LREM"], ["DEL"], ["CLIENT", "UNBLOCK"]],
    # the worker pops with BLMOVE (one queue) only where INFO says Redis >= 6.2, as RQ does;
    # BLPOP everywhere else, so BLMOVE is not something the server must know
    "rq-bench": [["MULTI"], ["EXEC"], ["SADD"], ["HSET"], ["RPUSH"], ["INFO"], ["CLIENT", "SETNAME"], ["EXISTS"],
                 ["EXPIRE"], ["BLPOP"], ["HGETALL"], ["ZADD"], ["PERSIST"], ["LREM"], ["WATCH"], ["SMEMBERS"],
                 ["HINCRBY"], ["HINCRBYFLOAT"], ["XADD"], ["DEL"], ["ZREM"], ["SREM"], ["CLIENT", "UNBLOCK"]],
}
JOB_QUEUE_ROLES = ("sidekiq-bench", "celery-bench", "resque-bench", "bullmq-bench", "rq-bench")


@dataclass(frozen=True)
class RoleFlag:
    role: str
    flag: str
    kind: str
    default: str
    meaning: str


@cache
def flag_table() -> dict[tuple[str, str], RoleFlag]:
    table = {}
    for line in TABLE_PATH.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        role, flag, kind, default, meaning = (line.split("\t") + [""] * 5)[:5]
        table[(role, flag)] = RoleFlag(role, flag, kind, default, meaning)
    return table


def roles() -> list[str]:
    return sorted({role for role, _ in flag_table() if role != REDLINE_ROLE})


def is_role(tool: str) -> bool:
    return tool in roles()


def _value_problem(spec: RoleFlag, value: str) -> str | None:
    if spec.kind == "int" and not value.isdigit():
        return "a whole number"
    if spec.kind == "seconds":
        try:
            if float(value) < 0:
                return "a number of seconds"
        except ValueError:
            return "a number of seconds"
    if spec.kind == "bool" and value not in ("true", "false"):
        return "true or false"
    if spec.kind == "mode" and value not in ("subscribe", "ssubscribe"):
        return "subscribe or ssubscribe"
    return None


def check_arguments(tool: str, argv: list[str]) -> list[ArgumentProblem]:
    """What is wrong with a role's argument line, in redline-load's words. redline's own flags
    (the `*` rows) are refused in a suite: redline sets where the load goes and for how long."""
    table = flag_table()
    problems: list[ArgumentProblem] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        body = token[2:] if token.startswith("--") else token[1:] if token.startswith("-") else ""
        if not body:
            problems.append(ArgumentProblem("error", f"{tool}: unexpected argument '{token}' (flags start with - or --)", token))
            index += 1
            continue
        name, _, inline = body.partition("=")
        spec = table.get((tool, name))
        if spec is None:
            owned = (REDLINE_ROLE, name) in table
            problems.append(ArgumentProblem(
                "warning" if owned else "error",
                f"{tool}: '{token}' is set by redline (dropped)" if owned else f"{tool}: unknown flag '{token}'",
                token, owned=owned))
            if not owned:
                break           # what follows cannot be read without knowing this flag (redline-load stops too)
            if "=" not in body and table[(REDLINE_ROLE, name)].kind != "bool":
                index += 1
            index += 1
            continue
        if spec.kind == "bool":
            value = inline or "true"
        elif "=" in body:
            value = inline
        elif index + 1 < len(argv):
            index += 1
            value = argv[index]
        else:
            problems.append(ArgumentProblem("error", f"{tool}: {token} needs a value", token))
            break
        want = _value_problem(spec, value)
        if want:
            problems.append(ArgumentProblem("error", f"{tool}: -{name} must be {want}, got '{value}'", token))
        index += 1
    return problems


def without_owned(tool: str, argv: list[str]) -> list[str]:
    """The argument line without redline's own flags (a suite's are dropped, redline adds its own)."""
    table = flag_table()
    out, index = [], 0
    while index < len(argv):
        token = argv[index]
        body = token.lstrip("-")
        name = body.partition("=")[0]
        if token.startswith("-") and (tool, name) not in table and (REDLINE_ROLE, name) in table:
            takes_value = "=" not in body and table[(REDLINE_ROLE, name)].kind != "bool"
            index += 2 if takes_value else 1
            continue
        out.append(token)
        index += 1
    return out


def own_test_time(tool: str, argv: list[str]) -> float | None:
    """The tool's own -test-time, if the line gives one."""
    for index, token in enumerate(argv):
        name, _, inline = token.lstrip("-").partition("=")
        if name == "test-time" and token.startswith("-") and (tool, name) in flag_table():
            value = inline or (argv[index + 1] if index + 1 < len(argv) else "")
            return float(value) if value.isdigit() else None
    return None


def role_commands(tool: str) -> list[list[str]]:
    return ROLE_COMMANDS.get(tool, [])
