"""From a git commit or a source tree to a cached server binary."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from redline.builder.cache import LOG, MANIFEST, BuildCache
from redline.builder.make import (TAIL_LINES, BuildFailed, MakeJob, Progress, ccache_available, compiler_version,
                                  cpu_count, run_make)
from redline.builder.sources import SourceTree, checkout_commit, copy_tree, resolve_commit, scan_tree
from redline.builder.variants import Variant
from redline.core.errors import UsageError

# Bump when the way redline builds changes (make targets, environment): old entries stop matching.
RECIPE_VERSION = 1
DEFAULT_TIMEOUT_S = 3600.0


@dataclass
class BuildResult:
    binary: Path                # the server executable inside the cache entry
    cache_key: str
    cache_hit: bool             # True when nothing was compiled by this call
    source: str                 # "git:/repo@<full sha>" or "src:/dir#<hash>"
    variant: Variant
    compiler_version: str
    build_log: Path
    seconds: float              # wall time of this call (a cache hit: the look-up)
    cli: Path | None = None     # redis-cli / valkey-cli when the tree built one
    build_seconds: float = 0.0  # how long the original build took
    make_command: tuple[str, ...] = ()
    built_at: str = ""

    def facts(self) -> dict:
        """Everything to record with each result measured on this binary (JSON-serialisable)."""
        return {
            "source": self.source,
            "cache_key": self.cache_key,
            "cache_hit": self.cache_hit,
            "binary": str(self.binary),
            "variant": self.variant.facts(),
            "compiler_version": self.compiler_version,
            "make_command": list(self.make_command),
            "build_log": str(self.build_log),
            "build_seconds": round(self.build_seconds, 3),
            "built_at": self.built_at,
        }


@dataclass(frozen=True)
class _Plan:
    """What one build needs: the key, where the source comes from, how to compile it."""

    key: str
    source: str
    variant: Variant
    compiler: str
    materialize: Callable[[Path], None]
    timeout_s: float

    @classmethod
    def of(cls, *, label: str, identity: str, source: str, variant: Variant, materialize: Callable[[Path], None],
           timeout_s: float) -> "_Plan":
        """The plan of a build whose source is `identity` (git:SHA, src:DIGEST), keyed by it, the
        variant's settings and the compiler's version."""
        compiler = compiler_version(variant.cc)
        key = _cache_key(label=label, identity=identity, variant=variant, compiler=compiler)
        return cls(key=key, source=source, variant=variant, compiler=compiler, materialize=materialize,
                   timeout_s=timeout_s)


def _cache_key(*, label: str, identity: str, variant: Variant, compiler: str) -> str:
    material = json.dumps({"recipe": RECIPE_VERSION, "source": identity, "variant": variant.settings(),
                           "compiler": compiler}, sort_keys=True)
    digest = hashlib.sha256(material.encode()).hexdigest()[:16]
    return f"{label}-{variant.name}-{digest}"


def build_git(repo: Path, ref: str, variant: Variant, *, progress: Progress | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S, cache: BuildCache | None = None) -> BuildResult:
    """Build commit REF of the local repository REPO (cached by the full commit sha).

    `progress`, when given, is called with each line of make's output (and a few lines of
    redline's own, such as 'redline: cloning …'), as a str without its newline. `cache`
    defaults to BuildCache.default() ($REDLINE_CACHE/builds); make is stopped after timeout_s.
    """
    started = time.monotonic()
    commit = resolve_commit(Path(repo), ref)

    def materialize(destination: Path) -> None:
        _say(progress, f"redline: cloning {commit.repo} at {commit.sha[:12]}")
        checkout_commit(commit, destination)

    plan = _Plan.of(label=f"git-{commit.sha[:12]}", identity=f"git:{commit.sha}", source=commit.source,
                    variant=variant, materialize=materialize, timeout_s=timeout_s)
    return _build(plan, cache=cache or BuildCache.default(), started=started, progress=progress)


def build_source(directory: Path, variant: Variant, *, progress: Progress | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, cache: BuildCache | None = None) -> BuildResult:
    """Build an unpacked source tree (cached by a content hash of its source files; the
    directory itself is only read). Keyword arguments as for build_git."""
    started = time.monotonic()
    cache = cache or BuildCache.default()
    tree: SourceTree = scan_tree(Path(directory), memo_store=cache.root / ".scans")

    def materialize(destination: Path) -> None:
        _say(progress, f"redline: copying {len(tree.files)} files of {tree.directory}")
        copy_tree(tree, destination)

    plan = _Plan.of(label=f"src-{tree.digest[:12]}", identity=f"src:{tree.digest}", source=tree.source,
                    variant=variant, materialize=materialize, timeout_s=timeout_s)
    return _build(plan, cache=cache, started=started, progress=progress)


def _say(progress: Progress | None, line: str) -> None:
    if progress is not None:
        progress(line)


def _build(plan: _Plan, *, cache: BuildCache, started: float, progress: Progress | None) -> BuildResult:
    manifest = cache.lookup(plan.key)
    if manifest is not None:
        return _result(cache, plan, manifest, hit=True, started=started)
    waiting = f"redline: waiting for another build of {plan.key} to finish"
    with cache.locked(plan.key, on_wait=lambda: _say(progress, waiting)):
        manifest = cache.lookup(plan.key)   # someone else built it while we waited
        if manifest is not None:
            return _result(cache, plan, manifest, hit=True, started=started)
        workspace = cache.workspace(plan.key)
        try:
            manifest = _compile(cache, plan, workspace=workspace, progress=progress)
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
    return _result(cache, plan, manifest, hit=False, started=started)


def _server_names(tree: Path) -> tuple[str, str]:
    """(server, cli) make targets: valkey trees build valkey-*, redis trees redis-*."""
    makefile = (tree / "src" / "Makefile").read_text(errors="replace")
    if re.search(r"^\s*ENGINE_NAME\s*[:?]?=\s*valkey", makefile, re.M) or "valkey-server" in makefile:
        return "valkey-server", "valkey-cli"
    return "redis-server", "redis-cli"


def _compile(cache: BuildCache, plan: _Plan, *, workspace: Path, progress: Progress | None) -> dict:
    tree = workspace / "tree"
    staged = workspace / "out"
    staged.mkdir()
    plan.materialize(tree)
    if not (tree / "src" / "Makefile").is_file():
        raise UsageError(f"{plan.source} has no src/Makefile: not a redis or valkey source tree")
    server, cli = _server_names(tree)
    job = MakeJob(tree=tree, targets=(server, cli), variables=tuple(plan.variant.make_variables()),
                  jobs=cpu_count(), log=staged / LOG, timeout_s=plan.timeout_s,
                  ccache_dir=cache.ccache_dir if ccache_available() else None)
    began = time.monotonic()
    try:
        run_make(job, scratch=workspace, progress=progress)
        if not (tree / "src" / server).is_file():
            tail = job.log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
            raise BuildFailed(f"make succeeded but left no src/{server}", log=job.log, tail=tail)
    except BuildFailed as failure:
        kept = cache.keep_failed_log(key=plan.key, log=job.log)
        tail = "\n".join(failure.tail)
        raise BuildFailed(f"build of {plan.source} (variant {plan.variant.name}) failed: {failure}\n"
                          f"--- last {len(failure.tail)} lines of {kept} ---\n{tail}{_hint(kept)}",
                          log=kept, tail=failure.tail) from None
    seconds = time.monotonic() - began
    shutil.copy2(tree / "src" / server, staged / server)
    built_cli = (tree / "src" / cli).is_file()
    if built_cli:
        shutil.copy2(tree / "src" / cli, staged / cli)
    manifest = {
        "key": plan.key,
        "source": plan.source,
        "variant": plan.variant.facts(),
        "compiler_version": plan.compiler,
        "make_command": job.recorded_command(),
        "server": server,
        "cli": cli if built_cli else None,
        "build_seconds": round(seconds, 3),
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "recipe": RECIPE_VERSION,
    }
    (staged / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    cache.publish(key=plan.key, staged=staged)
    return manifest


def _hint(log: Path) -> str:
    """Advice for failures we know."""
    text = log.read_text(errors="replace")
    if "undefined reference to `mallctl'" in text or "undefined reference to `dallocx'" in text:
        return ("\nhint: this tree expects the system jemalloc (Debian's patched redis does): build it with "
                "--variant libc-malloc, or a variant with make_args [USE_SYSTEM_JEMALLOC=yes] "
                "(needs libjemalloc-dev)")
    return ""


def _result(cache: BuildCache, plan: _Plan, manifest: dict, *, hit: bool, started: float) -> BuildResult:
    entry = cache.entry(plan.key)
    return BuildResult(
        binary=entry / manifest["server"],
        cache_key=plan.key,
        cache_hit=hit,
        source=plan.source,
        variant=plan.variant,
        compiler_version=manifest["compiler_version"],
        build_log=entry / LOG,
        seconds=time.monotonic() - started,
        cli=entry / manifest["cli"] if manifest.get("cli") else None,
        build_seconds=float(manifest.get("build_seconds", 0.0)),
        make_command=tuple(manifest.get("make_command", ())),
        built_at=manifest.get("built_at", ""),
    )
