"""Where the source comes from: a commit of a local git repository, or an unpacked tree.

Both are copied into a private directory before anything is compiled: the user's work tree,
index and refs are never touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from redline.builder.memo import UNKNOWN, DigestMemo
from redline.core.errors import UsageError

# Build outputs that may sit in an unpacked tree someone already built in: never hashed, never
# copied (an ELF file is recognised by its first bytes, wherever it is).
SKIPPED_DIRS = {".git"}
SKIPPED_FILES = ("*.o", "*.a", "*.so", "*.gcda", "*.gcno", ".make-*", "release.h")
ELF_MAGIC = b"\x7fELF"
HASH_CHUNK = 1 << 20
GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR")


class SourceChanged(UsageError):
    """The tree changed between hashing it and copying it."""


@dataclass(frozen=True)
class GitCommit:
    repo: Path          # as the user named it (resolved): recorded in the source string
    ref: str
    sha: str
    git_dir: Path       # the repository's (common) git directory: what is cloned

    @property
    def source(self) -> str:
        return f"git:{self.repo}@{self.sha}"


@dataclass(frozen=True)
class SourceTree:
    directory: Path
    files: tuple[str, ...]     # relative paths, sorted: exactly what is hashed and copied
    digest: str                # sha256 over paths, exec bits, symlink targets and contents

    @property
    def source(self) -> str:
        return f"src:{self.directory}#{self.digest[:16]}"


def _git_environment() -> dict[str, str]:
    """The user's environment without the variables that would point git elsewhere."""
    env = {k: v for k, v in os.environ.items() if k not in GIT_REDIRECTS}
    env["LC_ALL"] = "C"
    return env


def _git(args: list[str], *, cwd: Path, what: str) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                              env=_git_environment())
    except FileNotFoundError:
        if not cwd.is_dir():     # Popen says the same for a missing working directory
            raise UsageError(f"{what} ({cwd} does not exist)") from None
        raise UsageError("git is not installed (needed for git: targets)") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise UsageError(f"{what} ({detail[-1]})" if detail else what)
    return proc.stdout


def resolve_commit(repo: Path, ref: str) -> GitCommit:
    """REF (a branch, tag, sha, HEAD~2, …) of the repository at `repo`, as a full commit sha."""
    repo = repo.expanduser()
    if not repo.is_dir():
        raise UsageError(f"git repository does not exist: {repo}")
    if not ref or ref.startswith("-"):
        raise UsageError(f"bad git ref {ref!r} for {repo}")
    _git(["rev-parse", "--git-dir"], cwd=repo, what=f"{repo} is not a git repository")
    sha = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], cwd=repo,
               what=f"git ref {ref!r} does not name a commit in {repo}").strip()
    if len(sha) < 40:
        raise UsageError(f"git ref {ref!r} does not name a commit in {repo}")
    common = _git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=repo,
                  what=f"cannot find the git directory of {repo}").strip()
    return GitCommit(repo=repo.resolve(), ref=ref, sha=sha, git_dir=Path(common))


def commit_summary(repo: Path, sha: str) -> dict[str, str]:
    """The commit's full sha, subject line and committer date (ISO 8601), as git reports them."""
    out = _git(["show", "-s", "--format=%H%x00%s%x00%cI", sha, "--"], cwd=repo,
               what=f"cannot read commit {sha} of {repo}")
    full, subject, date = out.rstrip("\n").split("\0")
    return {"sha": full, "subject": subject, "date": date}


def checkout_commit(commit: GitCommit, destination: Path) -> None:
    """A private clone at `destination` with the commit checked out (detached).

    `git clone --shared` borrows the user's object store read-only (nothing is written to the
    user's repository) and leaves a real .git, so redis' mkreleasehdr.sh records the commit
    in `INFO server` (redis_git_sha1) and a clean tree (redis_git_dirty:0).
    """
    _git(["clone", "--quiet", "--shared", "--no-checkout", "--", str(commit.git_dir), str(destination)],
         cwd=destination.parent, what=f"cannot clone {commit.repo}")
    _git(["checkout", "--quiet", "--detach", commit.sha], cwd=destination,
         what=f"cannot check out {commit.sha} of {commit.repo}")


