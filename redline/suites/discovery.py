"""Finding suite files: paths, directories, built-in suites; choosing tests among them."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SpecError
from .loader import load_test
from .model import TestSpec

SUITE_SUFFIXES = (".yml", ".yaml")
# A YAML file in a suite directory is a test when it has one of these top-level keys;
# files such as upstream's defaults.yml (only `exporter:`) are shared settings, not tests.
TEST_KEYS = frozenset({
    "version", "name", "dbconfig", "clientconfig", "clientconfigs", "tested-commands",
    "tested-groups", "priority", "redis-topologies",
})
_TOP_LEVEL_KEY_RE = re.compile(r"^([A-Za-z0-9_.-]+)\s*:", re.MULTILINE)


def builtin_suites_dir() -> Path:
    return Path(__file__).resolve().parent


def builtin_suites() -> list[str]:
    """Names of the suites shipped in redline/suites/<name>/ (directories holding YAML)."""
    base = builtin_suites_dir()
    if not base.is_dir():
        return []
    return sorted(d.name for d in base.iterdir()
                  if d.is_dir() and not d.name.startswith((".", "_")) and _yaml_files(d))


def _yaml_files(directory: Path) -> list[Path]:
    found = [p for p in directory.rglob("*") if p.suffix in SUITE_SUFFIXES and p.is_file()
             and not any(part.startswith(".") for part in p.relative_to(directory).parts)]
    return sorted(found)


def looks_like_test(path: Path) -> bool:
    """False for YAML files whose top-level keys are all non-test keys (e.g. defaults.yml)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # let load_test report it
    keys = set(_TOP_LEVEL_KEY_RE.findall(text))
    return not keys or bool(keys & TEST_KEYS)


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)  # test files, in order, no duplicates
    skipped: list[Path] = field(default_factory=list)  # YAML files that are not tests


def discover(items: list[str]) -> Discovery:
    """Expand files, directories (recursive) and built-in suite names into test files."""
    result = Discovery()
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            result.files.append(path)

    for item in items:
        path = Path(item)
        if path.is_file():
            add(path)
        elif path.is_dir():
            for candidate in _yaml_files(path):
                if looks_like_test(candidate):
                    add(candidate)
                else:
                    result.skipped.append(candidate)
        elif item in builtin_suites():
            for candidate in _yaml_files(builtin_suites_dir() / item):
                if looks_like_test(candidate):
                    add(candidate)
                else:
                    result.skipped.append(candidate)
        else:
            known = ", ".join(builtin_suites()) or "none installed"
            raise SpecError(path, None, "no such suite file, directory or built-in suite: "
                            f"{item} (built-in suites: {known})")
    return result


def resolve_suites(items: list[str]) -> list[TestSpec]:
    """Load every test named by `items`. Raises SpecError on the first fatal problem."""
    return [load_test(path) for path in discover(items).files]


@dataclass(frozen=True)
class PriorityRange:
    low: int | None
    high: int | None

    def __contains__(self, value: int | None) -> bool:
        if value is None:
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


def parse_priority_range(text: str) -> PriorityRange:
    """"A:B" (inclusive), "A:" , ":B" or "A" (exactly A)."""
    low_text, colon, high_text = text.strip().partition(":")
    try:
        low = int(low_text) if low_text.strip() else None
        high = (int(high_text) if high_text.strip() else None) if colon else low
    except ValueError:
        raise ValueError(f"priority range must look like A:B with integers (e.g. 1:50), "
                         f"got {text!r}") from None
    if low is not None and high is not None and low > high:
        raise ValueError(f"priority range {text!r} is empty: {low} is above {high}")
    return PriorityRange(low, high)


def _command_matches(wanted: str, tested: list[str]) -> bool:
    wanted = wanted.lower()
    return any(t.lower() == wanted or t.lower().split("|")[0] == wanted
               or t.lower().replace("|", " ") == wanted for t in tested)


def name_pattern(text: str) -> re.Pattern:
    """A test-name filter (re.search); ValueError with a one-line reason when it does not compile."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise ValueError(f"invalid name regex {text!r}: {exc}") from None


def select(tests: list[TestSpec], name_regex: str | None = None, *, group: str | None = None,
           command: str | None = None, priority: PriorityRange | str | None = None,
           topology: str | None = None) -> list[TestSpec]:
    """Tests whose name matches `name_regex` (re.search) and every other filter given."""
    pattern = name_pattern(name_regex) if name_regex is not None else None
    if isinstance(priority, str):
        priority = parse_priority_range(priority)
    out = []
    for test in tests:
        if pattern is not None and not pattern.search(test.name):
            continue
        if group is not None and group.lower() not in (g.lower() for g in test.tested_groups):
            continue
        if command is not None and not _command_matches(command, test.tested_commands):
            continue
        if priority is not None and test.priority not in priority:
            continue
        if topology is not None and topology not in test.topologies:
            continue
        out.append(test)
    return out
