"""The accuracy corpus (accuracy/corpus.yaml, described field by field in accuracy/README.md): read
with every entry's line, and checked. One validator for the runner and for `redline accuracy
--check`:

  schema     every entry on its own (pure): kinds, rules, shas, sources, expected sign and band,
             where the effect lives and whether a count can see it, the structured preparation
  history    against a clone of the repository (redline.accuracy.history): commits exist, `parent`
             is the first parent, a range's good is an ancestor of bad and its culprits lie on
             bad's first-parent line after good
  catalogue  every suite is a file <name>.yml of the upstream catalogue

A problem is one line, `FILE:LINE NAME: what`, at the line of the field it concerns (else the
entry's)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from redline.core.errors import UsageError
from redline.suites.errors import SpecError
from redline.suites.yamlnodes import compose_file

SCHEMA = 1
KINDS = {"improvement": "faster", "regression": "slower", "control": "none"}
RULES = {"1a", "1b", "1a+1b", "2", "2-fix", "3a", "3b", "range"}
COUNTABLE = {"command-execution": True, "per-request-overhead": True,
             "syscalls": False, "network": False, "memory-latency": False,
             "threads": False, "background": False}
METRICS = {"throughput", "cpu_per_op", "latency", "instructions_per_op"}
BUILD_CHECKED = {"commit", "parent", "both", "ends"}
PREPARE_KEYS = {"from_suite", "init_commands", "init_lua", "preload", "keyspacelen"}
ENTRY_KEYS = {"name", "kind", "rule", "weak", "weak_reason", "commit", "parent", "good", "bad", "culprits",
              "other_movers", "claim", "source", "suites", "command", "dataset", "prepare", "config", "topology",
              "effect_lives_in", "effect_reason", "countable", "expected", "builds_here", "build_checked",
              "build_note", "variant"}
SOURCE_KEYS = {"pr", "issue", "url", "also", "numbers", "note"}
EXPECTED_KEYS = {"sign", "metric", "claimed", "ratio", "note"}
TOP_KEYS = {"schema", "repository", "windows", "control_trio", "entries"}
SHA = re.compile(r"^[0-9a-f]{40}$")
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
URL = re.compile(r"^https://github\.com/redis/redis/(pull|issues)/(\d+)$")


class CorpusError(UsageError):
    """A corpus that cannot be used: one line naming the file, line and entry (exit 2)."""


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int | None
    name: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where} {self.name}: {self.message}" if self.name else f"{where}: {self.message}"


@dataclass
class Entry:
    """One entry as written, with the line of the entry and of each of its keys."""

    raw: dict
    path: Path
    line: int
    key_lines: dict[str, int] = field(default_factory=dict)
    index: int = 0                       # position in the corpus

    def __getattr__(self, key):          # entry.claim, entry.commit, … (None when absent)
        if key not in ENTRY_KEYS:
            raise AttributeError(key)
        return self.raw.get(key)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line} {self.name}"

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)

    def problem(self, key: str | None, message: str) -> Problem:
        return Problem(self.path, self.line_of(key) if key else self.line, self.raw.get("name"), message)

    @property
    def ranged(self) -> bool:
        return "good" in self.raw or "bad" in self.raw or "culprits" in self.raw

    @property
    def weak(self) -> bool:
        return self.raw.get("weak") is True

    @property
    def expected(self) -> dict:
        return self.raw.get("expected") or {}

    @property
    def sign(self) -> str | None:
        return self.expected.get("sign")

    @property
    def band(self) -> tuple[float, float] | None:
        ratio = self.expected.get("ratio")
        return (float(ratio[0]), float(ratio[1])) if isinstance(ratio, list) and len(ratio) == 2 else None

    @property
    def suite_names(self) -> list[str]:
        return list(self.raw.get("suites") or [])

    @property
    def commits(self) -> list[str]:
        """Every sha the entry names."""
        if self.ranged:
            return [self.raw.get("good"), self.raw.get("bad"), *(self.raw.get("culprits") or []),
                    *(self.raw.get("other_movers") or [])]
        return [self.raw.get("commit"), self.raw.get("parent")]


@dataclass
class Corpus:
    path: Path
    data: dict
    entries: list[Entry]
    top_lines: dict[str, int]

    @property
    def control_trio(self) -> list[str]:
        return list(self.data.get("control_trio") or [])


def load_corpus(path: Path) -> Corpus:
    """The corpus with the line of every entry and key; a file that is no corpus at all (not YAML,
    not a mapping, no list of entries) is a CorpusError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: cannot read the corpus ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        root, loader = compose_file(path, text)
    except SpecError as exc:
        raise CorpusError(str(exc)) from None
    if not isinstance(root, yaml.MappingNode):
        raise CorpusError(f"{path}:1: a corpus is a mapping with `entries:`")
    data = loader.construct_document(root)
    top_lines = {key.value: key.start_mark.line + 1 for key, _ in root.value}
    entries_node = next((value for key, value in root.value if key.value == "entries"), None)
    if not isinstance(entries_node, yaml.SequenceNode) or not isinstance(data.get("entries"), list):
        raise CorpusError(f"{path}:{top_lines.get('entries', 1)}: `entries` must be a list of entries")
    entries = []
    for index, (node, raw) in enumerate(zip(entries_node.value, data["entries"])):
        key_lines = ({key.value: key.start_mark.line + 1 for key, _ in node.value}
                     if isinstance(node, yaml.MappingNode) else {})
        entries.append(Entry(raw if isinstance(raw, dict) else {"name": None, "_not_a_mapping": raw}, path,
                             node.start_mark.line + 1, key_lines, index))
    return Corpus(path, data, entries, top_lines)


