"""The deterministic profile of a run under callgrind: its window's dump → folded stacks of
instructions → the flame graph and top symbols, through the same path perf profiles take
(redline.profile: write_folded, render_stacks, symbol_shares), so compare's differential flame
graph, moved symbols and `redline hotspots` read it like any other profile."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from redline.instructions.callgrind_file import CallgrindDump
from redline.instructions.folded import folded_stacks
from redline.profile.flamegraph import render_stacks
from redline.profile.folding import write_folded
from redline.profile.symbols import symbol_shares

TOP_SYMBOLS = 20
EVENT = "instructions (callgrind)"


def callgrind_profile(dump: CallgrindDump, workdir: Path, *, title: str, ops: int) -> dict:
    """Folded stacks, flame graph and top symbols of `dump` in `workdir`; the dump itself is kept
    there gzip-compressed (callgrind_annotate and KCachegrind read it after gunzip). Returns the
    profile document stored with the run."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    stacks = folded_stacks(dump)
    folded = write_folded(stacks, workdir / "profile.folded.gz")
    shares = symbol_shares(stacks)
    total = dump.total("Ir")
    subtitle = (f"{total:,} instructions over {ops:,} operations ({total / max(ops, 1):,.0f} per op), "
                "counted by callgrind; stacks rebuilt from its call graph")
    svg = render_stacks(stacks, workdir / "flamegraph.svg", title=title, subtitle=subtitle, count_name="instructions")
    kept = workdir / "callgrind.out.gz"
    with open(dump.path, "rb") as source, gzip.open(kept, "wb") as target:
        shutil.copyfileobj(source, target)
    document = {
        "folded_path": str(folded), "svg_path": str(svg), "callgrind_path": str(kept), "event": EVENT,
        "samples": shares.samples, "instructions": total, "ops": ops,
        "top_self": [{"symbol": s, "share": round(v, 6)} for s, v in shares.top_self(TOP_SYMBOLS)],
        "top_total": [{"symbol": s, "share": round(v, 6)} for s, v in shares.top_total(TOP_SYMBOLS)],
    }
    (workdir / "profile.json").write_text(json.dumps(document, indent=2) + "\n")
    return document
