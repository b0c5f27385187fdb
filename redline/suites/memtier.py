"""memtier_benchmark command lines as a typed workload.

The upstream suites describe their load as a memtier_benchmark argument string. This module
reads the argv (already shell-split) the way memtier's getopt_long does and turns it into a
`Workload`: which commands, at which ratios, over which keys, with how many connections. It
does not run anything; it is what validation and the engine decide with.

What each option is (long name, short letter, value type and range, whether redline-load runs
it) comes from the option table redline-load reads too (loadgen/memtier_options.tsv, through
memtier_options.py); the shapes of text values and the combinations memtier refuses are checked
here, in step with loadgen/src/cli.rs (tests/test_memtier_conformance.py holds the two together).

Problems are collected, not raised: `Workload.problems` lists each with the token it is about
so the caller can point at the file and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .command_table import command_kind
from .memtier_options import (INT_MAX, OptionSpec, float_value, int_value, is_float, is_int, option_table, resolve_long,
                              short_options)
from .owned import CLIENT_OPTIONS, client_option_note, owned_command

KEY_PATTERN_LETTERS = "RGSPZ"
PLACEHOLDER_RE = re.compile(r"__[A-Za-z0-9_]+?__")
KEY_PLACEHOLDER, DATA_PLACEHOLDER = "__key__", "__data__"
MEMTIER_PLACEHOLDERS = frozenset({KEY_PLACEHOLDER, DATA_PLACEHOLDER})
MONITOR_PLACEHOLDER_RE = re.compile(r"__monitor_c\d+__")

# memtier_benchmark's defaults (config_init_defaults).
DEFAULT_CLIENTS = 50
DEFAULT_THREADS = 4
DEFAULT_RATIO = (1, 10)
DEFAULT_DATA_SIZE = 32
DEFAULT_KEY_PREFIX = "memtier-"
DEFAULT_KEY_MAXIMUM = 10_000_000
DEFAULT_REQUESTS = 10_000


@dataclass(frozen=True)
class ArgumentProblem:
    severity: str  # "error" | "warning"
    message: str
    token: str | None = None  # the argv token concerned, to locate it in the file
    owned: bool = False  # a redline-owned option (redline.suites.owned): dropped from the suite
    redline_rule: bool = False  # an error by redline's own rule (owned.py), not memtier's: redline-load runs the line


@dataclass
class Workload:
    """What a memtier_benchmark argument list asks for, with memtier's defaults filled in."""

    commands: list[list[str]] = field(default_factory=list)  # argv templates
    command_ratios: list[int] = field(default_factory=list)
    command_key_patterns: list[str] = field(default_factory=list)
    arbitrary_commands: bool = False  # False: memtier's built-in SET/GET mix (--ratio)
    ratio: tuple[int, int] = DEFAULT_RATIO  # set:get, used when arbitrary_commands is False
    key_pattern: str = "R:R"
    key_prefix: str = DEFAULT_KEY_PREFIX
    key_minimum: int = 0
    key_maximum: int = DEFAULT_KEY_MAXIMUM
    pipeline: int = 1
    clients: int = DEFAULT_CLIENTS  # connections per thread
    threads: int = DEFAULT_THREADS
    test_time: int | None = None  # seconds
    requests: int | None = None  # per connection; None when test_time drives the run
    requests_allkeys: bool = False  # -n allkeys
    data_size: int | None = DEFAULT_DATA_SIZE
    data_size_range: tuple[int, int] | None = None
    random_data: bool = False
    rate_limiting: int | None = None  # requests per second per connection
    protocol: str = "redis"
    cluster_mode: bool = False
    distinct_client_seed: bool = False
    randomize: bool = False
    placeholder_warnings: list[str] = field(default_factory=list)
    read_only: bool | None = None  # all commands read keys (None: cannot tell)
    flags: dict[str, str | None] = field(default_factory=dict)  # long name -> last value
    problems: list[ArgumentProblem] = field(default_factory=list)

    @property
    def connections(self) -> int:
        return self.clients * self.threads

    @property
    def errors(self) -> list[ArgumentProblem]:
        return [p for p in self.problems if p.severity == "error"]


BLANKS = " \t\n\x0c\r"   # what separates arguments (ASCII, as redline-load's split_command)
TOKEN_ENDS = " \t\n\r"