# -- schema (pure) ----------------------------------------------------------------------------
def check_schema(corpus: Corpus) -> list[Problem]:
    """Every problem of the corpus that needs neither git nor the catalogue."""
    problems = []
    if corpus.data.get("schema") != SCHEMA:
        problems.append(Problem(corpus.path, corpus.top_lines.get("schema"), None,
                                f"schema {corpus.data.get('schema')!r}: this redline reads schema {SCHEMA}"))
    for key in sorted(set(corpus.data) - TOP_KEYS):
        problems.append(Problem(corpus.path, corpus.top_lines.get(key), None, f"unknown key {key!r}"))
    seen: dict[str, int] = {}
    for entry in corpus.entries:
        problems += check_entry(entry)
        name = entry.raw.get("name")
        if name in seen:
            problems.append(entry.problem("name", f"name already used at line {seen[name]}"))
        seen.setdefault(name, entry.line)
    return problems


def check_entry(entry: Entry) -> list[Problem]:
    problems: list[Problem] = []

    def bad(key: str | None, message: str) -> None:
        problems.append(entry.problem(key, message))

    e = entry.raw
    if "_not_a_mapping" in e:
        return [entry.problem(None, "an entry must be a mapping of fields")]
    for key in sorted(set(e) - ENTRY_KEYS):
        bad(key, f"unknown field {key!r}")
    if not isinstance(e.get("name"), str) or not NAME.match(e["name"]):
        bad("name", f"name {e.get('name')!r} is not a slug ([a-z0-9][a-z0-9.-]*)")
    kind = e.get("kind")
    if kind not in KINDS:
        bad("kind", f"kind {kind!r} not in {sorted(KINDS)}")
    if e.get("rule") not in RULES:
        bad("rule", f"rule {e.get('rule')!r} not in {sorted(RULES)}")
    if not isinstance(e.get("weak"), bool):
        bad("weak", "weak must be true or false")
    elif e["weak"] and not e.get("weak_reason"):
        bad("weak", "a weak entry needs weak_reason")
    elif not e["weak"] and e.get("weak_reason"):
        bad("weak_reason", "weak_reason on an entry that is not weak")
    _check_commits(entry, bad)
    if not str(e.get("claim") or "").strip():
        bad("claim", "the entry has no claim")
    _check_source(e.get("source"), bad)
    _check_workload(entry, bad)
    eli = e.get("effect_lives_in")
    if eli not in COUNTABLE:
        bad("effect_lives_in", f"effect_lives_in {eli!r} not in {sorted(COUNTABLE)}")
    elif e.get("countable") is not COUNTABLE[eli]:
        bad("countable", f"countable must be {str(COUNTABLE[eli]).lower()} when the effect lives in {eli}")
    if not e.get("effect_reason"):
        bad("effect_reason", "effect_reason is empty")
    _check_expected(e.get("expected"), kind, bad)
    if not isinstance(e.get("builds_here"), bool):
        bad("builds_here", "builds_here must be true or false")
    if "build_checked" in e and e["build_checked"] not in BUILD_CHECKED:
        bad("build_checked", f"build_checked {e['build_checked']!r} not in {sorted(BUILD_CHECKED)}")
    if "variant" in e:
        from redline.builder import load_variant
        try:
            load_variant(str(e["variant"]))
        except UsageError as exc:
            bad("variant", str(exc))
    return problems


def _check_commits(entry: Entry, bad) -> None:
    e = entry.raw
    single = "commit" in e or "parent" in e
    if single == entry.ranged:
        bad(None, "needs either commit and parent, or good, bad and culprits")
    for key in (("commit", "parent") if single else ("good", "bad") if entry.ranged else ()):
        if not SHA.match(str(e.get(key, ""))):
            bad(key, f"{key} is not a full 40-hex sha: {e.get(key)!r}")
    if entry.ranged:
        culprits = e.get("culprits")
        if not isinstance(culprits, list) or not culprits:
            bad("culprits", "culprits must be a non-empty list of shas")
        for key in ("culprits", "other_movers"):
            for sha in e.get(key) or []:
                if not SHA.match(str(sha)):
                    bad(key, f"{key}: {sha!r} is not a full 40-hex sha")


