"""The memtier_benchmark option table, shared with redline-load.

`loadgen/memtier_options.tsv` says, for every memtier option redline knows, its long name,
short letter, whether it takes a value, the value's type and range, and whether redline-load
runs it (supported), refuses it (refused, with the reason) or has it as its own (redline).
redline-load compiles the same file in (loadgen/src/options.rs), so both parsers agree on what
an option is; tests/test_memtier_conformance.py holds them to the same accept/reject decision.
The file's header describes the columns; this module reads it and checks values against it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from redline.core.errors import RunError

TABLE_PATH = Path(__file__).resolve().parents[2] / "loadgen" / "memtier_options.tsv"
COLUMNS = ["name", "short", "value", "range", "status", "note"]
VALUE_KINDS = ("none", "int", "float", "text")
STATUSES = ("supported", "refused", "redline")
INT_MAX = 2**64 - 1     # redline-load reads integers as u64

INT_RE = re.compile(r"[0-9]+")
FLOAT_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
INTERVAL_RE = re.compile(r"([\[(])([^,]*),([^,]*)([\])])")


@dataclass(frozen=True)
class End:
    number: str
    open: bool


@dataclass(frozen=True)
class OptionSpec:
    name: str
    short: str | None
    value: str                # one of VALUE_KINDS
    low: End | None           # int/float: the accepted interval (None: no bound)
    high: End | None
    shape: str                # text: what the value looks like (checked in code)
    status: str               # one of STATUSES
    note: str

    @property
    def takes_value(self) -> bool:
        return self.value != "none"

    @property
    def refusal(self) -> str | None:
        """Why redline-load refuses this option (the wording redline-load prints), or None."""
        if self.status != "refused":
            return None
        return f"--{self.name} is not supported by redline-load: {self.note}"


@cache
def option_table() -> dict[str, OptionSpec]:
    """Long name -> OptionSpec, in the table's order."""
    try:
        text = TABLE_PATH.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunError(f"the memtier option table {TABLE_PATH} cannot be read ({exc.strerror}): "
                       "redline runs from a checkout of its repository (bash setup.sh)") from None
    rows = [(number, line) for number, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.startswith("#")]
    header = rows[0][1].split("\t")
    if header != COLUMNS:
        raise RunError(f"{TABLE_PATH}:{rows[0][0]}: expected the columns {COLUMNS}, got {header}")
    table = {}
    for number, line in rows[1:]:
        try:
            spec = _parse_row(line)
        except ValueError as exc:
            raise RunError(f"{TABLE_PATH}:{number}: {exc}") from None
        table[spec.name] = spec
    return table


@cache
def short_options() -> dict[str, OptionSpec]:
    return {spec.short: spec for spec in option_table().values() if spec.short}


def _parse_row(line: str) -> OptionSpec:
    cells = [("" if cell == "-" else cell) for cell in line.split("\t")]
    if len(cells) != len(COLUMNS):
        raise ValueError(f"expected {len(COLUMNS)} tab-separated cells, got {len(cells)}")
    name, short, value, shape, status, note = cells
    if value not in VALUE_KINDS or status not in STATUSES or len(short) > 1:
        raise ValueError(f"value must be one of {VALUE_KINDS}, status one of {STATUSES}, "
                         f"short one letter; got {value!r}, {status!r}, {short!r}")
    low = high = None
    if value in ("int", "float") and shape:
        match = INTERVAL_RE.fullmatch(shape)
        if not match:
            raise ValueError(f"range {shape!r} is not an interval like [1,] or (0,5)")
        opening, low_text, high_text, closing = match.groups()
        low = End(low_text, opening == "(") if low_text else None
        high = End(high_text, closing == ")") if high_text else None
        shape = ""
    return OptionSpec(name, short or None, value, low, high, shape, status, note)


def resolve_long(name: str) -> tuple[OptionSpec | None, str | None]:
    """(spec, None) or (None, why not). A unique prefix of a name is that name (getopt_long);
    every name in the table counts, refused ones too."""
    table = option_table()
    if name in table:
        return table[name], None
    matches = [spec for spec in table.values() if name and spec.name.startswith(name)]
    if len(matches) == 1:
        return matches[0], None
    if matches:
        return None, f"ambiguous memtier_benchmark flag --{name} (could be " + ", ".join(
            f"--{spec.name}" for spec in matches) + ")"
    return None, f"unknown memtier_benchmark flag --{name}"


def is_int(text: str) -> bool:
    return INT_RE.fullmatch(text) is not None


def is_float(text: str) -> bool:
    return FLOAT_RE.fullmatch(text) is not None


def int_value(spec: OptionSpec, text: str) -> tuple[int | None, str | None]:
    """(value, None) or (None, the error): ASCII digits, at most INT_MAX, within the range."""
    if not is_int(text):
        return None, f"--{spec.name} needs an integer, got {text!r}"
    number = int(text)
    if number > INT_MAX:
        return None, f"--{spec.name} must be at most {INT_MAX}, got {text}"
    return _within(spec, text, number, int)


def float_value(spec: OptionSpec, text: str) -> tuple[float | None, str | None]:
    number = float(text) if is_float(text) else None
    if number is None or number in (float("inf"), float("-inf")):
        return None, f"--{spec.name} needs a number, got {text!r}"
    return _within(spec, text, number, float)


def _within(spec: OptionSpec, text: str, number, kind) -> tuple:
    """The one wording of a range error (redline-load's options.rs words it the same)."""
    low, high = spec.low, spec.high
    if low is not None and (number < kind(low.number) or (low.open and number == kind(low.number))):
        return None, f"--{spec.name} must be {'above' if low.open else 'at least'} {low.number}, got {text}"
    if high is not None and (number > kind(high.number) or (high.open and number == kind(high.number))):
        return None, f"--{spec.name} must be {'below' if high.open else 'at most'} {high.number}, got {text}"
    return number, None