def split_command(text: str) -> list[str]:
    """Split a --command string the way memtier does (redis-cli style quoting).

    Double quotes allow escapes (\\n \\r \\t \\b \\a \\xHH, backslash + any char); single
    quotes allow \\'; a closing quote must be followed by a blank or the end.
    Raises ValueError on unbalanced quotes.
    """
    tokens: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in BLANKS:
            i += 1
        if i >= n:
            return tokens
        buf: list[str] = []
        quote: str | None = None
        while True:
            ch = text[i] if i < n else ""
            if quote:
                escaped = _escape_in_quotes(text, i, quote)
                if escaped:
                    buf.append(escaped[0])
                    i += escaped[1]
                    continue
                if ch == quote:
                    _check_after_quote(text, i)
                    i += 1
                    break
                if not ch:
                    raise ValueError(f"unbalanced {QUOTE_NAMES[quote]} quote in {text!r}")
                buf.append(ch)
            else:
                if not ch or ch in TOKEN_ENDS:
                    break
                if ch in "\"'":
                    quote = ch
                else:
                    buf.append(ch)
            i += 1
        tokens.append("".join(buf))


ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}
QUOTE_NAMES = {'"': "double", "'": "single"}


def _escape_in_quotes(text: str, i: int, quote: str) -> tuple[str, int] | None:
    """The character an escape at text[i] stands for inside `quote`, and the escape's length;
    None when text[i] starts no escape (single quotes know only \\')."""
    if text[i:i + 1] != "\\":
        return None
    following = text[i + 1:i + 2]
    if quote == "'":
        return ("'", 2) if following == "'" else None
    if following == "x" and _is_hex(text[i + 2:i + 4]):
        return chr(int(text[i + 2:i + 4], 16)), 4
    return (ESCAPES.get(following, following), 2) if following else None


def _is_hex(two: str) -> bool:
    return len(two) == 2 and all(c in "0123456789abcdefABCDEF" for c in two)


def _check_after_quote(text: str, i: int) -> None:
    if i + 1 < len(text) and text[i + 1] not in BLANKS:
        raise ValueError(f"closing quote must be followed by a space in {text!r}")


@dataclass(frozen=True)
class _Option:
    name: str  # long name
    value: str | None
    token: str  # the argv token that named it
    indices: tuple[int, ...] = ()  # positions in argv of the token(s) it was read from


def _scan_options(argv: list[str], problems: list[ArgumentProblem]) -> list[_Option]:
    options: list[_Option] = []
    i = 0
    while i < len(argv):
        tok, start = argv[i], i
        if tok == "--":
            for extra in argv[i + 1:]:     # getopt stops here; memtier never reads the rest
                problems.append(_stray_argument(extra, None))
            break
        if tok.startswith("--"):
            name, has_eq, inline = tok[2:].partition("=")
            spec, reason = resolve_long(name)
            if spec is None:
                problems.append(ArgumentProblem("error", str(reason), tok))
                # memtier refuses to start; skip the unknown flag's likely value too so one
                # mistake is reported once
                if not has_eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    i += 1
                i += 1
                continue
            long = spec.name
            if long != name:
                problems.append(ArgumentProblem(
                    "warning", f"abbreviated flag --{name} read as --{long}", tok))
            if spec.takes_value:
                if has_eq:
                    value = inline
                elif i + 1 < len(argv):
                    i += 1
                    value = argv[i]
                else:
                    problems.append(ArgumentProblem("error", f"--{long} needs a value", tok))
                    break
                options.append(_Option(long, value, tok, tuple(range(start, i + 1))))
            else:
                if has_eq:
                    problems.append(ArgumentProblem(
                        "error", f"--{long} takes no value (got {tok!r})", tok))
                options.append(_Option(long, None, tok, tuple(range(start, i + 1))))
        elif tok.startswith("-") and len(tok) > 1:
            j = 1
            while j < len(tok):
                letter = tok[j]
                spec = short_options().get(letter)
                if spec is None:
                    problems.append(ArgumentProblem(
                        "error", f"unknown memtier_benchmark flag -{letter}", tok))
                    j += 1
                    continue
                long = spec.name
                if spec.takes_value:
                    if j + 1 < len(tok):
                        value = tok[j + 1:]
                    elif i + 1 < len(argv):
                        i += 1
                        value = argv[i]
                    else:
                        problems.append(ArgumentProblem("error", f"-{letter} needs a value", tok))
                        break
                    options.append(_Option(long, value, tok, tuple(range(start, i + 1))))
                    break
                options.append(_Option(long, None, tok, tuple(range(start, i + 1))))
                j += 1
        else:
            problems.append(_stray_argument(tok, options[-1] if options else None))
        i += 1
    return options