def _check_source(source, bad) -> None:
    if not isinstance(source, dict):
        bad("source", "the claim has no source: source must be a mapping with url and pr and/or issue")
        return
    for key in sorted(set(source) - SOURCE_KEYS):
        bad("source", f"unknown source field {key!r}")
    numbers = {source.get("pr"), source.get("issue")} - {None}
    if not numbers:
        bad("source", "the claim has no source: source needs pr or issue")
    match = URL.match(str(source.get("url", "")))
    if not match:
        bad("source", f"source.url {source.get('url')!r} is not a redis/redis pull or issue URL")
    elif int(match.group(2)) not in numbers:
        bad("source", f"source.url names #{match.group(2)}, not the entry's pr/issue {sorted(numbers)}")
    for url in source.get("also") or []:
        if not URL.match(str(url)):
            bad("source", f"source.also {url!r} is not a redis/redis pull or issue URL")


def _check_workload(entry: Entry, bad) -> None:
    e = entry.raw
    suites = e.get("suites")
    if suites is None and not e.get("command"):
        bad(None, "needs suites or a command")
    if suites is not None and (not isinstance(suites, list) or not all(isinstance(s, str) and s for s in suites)):
        bad("suites", "suites must be a list of suite names")
    if "config" in e and not (isinstance(e["config"], dict) and all(isinstance(v, str) for v in e["config"].values())):
        bad("config", "config must map parameter names to strings (quote numbers and yes/no)")
    prepare = e.get("prepare")
    if prepare is None or prepare == "empty":
        return
    if not e.get("command"):
        bad("prepare", "prepare belongs to an entry with a command")
    if not isinstance(prepare, dict):
        bad("prepare", "prepare must be `empty` or a mapping "
                       "(from_suite, init_commands, init_lua, preload, keyspacelen)")
        return
    for key in sorted(set(prepare) - PREPARE_KEYS):
        bad("prepare", f"unknown prepare field {key!r}")
    if "from_suite" in prepare and len(set(prepare) & {"init_commands", "init_lua", "preload"}):
        bad("prepare", "prepare takes either from_suite or its own init_commands/init_lua/preload")
    if "keyspacelen" in prepare and (not isinstance(prepare["keyspacelen"], int) or prepare["keyspacelen"] < 0):
        bad("prepare", "prepare.keyspacelen must be a whole number of keys")


def _check_expected(expected, kind, bad) -> None:
    if not isinstance(expected, dict):
        bad("expected", "expected must be a mapping (sign, metric, claimed, ratio, note)")
        return
    for key in sorted(set(expected) - EXPECTED_KEYS):
        bad("expected", f"unknown expected field {key!r}")
    sign = expected.get("sign")
    if kind in KINDS and sign != KINDS[kind]:
        bad("expected", f"expected.sign {sign!r} does not fit kind {kind} ({KINDS[kind]})")
    if sign == "none":
        return
    if expected.get("metric") not in METRICS:
        bad("expected", f"expected.metric {expected.get('metric')!r} not in {sorted(METRICS)}")
    ratio = expected.get("ratio")
    if ratio is None:
        if not expected.get("note"):
            bad("expected", "expected.ratio is null without a note saying why")
        return
    if not (isinstance(ratio, list) and len(ratio) == 2 and all(isinstance(x, (int, float)) for x in ratio)
            and ratio[0] < ratio[1]):
        bad("expected", f"expected.ratio {ratio!r} is not [low, high]")
    elif sign == "faster" and ratio[0] <= 1:
        bad("expected", f"expected.ratio {ratio} must lie above 1 for a faster change")
    elif sign == "slower" and ratio[1] > 1:
        bad("expected", f"expected.ratio {ratio} must not exceed 1 for a slower change")


# -- the catalogue ----------------------------------------------------------------------------
def check_catalogue(corpus: Corpus, catalogue: Path) -> list[Problem]:
    """Every suite an entry (or prepare.from_suite, or control_trio) names is a file of the catalogue."""
    def missing(name) -> bool:
        return not (catalogue / f"{name}.yml").is_file()

    problems = [Problem(corpus.path, corpus.top_lines.get("control_trio"), None,
                        f"control_trio: suite {name} is not in the catalogue {catalogue}")
                for name in corpus.control_trio if missing(name)]
    for entry in corpus.entries:
        for name in entry.suite_names:
            if missing(name):
                problems.append(entry.problem("suites", f"suite {name} is not in the catalogue {catalogue}"))
        prepare = entry.raw.get("prepare")
        if isinstance(prepare, dict) and prepare.get("from_suite") and missing(prepare["from_suite"]):
            problems.append(entry.problem("prepare", f"prepare.from_suite {prepare['from_suite']} is not in the "
                                                     f"catalogue {catalogue}"))
    return problems


def refuse(problems: list[Problem], how_to_list: str) -> None:
    """Raise the first problem as one line (CorpusError, exit 2), saying how many more there are."""
    if problems:
        more = f" (and {len(problems) - 1} more; {how_to_list} lists them all)" if len(problems) > 1 else ""
        raise CorpusError(f"{problems[0]}{more}")
