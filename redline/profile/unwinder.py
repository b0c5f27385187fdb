"""Choose how perf unwinds the server's stacks: frame pointers ("fp") or DWARF ("dwarf").

Frame-pointer unwinding is cheap and exact when the binary keeps frame pointers (redline's build
variants compile with -fno-omit-frame-pointer). Stock Redis and Debian's package are built at -O2
without them, and frame-pointer stacks from such binaries are garbage, so perf must copy a slice
of the user stack with every sample and unwind it from .eh_frame afterwards ("dwarf").

The decision reads the binary itself: the share of its functions whose first instructions set up
a frame (x86-64: [endbr64] push %rbp, then mov %rsp,%rbp within a few instructions — aarch64: mov x29, sp near the entry).
Leaf functions and tail-call stubs skip the frame even with -fno-omit-frame-pointer, so only
functions of a reasonable size are counted and the threshold is well below 100%.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from redline.profile.elf import ElfImage

FRAME_POINTER = "fp"
DWARF = "dwarf"

_EM_X86_64 = 62
_EM_AARCH64 = 183
_ENDBR64 = bytes.fromhex("f30f1efa")
_X86_PUSH_RBP = bytes.fromhex("55")
_X86_MOV_RSP_RBP = bytes.fromhex("4889e5")
_X86_WINDOW = 20
_AARCH64_MOV_X29_SP = bytes.fromhex("fd030091")

MIN_FUNCTION_BYTES = 64       # smaller functions are often leaves without a frame either way
FRAME_POINTER_THRESHOLD = 0.5  # -fno-omit-frame-pointer builds measure ~0.9, -O2 builds ~0.0


@dataclass(frozen=True)
class UnwinderChoice:
    unwinder: str                       # "fp" or "dwarf"
    reason: str                         # one sentence a person reads in the run's JSON
    frame_pointer_share: float | None   # share of inspected functions that set up a frame


def _sets_up_frame(machine: int, prologue: bytes) -> bool:
    if machine == _EM_X86_64:
        if prologue.startswith(_ENDBR64):
            prologue = prologue[len(_ENDBR64):]
        # push %rbp first; mov %rsp,%rbp may come a few instructions later (the scheduler moves it)
        return prologue[:1] == _X86_PUSH_RBP and _X86_MOV_RSP_RBP in prologue[1:_X86_WINDOW]
    if machine == _EM_AARCH64:
        words = [prologue[i:i + 4] for i in range(0, min(len(prologue), 24), 4)]
        return _AARCH64_MOV_X29_SP in words
    return False


def frame_pointer_share(binary: Path) -> tuple[float | None, int]:
    """(share of sizeable functions that set up a frame pointer, functions inspected)."""
    image = ElfImage(binary)
    if image.machine not in (_EM_X86_64, _EM_AARCH64):
        return None, 0
    inspected = with_frame = 0
    for function in image.function_symbols():
        if function.size < MIN_FUNCTION_BYTES:
            continue
        prologue = image.bytes_at(function.address, 24)
        if not prologue:
            continue
        inspected += 1
        with_frame += _sets_up_frame(image.machine, prologue)
    if inspected == 0:
        return None, 0
    return with_frame / inspected, inspected


def choose_unwinder(binary: Path) -> UnwinderChoice:
    """Frame pointers when the binary keeps them, DWARF unwinding otherwise."""
    share, inspected = frame_pointer_share(binary)
    if share is None:
        return UnwinderChoice(DWARF, f"{binary}: no function symbols to inspect (or unsupported "
                                     "architecture); DWARF unwinding is the safe choice", None)
    if share >= FRAME_POINTER_THRESHOLD:
        return UnwinderChoice(FRAME_POINTER, f"{binary}: {share:.0%} of {inspected} functions set up a "
                                             "frame pointer", share)
    return UnwinderChoice(DWARF, f"{binary}: only {share:.0%} of {inspected} functions set up a frame "
                                 "pointer (built without -fno-omit-frame-pointer)", share)
