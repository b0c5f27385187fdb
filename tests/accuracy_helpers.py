"""Small corpora for the accuracy tests: entries as dicts, written as YAML the way accuracy/corpus.yaml
is, and a tiny git repository whose commits they can name."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import yaml

SUITE = """version: 0.4
name: {name}
dbconfig:
  configuration-parameters:
    save: '""'
  check:
    keyspacelen: 0
tested-commands: [set]
redis-topologies: [oss-standalone, oss-cluster-3-primaries]
clientconfig:
  tool: memtier_benchmark
  arguments: --command "SET __key__ __data__" --test-time 5 -c 2 -t 1
"""


def entry(name: str = "a-change", **fields) -> dict:
    """A valid single-commit improvement (commit and parent filled in by the caller or `repo`)."""
    base = {"name": name, "kind": "improvement", "rule": "1b", "weak": False,
            "commit": "1" * 40, "parent": "2" * 40,
            "claim": "about 10% faster", "source": {"pr": 12345, "url": "https://github.com/redis/redis/pull/12345"},
            "suites": ["suite-a"], "effect_lives_in": "command-execution", "effect_reason": "inside the command",
            "countable": True,
            "expected": {"sign": "faster", "metric": "throughput", "claimed": 1.10, "ratio": [1.049, 1.154]},
            "builds_here": True}
    base.update(copy.deepcopy(fields))
    return {k: v for k, v in base.items() if v is not None}


def control(name: str = "a-control", **fields) -> dict:
    return entry(name, kind="control", rule="3b", expected={"sign": "none"}, **fields)


def ranged(name: str = "a-range", **fields) -> dict:
    base = entry(name, rule="range", **fields)
    for key in ("commit", "parent"):
        base.pop(key, None)
    base.setdefault("good", "3" * 40)
    base.setdefault("bad", "4" * 40)
    base.setdefault("culprits", ["5" * 40])
    return base


def write_corpus(path: Path, entries: list[dict]) -> Path:
    text = "schema: 1\nrepository: https://github.com/redis/redis\nentries:\n"
    for e in entries:
        block = yaml.safe_dump([e], sort_keys=False, width=200)
        text += "\n" + "".join(f"  {line}\n" for line in block.splitlines())
    path.write_text(text)
    return path


def catalogue(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / f"{name}.yml").write_text(SUITE.format(name=name))
    return directory


def git_repo(path: Path, commits: int = 3) -> list[str]:
    """A repository of `commits` commits on one line; their shas, oldest first."""
    path.mkdir(parents=True)
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    shas = []
    for i in range(commits):
        (path / "f.txt").write_text(f"{i}\n")
        subprocess.run(["git", "-C", str(path), "add", "f.txt"], check=True)
        subprocess.run(["git", "-C", str(path), *env, "commit", "-q", "-m", f"c{i}"], check=True)
        shas.append(subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    return shas
