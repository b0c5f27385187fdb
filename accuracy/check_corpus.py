#!/usr/bin/env python3
"""Check accuracy/corpus.yaml against the Redis git history and the upstream suite catalogue.

A stop-gap, standard library + PyYAML only; the runner's own validation supersedes it.

    python3 accuracy/check_corpus.py [--corpus accuracy/corpus.yaml]
        [--repo /work/.mirror/redis+redis/repo] [--suites /work/shared/upstream-suites/test-suites]
        [--no-git]

Prints one line per problem, prefixed with the entry's name and line, and exits 1 if there is
any; otherwise prints a summary and exits 0.
"""
import argparse
import os
import re
import subprocess
import sys

import yaml

KINDS = {"improvement": "faster", "regression": "slower", "control": "none"}
RULES = {"1a", "1b", "1a+1b", "2", "2-fix", "3a", "3b", "range"}
COUNTABLE = {"command-execution": True, "per-request-overhead": True,
             "syscalls": False, "network": False, "memory-latency": False,
             "threads": False, "background": False}
METRICS = {"throughput", "cpu_per_op", "latency", "instructions_per_op"}
BUILD_CHECKED = {"commit", "parent", "both", "ends"}
SHA = re.compile(r"^[0-9a-f]{40}$")
NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
URL = re.compile(r"^https://github\.com/redis/redis/(pull|issues)/(\d+)$")


def load_with_lines(path):
    """The corpus, plus the line (1-based) at which each entry starts."""
    text = open(path, encoding="utf-8").read()
    data = yaml.safe_load(text)
    node = yaml.compose(text)
    lines = []
    for key, value in node.value:
        if key.value == "entries":
            lines = [item.start_mark.line + 1 for item in value.value]
    return data, lines


class Git:
    def __init__(self, repo):
        self.repo = repo
        self._fp = {}

    def run(self, *args):
        r = subprocess.run(["git", "--git-dir=" + self.repo, *args],
                           capture_output=True, text=True)
        return r.returncode, r.stdout.strip()

    def exists(self, sha):
        return self.run("cat-file", "-e", sha + "^{commit}")[0] == 0

    def first_parent(self, sha):
        rc, out = self.run("rev-parse", "--verify", sha + "^1")
        return out if rc == 0 else None

    def is_ancestor(self, a, b):
        return self.run("merge-base", "--is-ancestor", a, b)[0] == 0

    def first_parent_path(self, good, bad):
        key = (good, bad)
        if key not in self._fp:
            rc, out = self.run("rev-list", "--first-parent", f"{good}..{bad}")
            self._fp[key] = set(out.split()) if rc == 0 else set()
        return self._fp[key]