def _stray_argument(token: str, before: _Option | None) -> ArgumentProblem:
    """memtier's getopt moves non-option arguments aside and memtier never reads them, so it
    runs without them; redline-load does the same. Right after a --command the usual cause is
    an unescaped quote inside it, which cuts the command: say what runs."""
    cut = ""
    if before is not None and before.name == "command":
        cut = f"; the --command before it runs cut, as {before.value!r} (an unescaped quote inside it?)"
    return ArgumentProblem(
        "warning", f"stray argument {token!r} is not a flag: memtier_benchmark ignores it and so "
        f"does redline-load{cut}", token)


# Options whose checked value goes straight into a Workload field (flags set it to True).
WORKLOAD_FIELDS = {
    "clients": "clients", "threads": "threads", "pipeline": "pipeline", "test-time": "test_time",
    "data-size": "data_size", "rate-limiting": "rate_limiting",
    "key-minimum": "key_minimum", "key-maximum": "key_maximum", "key-prefix": "key_prefix",
    "random-data": "random_data", "cluster-mode": "cluster_mode",
    "distinct-client-seed": "distinct_client_seed", "randomize": "randomize",
}
U32_MAX = 2**32 - 1
INVALID = object()


def _apply(opt: _Option, wl: Workload, problems: list[ArgumentProblem]) -> None:
    """One option into the Workload. What an option is (type, range, refused) comes from the
    option table shared with redline-load; the shapes of text values are checked here."""
    spec = option_table()[opt.name]
    wl.flags[opt.name] = opt.value
    if opt.name in CLIENT_OPTIONS:     # dropped before redline-load sees it: not checked
        problems.append(ArgumentProblem("warning", client_option_note(opt.name), opt.token, owned=True))
        return
    value, error = _checked_value(spec, opt.value)
    if error is None and opt.name in SHAPED:
        error = SHAPED[opt.name](str(value), wl)
    elif error is None and opt.name in WORKLOAD_FIELDS:
        setattr(wl, WORKLOAD_FIELDS[opt.name], True if value is None else value)
    if error is not None:
        problems.append(ArgumentProblem("error", error, opt.token))
    elif opt.name == "command" and owned_command(wl.commands[-1]):
        problems.append(ArgumentProblem(
            "error", f"--command: {owned_command(wl.commands[-1])}", opt.token, redline_rule=True))


def _checked_value(spec: OptionSpec, text: str | None):
    """(value, None) or (None, the error): refused options, then the table's type and range."""
    if spec.refusal:
        return None, spec.refusal
    if spec.value == "int":
        return int_value(spec, str(text))
    if spec.value == "float":
        return float_value(spec, str(text))
    return text, None


def _u32_pair(text: str, separator: str) -> tuple[int, int] | None:
    """`A:B` / `A-B` with two integers of at most 2**32-1 (as redline-load reads them)."""
    left, found, right = text.partition(separator)
    if not (found and is_int(left) and is_int(right) and int(left) <= U32_MAX and int(right) <= U32_MAX):
        return None
    return int(left), int(right)


def _command(text: str, wl: Workload) -> str | None:
    try:
        argv = split_command(text)
    except ValueError as exc:
        return f"--command: {exc}"
    if not argv:
        return "--command is empty"
    if any(DATA_PLACEHOLDER in arg and arg != DATA_PLACEHOLDER and KEY_PLACEHOLDER not in arg
           for arg in argv[1:]):
        return (f"--command {text!r}: the data placeholder {DATA_PLACEHOLDER} must be a whole "
                "argument (memtier_benchmark refuses other text around it)")
    wl.arbitrary_commands = True
    wl.commands.append(argv)
    wl.command_ratios.append(1)
    wl.command_key_patterns.append("R")
    return None


def _command_ratio(text: str, wl: Workload) -> str | None:
    if not wl.commands:
        return "--command-ratio must follow the --command it applies to"
    wl.command_ratios[-1] = int(text)      # 0 leaves the command out, as in memtier
    return None


def _command_key_pattern(text: str, wl: Workload) -> str | None:
    if not wl.commands:
        return "--command-key-pattern must follow the --command it applies to"
    if len(text) != 1 or text not in KEY_PATTERN_LETTERS:
        return f"--command-key-pattern must be one of {', '.join(KEY_PATTERN_LETTERS)}, got {text!r}"
    wl.command_key_patterns[-1] = text
    return None


