"""Folded stacks → interactive flame graph SVGs (inferno): one profile, or B against A."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from html import escape
from pathlib import Path

from redline.core.errors import RunError
from redline.profile.folding import read_folded
from redline.profile.tools import find_inferno

_TIMEOUT_S = 300


def _folded_text(stacks: Mapping[str, int]) -> bytes:
    return "".join(f"{stack} {count}\n" for stack, count in sorted(stacks.items())).encode()


def _run_inferno(args: list[str], *, stdin: bytes, what: str) -> bytes:
    try:
        proc = subprocess.run(args, input=stdin, capture_output=True, timeout=_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RunError(f"{what}: {args[0]} did not finish within {_TIMEOUT_S}s") from exc
    if proc.returncode != 0:
        raise RunError(f"{what}: {Path(args[0]).name} failed (exit {proc.returncode}): "
                       f"{proc.stderr.decode(errors='replace').strip()[-500:]}")
    return proc.stdout


def empty_svg(out_svg: Path, *, title: str, message: str) -> Path:
    """A small SVG saying why there is no flame graph (inferno refuses empty input)."""
    out_svg.write_text(
        '<?xml version="1.0" standalone="no"?>\n'
        '<svg version="1.1" width="1200" height="120" xmlns="http://www.w3.org/2000/svg">\n'
        '<rect x="0" y="0" width="1200" height="120" fill="#eeeeee"/>\n'
        f'<text x="600" y="40" text-anchor="middle" font-size="17" font-family="monospace">{escape(title)}</text>\n'
        f'<text x="600" y="80" text-anchor="middle" font-size="14" font-family="monospace">{escape(message)}</text>\n'
        '</svg>\n')
    return out_svg


def render_stacks(stacks: Mapping[str, int], out_svg: Path, *, title: str, subtitle: str | None = None,
                  count_name: str = "samples") -> Path:
    """Write an interactive flame graph (hover titles, click to zoom, search) of folded stacks."""
    out_svg = Path(out_svg)
    if not stacks:
        return empty_svg(out_svg, title=title, message="no samples were recorded")
    args = [str(find_inferno("inferno-flamegraph")), "--title", title, "--countname", count_name,
            "--minwidth", "0.05", "--hash"]
    if subtitle:
        args += ["--subtitle", subtitle]
    out_svg.write_bytes(_run_inferno(args, stdin=_folded_text(stacks), what=f"flame graph {out_svg}"))
    return out_svg


def render_flamegraph(folded: Path, out_svg: Path, *, title: str, subtitle: str | None = None) -> Path:
    """Flame graph of a folded file (plain or .gz)."""
    return render_stacks(read_folded(folded), out_svg, title=title, subtitle=subtitle)


def diff_flamegraph(baseline: Path, comparison: Path, out_svg: Path, *, title: str | None = None) -> Path:
    """Differential flame graph: the comparison's stacks, coloured by how each frame's share moved
    from the baseline (red grew, blue shrank). Counts are normalised first, so runs of different
    length compare by share. Inputs are folded files (plain or .gz)."""
    out_svg = Path(out_svg)
    base_stacks, comp_stacks = read_folded(baseline), read_folded(comparison)
    title = title or f"{Path(comparison).name} against {Path(baseline).name}"
    if not base_stacks or not comp_stacks:
        empty = Path(baseline).name if not base_stacks else Path(comparison).name
        return empty_svg(out_svg, title=title, message=f"no samples in {empty}: nothing to compare")
    with tempfile.TemporaryDirectory(prefix="redline-diff-") as tmp:
        base_file, comp_file = Path(tmp, "baseline.folded"), Path(tmp, "comparison.folded")
        base_file.write_bytes(_folded_text(base_stacks))
        comp_file.write_bytes(_folded_text(comp_stacks))
        diff = _run_inferno([str(find_inferno("inferno-diff-folded")), "--normalize", str(base_file),
                             str(comp_file)], stdin=b"", what=f"differential folding for {out_svg}")
    svg = _run_inferno([str(find_inferno("inferno-flamegraph")), "--title", title, "--subtitle",
                        "red: share grew in the comparison, blue: share shrank (counts normalised)",
                        "--minwidth", "0.05"], stdin=diff, what=f"differential flame graph {out_svg}")
    out_svg.write_bytes(svg)
    return out_svg
