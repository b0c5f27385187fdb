"""The corpus against the repository's history: every sha an entry names exists, `parent` is the
commit's first parent, a range's `good` is an ancestor of `bad`, and its culprits and other movers
lie on bad's first-parent line after good. A handful of git calls for the whole corpus."""

from __future__ import annotations

import subprocess
from pathlib import Path

from redline.accuracy.corpus import SHA, Corpus, Problem
from redline.core.errors import UsageError


class Repository:
    """A clone of the server's repository, read with git (nothing is written to it)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if self._git("rev-parse", "--git-dir").returncode != 0:
            raise UsageError(f"--repository {self.path}: not a git repository")
        self._first_parent_lines: dict[tuple[str, str], set[str]] = {}

    def _git(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(self.path), *args], input=stdin, capture_output=True, text=True,
                              timeout=300)

    def existing(self, shas: set[str]) -> set[str]:
        """Those of `shas` that name a commit here (one `git cat-file --batch-check`)."""
        ordered = sorted(shas)
        out = self._git("cat-file", "--batch-check=%(objectname) %(objecttype)",
                        stdin="".join(f"{sha}\n" for sha in ordered)).stdout.splitlines()
        return {line.split()[0] for line in out if line.endswith(" commit")}

    def first_parents(self, shas: set[str]) -> dict[str, str | None]:
        """sha → its first parent (None for a root commit), for commits that exist."""
        if not shas:
            return {}
        out = self._git("log", "--no-walk=unsorted", "--format=%H %P", *sorted(shas), "--").stdout.splitlines()
        parents = {}
        for line in out:
            sha, *rest = line.split()
            parents[sha] = rest[0] if rest else None
        return parents

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self._git("merge-base", "--is-ancestor", ancestor, descendant).returncode == 0

    def first_parent_line(self, good: str, bad: str) -> set[str]:
        """The commits after `good` on `bad`'s first-parent line, `bad` included."""
        key = (good, bad)
        if key not in self._first_parent_lines:
            out = self._git("rev-list", "--first-parent", f"{good}..{bad}", "--")
            self._first_parent_lines[key] = set(out.stdout.split()) if out.returncode == 0 else set()
        return self._first_parent_lines[key]


def check_history(corpus: Corpus, repository: Repository) -> list[Problem]:
    named = {sha for entry in corpus.entries for sha in entry.commits if isinstance(sha, str) and SHA.match(sha)}
    present = repository.existing(named)
    parents = repository.first_parents({e.raw["commit"] for e in corpus.entries
                                        if not e.ranged and e.raw.get("commit") in present})
    problems = []
    for entry in corpus.entries:
        for key in ("commit", "parent", "good", "bad", "culprits", "other_movers"):
            value = entry.raw.get(key)
            for sha in value if isinstance(value, list) else [value] if value else []:
                if isinstance(sha, str) and SHA.match(sha) and sha not in present:
                    problems.append(entry.problem(key, f"commit {sha} does not exist in {repository.path}"))
        if not entry.ranged:
            commit, parent = entry.raw.get("commit"), entry.raw.get("parent")
            if commit in parents and parents[commit] != parent:
                problems.append(entry.problem("parent", f"parent {parent} is not the first parent of {commit} "
                                                        f"({parents[commit]})"))
            continue
        good, bad = entry.raw.get("good"), entry.raw.get("bad")
        if good not in present or bad not in present:
            continue
        if not repository.is_ancestor(good, bad):
            problems.append(entry.problem("good", f"good {good[:12]} is not an ancestor of bad {bad[:12]}"))
            continue
        line = repository.first_parent_line(good, bad)
        for key in ("culprits", "other_movers"):
            for sha in entry.raw.get(key) or []:
                if sha in present and sha not in line:
                    problems.append(entry.problem(key, f"{sha[:12]} is not on bad's first-parent line after good"))
    return problems
