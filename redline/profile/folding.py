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
from pathlib import Path

from redline.core.errors import UsageError

_FRAME = re.compile(r"^\s+(?P<address>[0-9a-fA-F]+)\s+(?P<symbol>.*?)(?:\s+\((?P<dso>[^()]*)\))?\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
_VERSION = re.compile(r"@@?[A-Za-z0-9_.]+$")
UNKNOWN = "[unknown]"
KERNEL_SUFFIX = "_[k]"     # the flame-graph convention for kernel frames


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
