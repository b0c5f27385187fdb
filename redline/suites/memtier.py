"""memtier_benchmark command lines as a typed workload.

The upstream suites describe their load as a memtier_benchmark argument string. This module
reads the argv (already shell-split) the way memtier's getopt_long does and turns it into a
`Workload`: which commands, at which ratios, over which keys, with how many connections. It
does not run anything; it is what validation and the engine decide with.

Problems are collected, not raised: `Workload.problems` lists each with the token it is about
so the caller can point at the file and line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .command_table import command_kind
from .owned import CLIENT_OPTIONS, client_option_note, owned_command

# Long options of memtier_benchmark (2.x) -> whether they take a value.
LONG_OPTIONS: dict[str, bool] = {
    "server": True, "host": True, "port": True, "unix-socket": True, "ipv4": False,
    "ipv6": False, "protocol": True, "tls": False, "cert": True, "key": True, "cacert": True,
    "tls-skip-verify": False, "sni": True, "tls-protocols": True, "out-file": True,
    "hdr-file-prefix": True, "client-stats": True, "run-count": True, "debug": False,
    "show-config": False, "hide-histogram": False, "print-percentiles": True,
    "print-all-runs": False, "realtime-latencies": False, "distinct-client-seed": False,
    "randomize": False, "requests": True, "clients": True, "threads": True, "test-time": True,
    "ratio": True, "pipeline": True, "data-size": True, "data-offset": True,
    "random-data": False, "data-size-range": True, "data-size-list": True,
    "data-size-pattern": True, "expiry-range": True, "data-import": True,
    "data-verify": False, "verify-only": False, "generate-keys": False, "key-prefix": True,
    "key-minimum": True, "key-maximum": True, "key-pattern": True, "key-stddev": True,
    "key-median": True, "key-zipf-exp": True, "reconnect-interval": True,
    "reconnect-on-error": False, "max-reconnect-attempts": True,
    "reconnect-backoff-factor": True, "retry-on-error": False, "max-retries": True,
    "retry-backoff-ms": True, "retry-backoff-factor": True, "retry-on": True,
    "max-retry-queue": True, "failed-keys-file": True, "connection-timeout": True,
    "connection-stage-timeout": True, "thread-conn-start-min-jitter-micros": True,
    "thread-conn-start-max-jitter-micros": True, "multi-key-get": True, "authenticate": True,
    "select-db": True, "no-expiry": False, "wait-ratio": True, "num-slaves": True,
    "wait-timeout": True, "json-out-file": True, "cluster-mode": False, "transaction": False,
    "help": False, "version": False, "command": True, "command-key-pattern": True,
    "command-ratio": True, "monitor-input": True, "monitor-pattern": True,
    "command-stats-breakdown": True, "command-miss-tracking": True,
    "miss-rate-threshold": True, "rate-limiting": True, "uri": True, "statsd-host": True,
    "statsd-port": True, "statsd-prefix": True, "statsd-run-label": True,
    "graphite-port": True, "scan-incremental-iteration": False,
    "scan-incremental-max-iterations": True, "clients-start": True, "clients-step": True,
    "step-duration": True,
}

# Short options (getopt string "vs:S:p:P:o:x:DRn:c:t:d:a:h:46u:") -> long name.
SHORT_OPTIONS: dict[str, str] = {
    "v": "version", "s": "server", "S": "unix-socket", "p": "port", "P": "protocol",
    "o": "out-file", "x": "run-count", "D": "debug", "R": "random-data", "n": "requests",
    "c": "clients", "t": "threads", "d": "data-size", "a": "authenticate", "h": "host",
    "4": "ipv4", "6": "ipv6", "u": "uri",
}

POSITIVE_INT_OPTIONS = frozenset({
    "clients", "threads", "pipeline", "test-time", "data-size", "run-count", "rate-limiting",
    "multi-key-get", "scan-incremental-max-iterations", "clients-start", "clients-step",
    "step-duration",
})
NON_NEGATIVE_INT_OPTIONS = frozenset({
    "key-minimum", "key-maximum", "data-offset", "reconnect-interval", "select-db",
    "thread-conn-start-min-jitter-micros", "thread-conn-start-max-jitter-micros",
    "connection-timeout", "connection-stage-timeout", "max-reconnect-attempts",
    "max-retries", "retry-backoff-ms", "max-retry-queue",
})
FLOAT_OPTIONS = frozenset({
    "key-stddev", "key-median", "key-zipf-exp", "reconnect-backoff-factor",
    "retry-backoff-factor", "miss-rate-threshold",
})

KEY_PATTERN_LETTERS = "RGSPZ"
PLACEHOLDER_RE = re.compile(r"__[A-Za-z0-9_]+?__")
MEMTIER_PLACEHOLDERS = frozenset({"__key__", "__data__"})
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
    data_size_list: str | None = None
    random_data: bool = False
    rate_limiting: int | None = None  # requests per second per connection
    run_count: int = 1
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


def split_command(text: str) -> list[str]:
    """Split a --command string the way memtier does (redis-cli style quoting).

    Double quotes allow escapes (\\n \\r \\t \\b \\a \\xHH, backslash + any char); single
    quotes allow \\'; a closing quote must be followed by a blank or the end.
    Raises ValueError on unbalanced quotes.
    """
    escapes = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "a": "\a"}
    tokens: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return tokens
        buf: list[str] = []
        quote: str | None = None
        while True:
            ch = text[i] if i < n else ""
            if quote == '"':
                if ch == "\\" and text[i + 1:i + 2] == "x" and _is_hex(text[i + 2:i + 4]):
                    buf.append(chr(int(text[i + 2:i + 4], 16)))
                    i += 4
                    continue
                if ch == "\\" and i + 1 < n:
                    buf.append(escapes.get(text[i + 1], text[i + 1]))
                    i += 2
                    continue
                if ch == '"':
                    _check_after_quote(text, i)
                    i += 1
                    break
                if not ch:
                    raise ValueError(f"unbalanced double quote in {text!r}")
                buf.append(ch)
            elif quote == "'":
                if ch == "\\" and text[i + 1:i + 2] == "'":
                    buf.append("'")
                    i += 2
                    continue
                if ch == "'":
                    _check_after_quote(text, i)
                    i += 1
                    break
                if not ch:
                    raise ValueError(f"unbalanced single quote in {text!r}")
                buf.append(ch)
            else:
                if not ch or ch.isspace():
                    break
                if ch in "\"'":
                    quote = ch
                else:
                    buf.append(ch)
            i += 1
        tokens.append("".join(buf))


def _is_hex(two: str) -> bool:
    return len(two) == 2 and all(c in "0123456789abcdefABCDEF" for c in two)


def _check_after_quote(text: str, i: int) -> None:
    if i + 1 < len(text) and not text[i + 1].isspace():
        raise ValueError(f"closing quote must be followed by a space in {text!r}")


@dataclass(frozen=True)
class _Option:
    name: str  # long name
    value: str | None
    token: str  # the argv token that named it
    indices: tuple[int, ...] = ()  # positions in argv of the token(s) it was read from


def _resolve_long(name: str) -> tuple[str | None, str | None]:
    """(long name, None) or (None, reason). Unique prefixes are accepted like getopt_long."""
    if name in LONG_OPTIONS:
        return name, None
    matches = [opt for opt in LONG_OPTIONS if opt.startswith(name)] if name else []
    if len(matches) == 1:
        return matches[0], None
    if len(matches) > 1:
        return None, f"ambiguous memtier_benchmark flag --{name} (could be " + ", ".join(
            f"--{m}" for m in sorted(matches)) + ")"
    return None, f"unknown memtier_benchmark flag --{name}"


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
            long, reason = _resolve_long(name)
            if long is None:
                problems.append(ArgumentProblem("error", str(reason), tok))
                # memtier refuses to start; skip the unknown flag's likely value too so one
                # mistake is reported once
                if not has_eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                    i += 1
                i += 1
                continue
            if long != name:
                problems.append(ArgumentProblem(
                    "warning", f"abbreviated flag --{name} read as --{long}", tok))
            if LONG_OPTIONS[long]:
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
                long = SHORT_OPTIONS.get(letter)
                if long is None:
                    problems.append(ArgumentProblem(
                        "error", f"unknown memtier_benchmark flag -{letter}", tok))
                    j += 1
                    continue
                if LONG_OPTIONS[long]:
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


def _parse_int(opt: _Option, problems: list[ArgumentProblem], minimum: int) -> int | None:
    try:
        value = int(str(opt.value), 10)
    except ValueError:
        problems.append(ArgumentProblem(
            "error", f"--{opt.name} needs an integer, got {opt.value!r}", opt.token))
        return None
    if value < minimum:
        problems.append(ArgumentProblem(
            "error", f"--{opt.name} must be at least {minimum}, got {value}", opt.token))
        return None
    return value


def _parse_pair(text: str, sep: str) -> tuple[int, int] | None:
    left, found, right = text.partition(sep)
    if not found or not left.isdigit() or not right.isdigit():
        return None
    return int(left), int(right)


def _apply(opt: _Option, wl: Workload, problems: list[ArgumentProblem]) -> None:
    name, value = opt.name, opt.value
    wl.flags[name] = value
    int_fields = {"clients": "clients", "threads": "threads", "pipeline": "pipeline",
                  "test-time": "test_time", "data-size": "data_size", "run-count": "run_count",
                  "rate-limiting": "rate_limiting", "key-minimum": "key_minimum",
                  "key-maximum": "key_maximum"}
    if name in CLIENT_OPTIONS:
        problems.append(ArgumentProblem("warning", client_option_note(name), opt.token, owned=True))
    if name == "command":
        try:
            argv = split_command(str(value))
        except ValueError as exc:
            problems.append(ArgumentProblem("error", f"--command: {exc}", opt.token))
            return
        if not argv:
            problems.append(ArgumentProblem("error", "--command is empty", opt.token))
            return
        if owned_command(argv):
            problems.append(ArgumentProblem("error", f"--command: {owned_command(argv)}", opt.token))
        wl.arbitrary_commands = True
        wl.commands.append(argv)
        wl.command_ratios.append(1)
        wl.command_key_patterns.append("R")
    elif name in ("command-ratio", "command-key-pattern"):
        if not wl.commands:
            problems.append(ArgumentProblem(
                "error", f"--{name} must follow the --command it applies to", opt.token))
            return
        if name == "command-ratio":
            ratio = _parse_int(opt, problems, minimum=1)  # memtier refuses 0
            if ratio is not None:
                wl.command_ratios[-1] = ratio
        elif len(str(value)) == 1 and str(value) in KEY_PATTERN_LETTERS:
            wl.command_key_patterns[-1] = str(value)
        else:
            problems.append(ArgumentProblem(
                "error", f"--command-key-pattern must be one of {', '.join(KEY_PATTERN_LETTERS)}, "
                f"got {value!r}", opt.token))
    elif name in int_fields:
        minimum = 1 if name in POSITIVE_INT_OPTIONS else 0
        parsed = _parse_int(opt, problems, minimum=minimum)
        if parsed is not None:
            setattr(wl, int_fields[name], parsed)
    elif name in POSITIVE_INT_OPTIONS:
        _parse_int(opt, problems, minimum=1)
    elif name in NON_NEGATIVE_INT_OPTIONS:
        _parse_int(opt, problems, minimum=0)
    elif name in FLOAT_OPTIONS:
        try:
            float(str(value))
        except ValueError:
            problems.append(ArgumentProblem(
                "error", f"--{name} needs a number, got {value!r}", opt.token))
    elif name == "requests":
        if value == "allkeys":
            wl.requests_allkeys = True
        else:
            wl.requests = _parse_int(opt, problems, minimum=1)
    elif name == "ratio":
        pair = _parse_pair(str(value), ":")
        if pair is None:
            problems.append(ArgumentProblem(
                "error", f"--ratio must look like SET:GET (e.g. 1:10), got {value!r}", opt.token))
        else:
            wl.ratio = pair
    elif name == "key-pattern":
        text = str(value)
        if len(text) == 3 and text[1] == ":" and text[0] in KEY_PATTERN_LETTERS \
                and text[2] in KEY_PATTERN_LETTERS:
            wl.key_pattern = text
        else:
            problems.append(ArgumentProblem(
                "error", f"--key-pattern must look like X:Y with X, Y in "
                f"{', '.join(KEY_PATTERN_LETTERS)}, got {value!r}", opt.token))
    elif name == "key-prefix":
        wl.key_prefix = str(value)
    elif name == "data-size-range":
        pair = _parse_pair(str(value), "-")
        if pair is None or pair[0] < 1 or pair[0] > pair[1]:
            problems.append(ArgumentProblem(
                "error", f"--data-size-range must look like MIN-MAX with 1 <= MIN <= MAX, "
                f"got {value!r}", opt.token))
        else:
            wl.data_size_range = pair
            wl.data_size = None
    elif name == "data-size-list":
        wl.data_size_list = str(value)
        wl.data_size = None
    elif name == "data-size-pattern":
        if value not in ("R", "S"):
            problems.append(ArgumentProblem(
                "error", f"--data-size-pattern must be R or S, got {value!r}", opt.token))
    elif name == "expiry-range":
        if _parse_pair(str(value), "-") is None:
            problems.append(ArgumentProblem(
                "error", f"--expiry-range must look like MIN-MAX, got {value!r}", opt.token))
    elif name == "print-percentiles":
        _check_percentiles(opt, problems)
    elif name == "protocol":
        if value in ("redis", "resp2", "resp3"):
            wl.protocol = str(value)
        else:
            problems.append(ArgumentProblem(
                "error", f"--protocol {value!r} is not supported (redis, resp2 or resp3)",
                opt.token))
    elif name == "random-data":
        wl.random_data = True
    elif name == "cluster-mode":
        wl.cluster_mode = True
    elif name == "distinct-client-seed":
        wl.distinct_client_seed = True
    elif name == "randomize":
        wl.randomize = True
    elif name in ("monitor-input", "data-import"):
        problems.append(ArgumentProblem(
            "warning", f"--{name} reads commands or data from a file that the suite does "
            "not carry", opt.token))


def _refuse_as_memtier(options: list[_Option], wl: Workload, problems: list[ArgumentProblem]) -> None:
    """Option combinations memtier_benchmark refuses to start with (exit 2); redline-load
    refuses them the same way."""
    first = {}
    for opt in options:
        first.setdefault(opt.name, opt)
    set_side, get_side = wl.key_pattern[0], wl.key_pattern[-1]
    if "P" in (set_side, get_side) and set_side != get_side:
        problems.append(ArgumentProblem(
            "error", f"--key-pattern {wl.key_pattern}: the parallel pattern P must be given for both "
            "SET and GET (memtier_benchmark refuses to start)", first["key-pattern"].token))
    if wl.arbitrary_commands:
        for name, what in (("ratio", "ratio"), ("key-pattern", "key pattern")):
            if name in first:
                problems.append(ArgumentProblem(
                    "error", f"--{name} cannot be combined with --command: each command's {what} is "
                    f"given with --command-{name} (memtier_benchmark refuses to start)",
                    first[name].token))
        parallel = wl.command_key_patterns.count("P")
        if 0 < parallel < len(wl.commands):
            problems.append(ArgumentProblem(
                "error", f"--command-key-pattern P is given for {parallel} of {len(wl.commands)} "
                "--command options: the parallel pattern must be given for every --command "
                "(memtier_benchmark refuses to start)",
                next(o.token for o in options if o.name == "command-key-pattern" and o.value == "P")))
    if wl.cluster_mode and "reconnect-interval" in first:
        problems.append(ArgumentProblem(
            "error", "--cluster-mode cannot be combined with --reconnect-interval "
            "(memtier_benchmark refuses to start)", first["reconnect-interval"].token))


def _check_percentiles(opt: _Option, problems: list[ArgumentProblem]) -> None:
    for part in str(opt.value).split(","):
        try:
            number = float(part)
        except ValueError:
            number = -1.0
        if not 0.0 <= number <= 100.0:
            problems.append(ArgumentProblem(
                "error", f"--print-percentiles needs numbers in 0..100, got {opt.value!r}",
                opt.token))
            return


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