def _requests(text: str, wl: Workload) -> str | None:
    if text == "allkeys":
        wl.requests_allkeys = True
        return None
    if not is_int(text) or not 1 <= int(text) <= INT_MAX:
        return f"--requests needs a positive integer or allkeys, got {text!r}"
    wl.requests = int(text)
    return None


def _ratio(text: str, wl: Workload) -> str | None:
    pair = _u32_pair(text, ":")
    if pair is None or pair == (0, 0):
        return f"--ratio must look like SET:GET (e.g. 1:10, not 0:0), got {text!r}"
    wl.ratio = pair
    return None


def _key_pattern(text: str, wl: Workload) -> str | None:
    if len(text) == 3 and text[1] == ":" and text[0] in KEY_PATTERN_LETTERS and text[2] in KEY_PATTERN_LETTERS:
        wl.key_pattern = text
        return None
    return (f"--key-pattern must look like X:Y with X, Y in {', '.join(KEY_PATTERN_LETTERS)}, "
            f"got {text!r}")


def _data_size_range(text: str, wl: Workload) -> str | None:
    pair = _u32_pair(text, "-")
    if pair is None or not 1 <= pair[0] <= pair[1]:
        return f"--data-size-range must look like MIN-MAX with 1 <= MIN <= MAX, got {text!r}"
    wl.data_size_range = pair
    return None


def _data_size_pattern(text: str, wl: Workload) -> str | None:
    return None if text in ("R", "S") else f"--data-size-pattern must be R or S, got {text!r}"


def _percentiles(text: str, wl: Workload) -> str | None:
    if all(is_float(part) and 0.0 <= float(part) <= 100.0 for part in text.split(",")):
        return None
    return f"--print-percentiles needs numbers in 0..100, got {text!r}"


def _protocol(text: str, wl: Workload) -> str | None:
    if text not in ("redis", "resp2", "resp3"):
        return f"--protocol {text!r} is not supported (redis, resp2 or resp3)"
    wl.protocol = text
    return None


# Options whose value has a shape the table cannot say: option -> check (and apply) it.
SHAPED = {
    "command": _command, "command-ratio": _command_ratio, "command-key-pattern": _command_key_pattern,
    "requests": _requests, "ratio": _ratio, "key-pattern": _key_pattern,
    "data-size-range": _data_size_range, "data-size-pattern": _data_size_pattern,
    "print-percentiles": _percentiles, "protocol": _protocol,
}


def _refuse_as_memtier(options: list[_Option], wl: Workload, problems: list[ArgumentProblem]) -> None:
    """Option combinations memtier_benchmark refuses to start with (exit 2); redline-load
    refuses them the same way (loadgen/src/cli.rs: refuse_as_memtier, validate)."""
    first = {}
    for opt in options:
        first.setdefault(opt.name, opt)

    def refuse(message: str, option: str | _Option) -> None:
        token = option.token if isinstance(option, _Option) else first[option].token
        problems.append(ArgumentProblem("error", message, token))

    set_side, get_side = wl.key_pattern[0], wl.key_pattern[-1]
    if "P" in (set_side, get_side) and set_side != get_side:
        refuse(f"--key-pattern {wl.key_pattern}: the parallel pattern P must be given for both "
               "SET and GET (memtier_benchmark refuses to start)", "key-pattern")
    if wl.arbitrary_commands:
        for name, what in (("ratio", "ratio"), ("key-pattern", "key pattern")):
            if name in first:
                refuse(f"--{name} cannot be combined with --command: each command's {what} is "
                       f"given with --command-{name} (memtier_benchmark refuses to start)", name)
        parallel = wl.command_key_patterns.count("P")
        if 0 < parallel < len(wl.commands):
            refuse(f"--command-key-pattern P is given for {parallel} of {len(wl.commands)} "
                   "--command options: the parallel pattern must be given for every --command "
                   "(memtier_benchmark refuses to start)",
                   next(o for o in options if o.name == "command-key-pattern" and o.value == "P"))
        if not any(wl.command_ratios):
            refuse("--command-ratio: at least one command needs a ratio above zero", "command-ratio")
    if wl.cluster_mode and "reconnect-interval" in first:
        refuse("--cluster-mode cannot be combined with --reconnect-interval "
               "(memtier_benchmark refuses to start)", "reconnect-interval")
    jitter = [wl.flags.get(f"thread-conn-start-{end}-jitter-micros") or "0" for end in ("min", "max")]
    if all(map(is_int, jitter)) and int(jitter[0]) > int(jitter[1]):
        refuse("--thread-conn-start-min-jitter-micros must not exceed "
               "--thread-conn-start-max-jitter-micros (memtier_benchmark refuses to start)",
               "thread-conn-start-min-jitter-micros")
    if "scan-incremental-iteration" in first:
        _refuse_scan_iteration(wl, lambda message: refuse(message, "scan-incremental-iteration"))


