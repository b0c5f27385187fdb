"""`perf script` output → folded stacks ("root;caller;leaf count" lines), and folded files on disk.

The collapse is redline's own: each sample in `perf script` output is a header line followed by
one indented line per frame (leaf first: "address symbol+offset (dso)") and a blank line. A
sample becomes one stack, root first; identical stacks are counted.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from redline.core.errors import UsageError

_FRAME = re.compile(r"^\s+(?P<address>[0-9a-fA-F]+)\s+(?P<symbol>.*?)(?:\s+\((?P<dso>[^()]*)\))?\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
_VERSION = re.compile(r"@@?[A-Za-z0-9_.]+$")
UNKNOWN = "[unknown]"
KERNEL_SUFFIX = "_[k]"     # the flame-graph convention for kernel frames
OTHER = "[other]"          # the one stack bounded_stacks merges the stacks it leaves out into


def frame_name(symbol: str, dso: str | None) -> str:
    """A readable, stable frame name: offsets and symbol versions dropped; unresolved frames are
    named after their object file so they still group (e.g. "[redis-check-rdb]"); kernel frames
    end in "_[k]" (e.g. "tcp_sendmsg_[k]")."""
    name = _OFFSET.sub("", symbol.strip())
    name = _VERSION.sub("", name)
    if not name or name == UNKNOWN:
        base = Path(dso).name if dso else ""
        return f"[{base}]" if base and base not in (UNKNOWN, "unknown") else UNKNOWN
    name = name.replace(";", ":")
    return name + KERNEL_SUFFIX if dso and dso.startswith("[kernel") else name


def fold_perf_script(lines: Iterable[str]) -> Counter[str]:
    """Count identical stacks in `perf script` text. Samples without frames count as [unknown]."""
    stacks: Counter[str] = Counter()
    frames: list[str] = []
    in_sample = False

    def finish() -> None:
        if in_sample:
            stacks[";".join(reversed(frames)) if frames else UNKNOWN] += 1

    for raw in lines:
        line = raw.rstrip("\n")
        if not line.strip():
            finish()
            frames, in_sample = [], False
            continue
        if line[0] in " \t":
            match = _FRAME.match(line)
            if match and in_sample:
                frames.append(frame_name(match["symbol"], match["dso"]))
            continue
        finish()                      # a header without the blank separator: close the previous one
        frames, in_sample = [], True
    finish()
    return stacks


def write_folded(stacks: Mapping[str, int], path: Path) -> Path:
    """Write stacks as folded text, gzip-compressed when the name ends in .gz; heaviest first."""
    path = Path(path)
    text = "".join(f"{stack} {count}\n" for stack, count in
                   sorted(stacks.items(), key=lambda item: (-item[1], item[0])))
    data = text.encode()
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def read_folded(path: Path) -> Counter[str]:
    """Read a folded file (plain or .gz). Malformed lines are reported with file:line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read folded stacks {path}: {exc.strerror}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise UsageError(f"{path}: damaged gzip data ({exc})") from exc
    stacks: Counter[str] = Counter()
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise UsageError(f"{path}:{number}: expected 'frame;frame;... count', got {line[:80]!r}")
        stacks[stack] += int(count)
    return stacks


@dataclass(frozen=True)
class StackBounds:
    """How much of a profile's folded stacks may travel (redline.fleet ships them in a result)."""

    stacks: int             # stacks at most, the OTHER stack included
    text_bytes: int         # their text (UTF-8 bytes, frames and separators, without the counts) at most
    frame_chars: int        # characters of one frame's name at most
    frames: int             # frames of one stack at most


def printable(name: str) -> str:
    """A frame name as printable text: control, format and other unprintable characters become '?'."""
    return "".join(c if c.isprintable() else "?" for c in name)


def bounded_stacks(stacks: Mapping[str, int], bounds: StackBounds) -> tuple[dict[str, int], int]:
    """`stacks` made to fit `bounds`, to be sent elsewhere: every frame printable (redline.profile.
    folding.printable) and cut to `frame_chars` (an empty one is UNKNOWN), a deeper stack cut to its
    leaf-side `frames` (the leaf is what a symbol's self share counts); the heaviest stacks that fit
    `stacks` and `text_bytes`, the rest merged into one OTHER stack, so the total count — and each
    kept leaf's share of it — is unchanged. Returns the stacks and how many were merged."""
    if bounds.stacks < 2 or bounds.frames < 1 or bounds.frame_chars < 1:
        raise UsageError(f"stack bounds too small to hold a stack and {OTHER}: {bounds}")
    cleaned: Counter[str] = Counter()
    for stack, count in stacks.items():
        if count > 0:
            frames = [printable(frame)[:bounds.frame_chars] or UNKNOWN for frame in stack.split(";")]
            cleaned[";".join(frames[-bounds.frames:])] += int(count)
    other = cleaned.pop(OTHER, 0)
    kept: dict[str, int] = {}
    used, merged = len(OTHER.encode()), 0
    for stack, count in sorted(cleaned.items(), key=lambda item: (-item[1], item[0])):
        size = len(stack.encode())
        if len(kept) < bounds.stacks - 1 and used + size <= bounds.text_bytes:
            kept[stack], used = count, used + size
        else:
            other, merged = other + count, merged + 1
    if other:
        kept[OTHER] = other
    return kept, merged
