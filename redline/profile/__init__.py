"""Profiles: where the server's CPU went — perf record, folded stacks, flame graphs, top symbols,
differential flame graphs and hotspots across a suite. See docs/profiles.md."""

from redline.profile.compare import describe_move, moved_symbols
from redline.profile.flamegraph import diff_flamegraph, render_flamegraph
from redline.profile.folding import fold_perf_script, read_folded, write_folded
from redline.profile.hotspots import (Hotspots, HotStack, HotSymbol, format_hot_stacks_table, format_hotspots_table,
                                      hotspots)
from redline.profile.recorder import ProfileResult, Recorder
from redline.profile.symbols import SymbolShares, symbol_shares
from redline.profile.unwinder import UnwinderChoice, choose_unwinder

__all__ = [
    "HotStack", "HotSymbol", "Hotspots", "ProfileResult", "Recorder", "SymbolShares", "UnwinderChoice",
    "choose_unwinder", "describe_move", "diff_flamegraph", "fold_perf_script", "format_hot_stacks_table",
    "format_hotspots_table", "hotspots", "moved_symbols", "read_folded", "render_flamegraph",
    "symbol_shares", "write_folded",
]
