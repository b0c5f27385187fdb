"""Hot symbols and stacks across a whole suite: the lowest-hanging fruit across all commands.

Each test's profile is first turned into shares of its own samples, so every test weighs the same
however long it ran or however many samples it took; a symbol's suite share is the mean of its
per-test shares.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text

from redline.core.errors import UsageError
from redline.profile.folding import read_folded

STACK_FRAMES_SHOWN = 4


@dataclass(frozen=True)
class HotSymbol:
    symbol: str
    share: float          # mean self share over all tests (0..1)
    tests: int            # tests where the symbol has self time
    peak_test: str        # the test where its share is largest
    peak_share: float


@dataclass(frozen=True)
class HotStack:
    stack: str            # root;...;leaf
    share: float          # mean share over all tests
    tests: int


@dataclass(frozen=True)
class Hotspots:
    tests: list[str]
    symbols: list[HotSymbol]
    stacks: list[HotStack]
    profiled: int = 0     # tests with samples: the shares are means over these

    def as_json(self) -> dict:
        return {
            "tests": list(self.tests),
            "profiled": self.profiled,
            "symbols": [vars(s) for s in self.symbols],
            "stacks": [vars(s) for s in self.stacks],
        }


def test_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".folded"):
        name = name.removesuffix(suffix)
    return name


def _names(paths: list[Path]) -> list[str]:
    names = [test_name(p) for p in paths]
    if len(set(names)) < len(names):   # e.g. runs/<test>/profile.folded.gz: use the folder too
        names = [f"{p.parent.name}/{n}" for p, n in zip(paths, names)]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    return names


def hotspots(folded_files: list[Path], top: int = 20, *, names: list[str] | None = None) -> Hotspots:
    """Aggregate folded stacks of several tests, each weighted equally. Profiles without samples
    carry no information about where CPU goes: they are listed in `tests` but neither weigh nor
    dilute the shares (`profiled` counts the tests that do)."""
    if not folded_files:
        raise UsageError("hotspots: no folded stack files given")
    if top < 1:
        raise UsageError(f"hotspots: top must be at least 1, got {top}")
    paths = [Path(p) for p in folded_files]
    names = list(names) if names is not None else _names(paths)
    if len(names) != len(paths):
        raise UsageError(f"hotspots: {len(names)} names for {len(paths)} files")
    if len(set(names)) != len(names):
        raise UsageError(f"hotspots: test names must be unique, got {names}")
    symbol_sum: Counter[str] = Counter()
    symbol_tests: Counter[str] = Counter()
    symbol_peak: dict[str, tuple[float, str]] = {}
    stack_sum: Counter[str] = Counter()
    stack_tests: Counter[str] = Counter()
    profiled: set[str] = set()
    for path, name in zip(paths, names):
        stacks = read_folded(path)
        samples = sum(stacks.values())
        if samples == 0:
            continue
        profiled.add(name)
        self_counts: defaultdict[str, int] = defaultdict(int)
        for stack, count in stacks.items():
            self_counts[stack.rsplit(";", 1)[-1]] += count
            stack_sum[stack] += count / samples
            stack_tests[stack] += 1
        for symbol, count in self_counts.items():
            share = count / samples
            symbol_sum[symbol] += share
            symbol_tests[symbol] += 1
            if share > symbol_peak.get(symbol, (-1.0, ""))[0]:
                symbol_peak[symbol] = (share, name)
    weight = sum(1 for name in names if name in profiled)
    if weight == 0:
        return Hotspots(tests=names, symbols=[], stacks=[], profiled=0)
    symbols = [HotSymbol(symbol=s, share=total / weight, tests=symbol_tests[s],
                         peak_test=symbol_peak[s][1], peak_share=symbol_peak[s][0])
               for s, total in sorted(symbol_sum.items(), key=lambda item: (-item[1], item[0]))[:top]]
    stacks = [HotStack(stack=s, share=total / weight, tests=stack_tests[s])
              for s, total in sorted(stack_sum.items(), key=lambda item: (-item[1], item[0]))[:top]]
    return Hotspots(tests=names, symbols=symbols, stacks=stacks, profiled=weight)


def _tests_phrase(h: Hotspots) -> str:
    missing = len(h.tests) - h.profiled
    return f"{h.profiled} tests" + (f" ({missing} without samples left out)" if missing else "")


def format_hotspots_table(h: Hotspots) -> Table:
    """Ranked self-time symbols across the suite."""
    table = Table(title=f"Hot symbols across {_tests_phrase(h)} (self time, each test weighted equally)")
    table.add_column("#", justify="right")
    table.add_column("symbol")
    table.add_column("suite share", justify="right")
    table.add_column("tests", justify="right")
    table.add_column("hottest in")
    for rank, hot in enumerate(h.symbols, start=1):
        table.add_row(str(rank), Text(hot.symbol), f"{hot.share:.1%}", f"{hot.tests}/{h.profiled}",
                      Text(f"{hot.peak_test} ({hot.peak_share:.1%})"))
    return table


def format_hot_stacks_table(h: Hotspots) -> Table:
    """Ranked whole stacks across the suite (leaf-most frames shown)."""
    table = Table(title=f"Hot stacks across {_tests_phrase(h)} (each test weighted equally)")
    table.add_column("#", justify="right")
    table.add_column(f"stack (last {STACK_FRAMES_SHOWN} frames, leaf last)")
    table.add_column("suite share", justify="right")
    table.add_column("tests", justify="right")
    for rank, hot in enumerate(h.stacks, start=1):
        frames = hot.stack.split(";")
        shown = ("… ; " if len(frames) > STACK_FRAMES_SHOWN else "") + " ; ".join(frames[-STACK_FRAMES_SHOWN:])
        table.add_row(str(rank), Text(shown), f"{hot.share:.1%}", f"{hot.tests}/{h.profiled}")
    return table