def _in_git_work_tree(directory: Path) -> bool:
    try:
        proc = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=directory,
                              capture_output=True, text=True, timeout=60, env=_git_environment())
    except FileNotFoundError:
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def _git_listed_files(directory: Path) -> list[str]:
    """Tracked files plus untracked ones git does not ignore, relative to `directory`."""
    out = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=directory,
               what=f"cannot list the files of {directory}")
    names = sorted({name for name in out.split("\0") if name})
    return [name for name in names if os.path.lexists(directory / name)]


def _walked_files(directory: Path) -> list[str]:
    """Every file under `directory` except .git/ and build outputs named by SKIPPED_FILES."""
    found: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        prefix = os.path.relpath(root, directory)
        for name in files:
            if not any(fnmatch(name, pattern) for pattern in SKIPPED_FILES):
                found.append(name if prefix == "." else os.path.join(prefix, name))
    return sorted(found)


def _file_digest(path: Path, *, skip_elf: bool) -> str | None:
    """sha256 of a file's content; None for an ELF binary when skip_elf (a build output)."""
    content = hashlib.sha256()
    with open(path, "rb") as handle:
        chunk = handle.read(HASH_CHUNK)
        if skip_elf and chunk.startswith(ELF_MAGIC):
            return None
        while chunk:
            content.update(chunk)
            chunk = handle.read(HASH_CHUNK)
    return content.hexdigest()


def _digest(directory: Path, files: list[str], *, skip_elf: bool = False,
            memo: DigestMemo | None = None) -> tuple[str, list[str]]:
    """(hash of the tree, the files it covers): paths, exec bits, symlink targets, contents."""
    total = hashlib.sha256()
    covered: list[str] = []
    for name in files:
        path = directory / name
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            total.update(f"L {name}\0{os.readlink(path)}\0".encode())
        elif stat.S_ISREG(info.st_mode):
            content = memo.get(name, info) if memo is not None else UNKNOWN
            if content is UNKNOWN:
                content = _file_digest(path, skip_elf=skip_elf)
                if memo is not None:
                    memo.put(name, info, content)
            if content is None:
                continue
            executable = "x" if info.st_mode & stat.S_IXUSR else "-"
            total.update(f"F {name}\0{executable}\0{content}\0".encode())
        else:
            continue
        covered.append(name)
    return total.hexdigest(), covered


def scan_tree(directory: Path, *, memo_store: Path | None = None) -> SourceTree:
    """The source files of an unpacked tree and their content hash.

    In a git work tree: the files git tracks plus untracked ones it does not ignore (contents
    as they are on disk). Elsewhere: every file except .git/ and build outputs (*.o, *.a, …,
    .make-* stamps, src/release.h and any ELF binary). With `memo_store`, file digests are
    remembered there by stat() signature (see memo.py), so an unchanged tree is not re-read.
    """
    directory = directory.expanduser()
    if not directory.is_dir():
        raise UsageError(f"source directory does not exist: {directory}")
    directory = directory.resolve()
    if not (directory / "src").is_dir() or not (directory / "src" / "Makefile").is_file():
        raise UsageError(f"{directory} does not look like a redis or valkey source tree (no src/Makefile)")
    memo = DigestMemo(store=memo_store, directory=directory) if memo_store is not None else None
    if _in_git_work_tree(directory):
        digest, files = _digest(directory, _git_listed_files(directory), memo=memo)
    else:
        digest, files = _digest(directory, _walked_files(directory), skip_elf=True, memo=memo)
    if memo is not None:
        memo.save()
    return SourceTree(directory=directory, files=tuple(files), digest=digest)


def copy_tree(tree: SourceTree, destination: Path) -> None:
    """Copy exactly the scanned files; fail if the tree changed since it was scanned."""
    for name in tree.files:
        source = tree.directory / name
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_file():
            shutil.copy2(source, target)
    if _digest(destination, list(tree.files))[0] != tree.digest:
        raise SourceChanged(f"{tree.directory} changed while redline copied it; run the build again")