def check_entry(e, where, git, suites_dir, problems):
    def bad(msg):
        problems.append(f"{where}: {msg}")

    name = e.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        bad(f"name {name!r} is not a slug")
    kind = e.get("kind")
    if kind not in KINDS:
        bad(f"kind {kind!r} not in {sorted(KINDS)}")
    if e.get("rule") not in RULES:
        bad(f"rule {e.get('rule')!r} not in {sorted(RULES)}")
    if not isinstance(e.get("weak"), bool):
        bad("weak must be true or false")
    elif e["weak"] and not e.get("weak_reason"):
        bad("weak entry without weak_reason")
    elif not e["weak"] and e.get("weak_reason"):
        bad("weak_reason on an entry that is not weak")

    single = "commit" in e or "parent" in e
    ranged = any(k in e for k in ("good", "bad", "culprits"))
    if single == ranged:
        bad("needs either commit+parent or good+bad+culprits")
    shas = []
    if single:
        for k in ("commit", "parent"):
            if not SHA.match(str(e.get(k, ""))):
                bad(f"{k} is not a full 40-hex sha: {e.get(k)!r}")
        shas += [e.get("commit"), e.get("parent")]
    if ranged:
        for k in ("good", "bad"):
            if not SHA.match(str(e.get(k, ""))):
                bad(f"{k} is not a full 40-hex sha: {e.get(k)!r}")
        cul = e.get("culprits")
        if not isinstance(cul, list) or not cul:
            bad("culprits must be a non-empty list")
            cul = []
        for c in cul + list(e.get("other_movers") or []):
            if not SHA.match(str(c)):
                bad(f"culprit/other_mover is not a full 40-hex sha: {c!r}")
        shas += [e.get("good"), e.get("bad")] + cul

    if git:
        for s in shas:
            if s and SHA.match(str(s)) and not git.exists(s):
                bad(f"commit {s} does not exist in {git.repo}")
        if single and SHA.match(str(e.get("commit", ""))) and git.exists(e["commit"]):
            fp = git.first_parent(e["commit"])
            if fp != e.get("parent"):
                bad(f"parent {e.get('parent')} is not the first parent of {e['commit']} ({fp})")
        if ranged and all(SHA.match(str(e.get(k, ""))) for k in ("good", "bad")):
            if not git.is_ancestor(e["good"], e["bad"]):
                bad("good is not an ancestor of bad")
            path = git.first_parent_path(e["good"], e["bad"])
            for c in list(e.get("culprits") or []) + list(e.get("other_movers") or []):
                if c not in path:
                    bad(f"{c} is not on the first-parent line good..bad")

    if not str(e.get("claim", "")).strip():
        bad("claim is empty")
    src = e.get("source")
    if not isinstance(src, dict):
        bad("source must be a mapping with url and pr and/or issue")
    else:
        m = URL.match(str(src.get("url", "")))
        if not m:
            bad(f"source.url {src.get('url')!r} is not a redis/redis pull or issue URL")
        numbers = {src.get("pr"), src.get("issue")} - {None}
        if not numbers:
            bad("source needs pr or issue")
        if m and int(m.group(2)) not in numbers:
            bad(f"source.url names #{m.group(2)}, not the entry's pr/issue {sorted(numbers)}")
        for u in src.get("also") or []:
            if not URL.match(str(u)):
                bad(f"source.also {u!r} is not a redis/redis pull or issue URL")

    suites = e.get("suites")
    if suites is None and not e.get("command"):
        bad("needs suites or command")
    for s in suites or []:
        if not os.path.isfile(os.path.join(suites_dir, s + ".yml")):
            bad(f"suite {s} is not in {suites_dir}")

    eli = e.get("effect_lives_in")
    if eli not in COUNTABLE:
        bad(f"effect_lives_in {eli!r} not in {sorted(COUNTABLE)}")
    elif e.get("countable") is not COUNTABLE[eli]:
        bad(f"countable must be {COUNTABLE[eli]} when the effect lives in {eli}")
    if not e.get("effect_reason"):
        bad("effect_reason is empty")

    exp = e.get("expected")
    if not isinstance(exp, dict):
        bad("expected must be a mapping")
    else:
        sign = exp.get("sign")
        if kind in KINDS and sign != KINDS[kind]:
            bad(f"expected.sign {sign!r} does not fit kind {kind} ({KINDS[kind]})")
        if sign != "none":
            if exp.get("metric") not in METRICS:
                bad(f"expected.metric {exp.get('metric')!r} not in {sorted(METRICS)}")
            r = exp.get("ratio")
            if r is not None:
                if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, (int, float)) for x in r)
                        and r[0] < r[1]):
                    bad(f"expected.ratio {r!r} is not [low, high]")
                elif sign == "faster" and r[0] <= 1:
                    bad(f"expected.ratio {r} must lie above 1 for a faster change")
                elif sign == "slower" and r[1] > 1:
                    bad(f"expected.ratio {r} must not exceed 1 for a slower change")
            elif not exp.get("note"):
                bad("expected.ratio is null without a note saying why")

    if not isinstance(e.get("builds_here"), bool):
        bad("builds_here must be true or false")
    if "build_checked" in e and e["build_checked"] not in BUILD_CHECKED:
        bad(f"build_checked {e['build_checked']!r} not in {sorted(BUILD_CHECKED)}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=os.path.join(here, "corpus.yaml"))
    ap.add_argument("--repo", default="/work/.mirror/redis+redis/repo")
    ap.add_argument("--suites", default="/work/shared/upstream-suites/test-suites")
    ap.add_argument("--no-git", action="store_true", help="skip the checks against the git history")
    a = ap.parse_args()

    data, lines = load_with_lines(a.corpus)
    git = None if a.no_git else Git(a.repo)
    problems = []
    entries = data.get("entries") or []
    for s in data.get("control_trio") or []:
        if not os.path.isfile(os.path.join(a.suites, s + ".yml")):
            problems.append(f"control_trio: suite {s} is not in {a.suites}")
    seen = {}
    for i, e in enumerate(entries):
        where = f"{a.corpus}:{lines[i] if i < len(lines) else '?'} {e.get('name')}"
        if e.get("name") in seen:
            problems.append(f"{where}: name already used at line {seen[e['name']]}")
        seen.setdefault(e.get("name"), lines[i] if i < len(lines) else "?")
        check_entry(e, where, git, a.suites, problems)

    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {len(entries)} entries")
        return 1
    counts = {}
    for e in entries:
        k = (e["kind"], "weak" if e["weak"] else "strong")
        counts[k] = counts.get(k, 0) + 1
    summary = ", ".join(f"{k[0]} {k[1]} {v}" for k, v in sorted(counts.items()))
    print(f"ok: {len(entries)} entries ({summary})"
          + ("" if git else "; git checks skipped"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