def _refuse_scan_iteration(wl: Workload, refuse) -> None:
    if len(wl.commands) != 1:
        refuse("--scan-incremental-iteration needs exactly one --command (a SCAN command)")
    elif wl.commands[0][0].upper() != "SCAN" or len(wl.commands[0]) < 2:
        refuse("--scan-incremental-iteration needs a SCAN command with a cursor argument (e.g. 'SCAN 0')")
    if wl.pipeline != 1:
        refuse("--scan-incremental-iteration needs --pipeline 1 (memtier_benchmark refuses to start)")
    if wl.cluster_mode:
        refuse("--scan-incremental-iteration cannot be combined with --cluster-mode "
               "(memtier_benchmark refuses to start)")


def _find_placeholders(wl: Workload, problems: list[ArgumentProblem]) -> None:
    monitor = "monitor-input" in wl.flags
    for argv in wl.commands:
        for token in argv:
            for found in PLACEHOLDER_RE.findall(token):
                if found in MEMTIER_PLACEHOLDERS:
                    continue
                if monitor and MONITOR_PLACEHOLDER_RE.fullmatch(found):
                    continue
                if found not in wl.placeholder_warnings:
                    wl.placeholder_warnings.append(found)
                    problems.append(ArgumentProblem(
                        "warning", f"{found} in command {' '.join(argv)!r} looks like a "
                        "placeholder but memtier only substitutes __key__ and __data__: it is "
                        "sent literally", found))


def _classify(wl: Workload) -> bool | None:
    if not wl.arbitrary_commands:
        set_ratio, get_ratio = wl.ratio
        return set_ratio == 0 and get_ratio > 0
    kinds = {command_kind(argv) for argv, ratio in zip(wl.commands, wl.command_ratios)
             if ratio > 0}
    if "write" in kinds:
        return False
    if kinds == {"read"}:
        return True
    return None


def parse_client_arguments(argv: list[str]) -> Workload:
    """Read a memtier_benchmark argv into a Workload; problems are in `.problems`."""
    problems: list[ArgumentProblem] = []
    wl = Workload(problems=problems)
    options = _scan_options(list(argv), problems)
    for opt in options:
        _apply(opt, wl, problems)
    _refuse_as_memtier(options, wl, problems)
    if wl.data_size_range is not None:
        wl.data_size = None        # a range wins over a fixed size, given before or after it
    if not wl.arbitrary_commands:
        wl.commands = [["SET", "__key__", "__data__"], ["GET", "__key__"]]
        wl.command_ratios = list(wl.ratio)
        wl.command_key_patterns = [wl.key_pattern[0], wl.key_pattern[-1]]
    if wl.test_time is not None and (wl.requests is not None or wl.requests_allkeys):
        problems.append(ArgumentProblem(
            "error", "--test-time and --requests are mutually exclusive", "--test-time"))
    if wl.key_minimum > wl.key_maximum:
        problems.append(ArgumentProblem(
            "error", f"--key-minimum {wl.key_minimum} is above --key-maximum {wl.key_maximum}",
            "--key-minimum"))
    if wl.requests_allkeys:
        wl.requests = wl.key_maximum - wl.key_minimum
        if wl.key_pattern == "P:P":
            wl.requests = wl.requests // wl.connections + 1
    if not wl.requests and wl.test_time is None:
        wl.requests = DEFAULT_REQUESTS   # memtier: neither -n (or a zero count) nor --test-time
    _find_placeholders(wl, problems)
    wl.read_only = _classify(wl)
    return wl


def without_options(argv: list[str], names) -> list[str]:
    """`argv` without the options whose long name is in `names`, in any spelling (`-S x`, `-Sx`,
    `--unix-socket x`, `--unix-socket=x`, a unique prefix); every other token as written. An
    option that shared a dropped token (`-RS/tmp/sock`) is kept, spelled out."""
    options = _scan_options(list(argv), [])
    dropped = {index for opt in options if opt.name in names for index in opt.indices}
    kept = [token for index, token in enumerate(argv) if index not in dropped]
    for opt in options:
        if opt.name not in names and dropped.intersection(opt.indices):
            kept += [f"--{opt.name}"] + ([opt.value] if opt.value is not None else [])
    return kept
