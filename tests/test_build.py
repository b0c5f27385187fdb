"""The builder on a real Redis source tree (Debian's source package, from scripts/redis_source.sh).

Real builds are expensive (minutes on 2 cores), so each is done once per session and shared:
  - src: the tree with the shipped `libc-malloc` variant, built by two processes at once
    (one compiles, the other waits on the lock and gets the cache hit);
  - git: the two commits of a fixture repository (scripts/make_redis_fixture_repo.sh), with
    a fast test variant (-O0, libc malloc).
Debian's tree cannot link the bundled jemalloc (its patch renames jemalloc's symbols for the
system library), hence libc malloc here; see docs/build.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from redline.builder import (BuildFailed, Variant, build_git, build_source, list_variants, load_variant,
                           load_variant_file, parse_build_target)
from redline.builder.cache import BuildCache
from redline.builder.sources import scan_tree
from redline.core.errors import UsageError
from redline.server.process import ManagedServer, ServerSettings

REPO = Path(__file__).resolve().parent.parent
REDIS_SOURCE = REPO / "scripts" / "redis_source.sh"
FIXTURE_REPO = REPO / "scripts" / "make_redis_fixture_repo.sh"
BUILD_TIMEOUT_S = 1500

# A fast variant for the git builds: what is tested there is the git plumbing, not the code.
QUICK_VARIANT = {"description": "tests: fast build", "cc": "cc", "cflags": "-g -fno-omit-frame-pointer",
                 "malloc": "libc", "make_args": ["OPTIMIZATION=-O0"]}


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def redis_tree() -> Path:
    """Debian's redis source tree (fetched by scripts/redis_source.sh on first use)."""
    proc = subprocess.run(["bash", str(REDIS_SOURCE)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"scripts/redis_source.sh failed:\n{proc.stderr[-3000:]}"
    tree = Path(proc.stdout.strip().splitlines()[-1])
    assert (tree / "src" / "server.c").is_file(), tree
    return tree


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """A cache of this session's own: every build here really compiles once."""
    return tmp_path_factory.mktemp("redline-cache")


@pytest.fixture(scope="session")
def build_cache(cache_dir) -> BuildCache:
    return BuildCache(root=cache_dir / "builds")


def _cli_env(cache_dir: Path) -> dict[str, str]:
    return {**os.environ, "REDLINE_CACHE": str(cache_dir), "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="session")
def concurrent_src_builds(redis_tree, cache_dir):
    """Two `redline build src:TREE --variant libc-malloc --json` processes started together."""
    command = [sys.executable, "-m", "redline.cli", "build", f"src:{redis_tree}", "--variant", "libc-malloc", "--json"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_cli_env(cache_dir), cwd=cache_dir) for _ in range(2)]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=BUILD_TIMEOUT_S)
            assert proc.returncode == 0, f"build failed ({proc.returncode}):\n{err[-4000:]}"
            outputs.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs


@pytest.fixture(scope="session")
def fixture_repo(redis_tree, tmp_path_factory):
    """A git repository made from the tree: tags `baseline` and `patched` (GET does more work)."""
    dest = tmp_path_factory.mktemp("fixture") / "redis"
    proc = subprocess.run(["bash", str(FIXTURE_REPO), str(redis_tree), str(dest)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    baseline, patched = proc.stdout.split()
    return dest, baseline, patched


@pytest.fixture(scope="session")
def quick_variant_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("variants") / "quick-test.yml"
    path.write_text(yaml.safe_dump(QUICK_VARIANT))
    return path


@pytest.fixture(scope="session")
def quick_variant(quick_variant_file) -> Variant:
    return load_variant_file(quick_variant_file)


@pytest.fixture(scope="session")
def git_builds(fixture_repo, quick_variant, build_cache):
    repo, baseline, patched = fixture_repo
    results = {}
    for tag in ("baseline", "patched"):
        lines: list[str] = []
        result = build_git(repo, tag, quick_variant, progress=lines.append, cache=build_cache,
                           timeout_s=BUILD_TIMEOUT_S)
        results[tag] = (result, lines)
    return results


def _processes_working_in(directory: Path) -> list[int]:
    """Processes whose current directory is under `directory` (make and its compilers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "cwd").startswith(str(directory)):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def _info_server(binary: Path) -> dict:
    server = ManagedServer(ServerSettings(binary=binary)).start()
    try:
        client = server.client()
        assert client.ping() is True
        return client.info("server")
    finally:
        server.stop()


def _tree_version(tree: Path) -> str:
    match = re.search(r'#define REDIS_VERSION "([^"]+)"', (tree / "src" / "version.h").read_text())
    assert match
    return match.group(1)


# -- variants and targets (no build) ---------------------------------------------------------
def test_shipped_variants():
    names = list_variants()
    assert {"default", "libc-malloc", "O3-lto", "debug-O0"} <= set(names)
    default = load_variant("default")
    # The project's own -O level stays: nothing sets OPTIMIZATION; frame pointers are added.
    assert not any(arg.startswith("OPTIMIZATION=") for arg in default.make_variables())
    assert "CFLAGS=-g -fno-omit-frame-pointer" in default.make_variables()
    assert load_variant("libc-malloc").malloc == "libc"
    assert "OPTIMIZATION=-O3" in load_variant("O3-lto").make_args
    fingerprints = {load_variant(name).fingerprint() for name in names}
    assert len(fingerprints) == len(names)


def test_fingerprint_follows_settings_not_name():
    a = Variant(name="a", cc="cc", cflags="-g", ldflags="", malloc=None, build_tls=False, make_args=())
    b = Variant(name="b", cc="cc", cflags="-g", ldflags="", malloc=None, build_tls=False, make_args=())
    c = Variant(name="a", cc="cc", cflags="-g", ldflags="", malloc="libc", build_tls=False, make_args=())
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(UsageError, match=r"unknown build variant 'nope': known variants are .*default"):
        load_variant("nope")


@pytest.mark.parametrize("document, message", [
    ({"cc": "cc", "cflgs": "-O1"}, r"unknown key\(s\) cflgs"),
    ({"cflags": "-O1"}, r"missing key\(s\) cc"),
    ({"cc": "gcc -m32"}, "cc must be one compiler name"),
    ({"cc": "cc", "build_tls": "yes"}, "build_tls must be true or false"),
    ({"cc": "cc", "make_args": ["-j8"]}, "'-j8' is not a NAME=VALUE make variable"),
    ({"cc": "cc", "make_args": "OPTIMIZATION=-O1"}, "make_args must be a list"),
])
def test_bad_variant_files_name_the_file_and_key(tmp_path, document, message):
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(UsageError, match=message) as caught:
        load_variant(str(path))
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("text, kind, path, ref", [
    ("git:/src/redis@7.2.4", "git", "/src/redis", "7.2.4"),
    ("git:/src/redis", "git", "/src/redis", "HEAD"),
    ("git:/a@b/redis@HEAD~2", "git", "/a@b/redis", "HEAD~2"),
    ("src:/tmp/redis-7.0.15", "src", "/tmp/redis-7.0.15", None),
])
def test_parse_build_targets(text, kind, path, ref):
    target = parse_build_target(text)
    assert (target.kind, str(target.path), target.ref) == (kind, path, ref)


@pytest.mark.parametrize("text, message", [
    ("bin:/usr/bin/redis-server", "cannot build target .* expected git:PATH@REF or src:DIR"),
    ("git:@main", "needs a repository path"),
    ("git:/repo@", "empty ref"),
    ("src:", "needs a directory"),
])
def test_bad_build_targets(text, message):
    with pytest.raises(UsageError, match=message):
        parse_build_target(text)


def test_git_errors_name_the_repository_and_ref(tmp_path, quick_variant, build_cache):
    with pytest.raises(UsageError, match="is not a git repository"):
        build_git(tmp_path, "HEAD", quick_variant, cache=build_cache)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with pytest.raises(UsageError, match=f"git ref 'no-such-branch' does not name a commit in {tmp_path}"):
        build_git(tmp_path, "no-such-branch", quick_variant, cache=build_cache)
    with pytest.raises(UsageError, match="bad git ref '--upload-pack=x'"):
        build_git(tmp_path, "--upload-pack=x", quick_variant, cache=build_cache)


def test_source_dir_must_be_a_source_tree(tmp_path, quick_variant, build_cache):
    with pytest.raises(UsageError, match="does not look like a redis or valkey source tree"):
        build_source(tmp_path, quick_variant, cache=build_cache)
    with pytest.raises(UsageError, match="source directory does not exist"):
        build_source(tmp_path / "missing", quick_variant, cache=build_cache)


def test_missing_compiler_is_a_clear_error(redis_tree, tmp_path, build_cache):
    path = tmp_path / "nocc.yml"
    path.write_text(yaml.safe_dump({"cc": "no-such-compiler-redline"}))
    with pytest.raises(UsageError, match="compiler 'no-such-compiler-redline' not found on PATH"):
        build_source(redis_tree, load_variant_file(path), cache=build_cache)


def test_cli_lists_variants(cache_dir):
    proc = subprocess.run([sys.executable, "-m", "redline.cli", "build", "--list-variants"], capture_output=True,
                          text=True, env=_cli_env(cache_dir), timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines()]
    assert listed == list_variants()


# -- source trees ----------------------------------------------------------------------------
def test_source_hash_follows_content_and_ignores_build_outputs(tmp_path):
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "Makefile").write_text("all:\n")
    (tree / "src" / "server.c").write_text("int main(void) { return 0; }\n")
    first = scan_tree(tree)
    (tree / "src" / "server.o").write_bytes(b"\x7fELF object")
    (tree / "src" / "redis-server").write_bytes(b"\x7fELF binary")
    (tree / "src" / ".make-settings").write_text("OPT=-O2\n")
    assert scan_tree(tree).digest == first.digest
    assert scan_tree(tree).files == ("src/Makefile", "src/server.c")
    (tree / "src" / "server.c").write_text("int main(void) { return 1; }\n")
    assert scan_tree(tree).digest != first.digest
    (tree / "src" / "server.c").write_text("int main(void) { return 0; }\n")
    (tree / "src" / "server.c").chmod(0o755)
    assert scan_tree(tree).digest != first.digest, "the exec bit is part of the content"


def test_remembered_digests_never_hide_an_edit(tmp_path, monkeypatch):
    from redline.builder import memo

    monkeypatch.setattr(memo, "RACY_S", -1.0)    # remember even files written a moment ago
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "Makefile").write_text("all:\n")
    source = tree / "src" / "t_string.c"
    source.write_text("int get(void) { return 1; }\n")
    store = tmp_path / "scans"
    first = scan_tree(tree, memo_store=store)
    assert list(store.iterdir()), "digests were remembered"
    assert scan_tree(tree, memo_store=store).digest == first.digest == scan_tree(tree).digest
    # Same size, and the old mtime put back: ctime and inode still tell.
    before = source.stat()
    source.write_text("int get(void) { return 2; }\n")
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    edited = scan_tree(tree, memo_store=store)
    assert edited.digest != first.digest
    assert edited.digest == scan_tree(tree).digest


def test_failed_build_reports_the_log_tail(redis_tree, tmp_path, build_cache):
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump({"cc": "cc", "cflags": "-fredline-no-such-option", "malloc": "libc"}))
    with pytest.raises(BuildFailed) as caught:
        build_source(redis_tree, load_variant_file(path), cache=build_cache, timeout_s=BUILD_TIMEOUT_S)
    failure = caught.value
    message = str(failure)
    assert "variant broken" in message and "make exited with status" in message
    assert failure.log.is_file() and str(failure.log) in message
    assert failure.log.parent == build_cache.root / "failed"
    assert 0 < len(failure.tail) <= 20
    assert "fredline-no-such-option" in message, message[-2000:]
    # Nothing half-built is left: no entry for the key, no workspace.
    assert not list(build_cache.root.glob(f"{failure.log.stem}/*"))
    assert not list((build_cache.root / ".tmp").iterdir())


def test_a_build_past_its_timeout_is_stopped_with_its_compilers(redis_tree, quick_variant, tmp_path, monkeypatch):
    cache = BuildCache(root=tmp_path / "builds")
    # an object cache of its own, empty: a tree compiled from the session's shared ccache can take
    # less than the 3 s bound, one that really compiles takes far longer
    monkeypatch.setenv("REDLINE_CCACHE_DIR", str(tmp_path / "ccache"))
    started = time.monotonic()
    with pytest.raises(BuildFailed, match=r"make ran longer than 3s and was stopped") as caught:
        build_source(redis_tree, quick_variant, cache=cache, timeout_s=3)
    assert time.monotonic() - started < 60
    assert "last" in str(caught.value) and caught.value.log.is_file()
    # No make or compiler of that build is left running, and no workspace.
    assert _processes_working_in(cache.root / ".tmp") == []
    assert not list((cache.root / ".tmp").iterdir())
    assert not list(cache.root.glob("src-*"))


def test_ccache_wraps_the_compiler_only_in_the_command_run(tmp_path, monkeypatch):
    from redline.builder.make import MakeJob

    monkeypatch.setenv("CCACHE_DIR", "/somewhere/else")      # the user's own ccache settings do not leak in
    job = MakeJob(tree=tmp_path / "tree", targets=("redis-server",), variables=("CC=cc", "MALLOC=libc"), jobs=2,
                  log=tmp_path / "log", timeout_s=10, ccache_dir=tmp_path / "ccache")
    assert job.command()[-2:] == ["CC=ccache cc", "MALLOC=libc"]
    assert job.recorded_command()[-2:] == ["CC=cc", "MALLOC=libc"]
    env = job.environment(tmp_path)
    assert (env["CCACHE_DIR"], env["CCACHE_BASEDIR"]) == (str(tmp_path / "ccache"), str(tmp_path / "tree"))
    plain = MakeJob(tree=tmp_path / "tree", targets=("redis-server",), variables=("CC=cc",), jobs=2,
                    log=tmp_path / "log", timeout_s=10)
    assert plain.command()[-1] == "CC=cc" and "CCACHE_DIR" not in plain.environment(tmp_path)


def test_the_object_cache_is_under_builds_unless_redline_ccache_dir_names_one(tmp_path, monkeypatch):
    monkeypatch.delenv("REDLINE_CCACHE_DIR", raising=False)
    assert BuildCache(root=tmp_path / "builds").ccache_dir == tmp_path / "builds" / ".ccache"
    monkeypatch.setenv("REDLINE_CCACHE_DIR", str(tmp_path / "shared"))
    assert BuildCache(root=tmp_path / "builds").ccache_dir == BuildCache(root=tmp_path / "x").ccache_dir \
        == tmp_path / "shared"


def test_valkey_trees_build_valkey_binaries(tmp_path):
    from redline.builder.builder import _server_names

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "Makefile").write_text("ENGINE_NAME=valkey\nSERVER_NAME=$(ENGINE_NAME)-server\n")
    assert _server_names(tmp_path) == ("valkey-server", "valkey-cli")
    (tmp_path / "src" / "Makefile").write_text("REDIS_SERVER_NAME=redis-server$(PROG_SUFFIX)\n")
    assert _server_names(tmp_path) == ("redis-server", "redis-cli")


def test_concurrent_builds_of_one_key_build_once(concurrent_src_builds):
    first, second = concurrent_src_builds
    assert first["cache_key"] == second["cache_key"]
    assert first["binary"] == second["binary"]
    assert sorted([first["cache_hit"], second["cache_hit"]]) == [False, True]
    built = first if not first["cache_hit"] else second
    assert built["build_seconds"] > 1


def test_src_build_runs_and_reports_its_version(concurrent_src_builds, redis_tree):
    facts = concurrent_src_builds[0]
    binary = Path(facts["binary"])
    assert binary.name == "redis-server" and os.access(binary, os.X_OK)
    assert (binary.parent / "redis-cli").is_file()
    info = _info_server(binary)
    assert info["redis_version"] == _tree_version(redis_tree)
    assert Path(info["executable"]).resolve() == binary.resolve()
    # The recorded facts say how it was built.
    assert facts["source"].startswith(f"src:{redis_tree}#")
    assert facts["variant"]["name"] == "libc-malloc" and facts["variant"]["malloc"] == "libc"
    assert "MALLOC=libc" in facts["make_command"] and "CFLAGS=-g -fno-omit-frame-pointer" in facts["make_command"]
    version = subprocess.run(["cc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert facts["compiler_version"].startswith(version + " [/")
    log = Path(facts["build_log"]).read_text()
    assert "LINK" in log and "redis-server" in log
    manifest = json.loads((binary.parent / "build.json").read_text())
    assert manifest["source"] == facts["source"]


def test_second_build_is_a_fast_cache_hit(concurrent_src_builds, redis_tree, build_cache):
    started = time.monotonic()
    result = build_source(redis_tree, load_variant("libc-malloc"), cache=build_cache)
    elapsed = time.monotonic() - started
    assert result.cache_hit and str(result.binary) == concurrent_src_builds[0]["binary"]
    assert elapsed < 1.0, f"cache hit took {elapsed:.2f}s"
    assert result.facts()["cache_hit"] is True


def test_the_users_tree_stays_clean(concurrent_src_builds, redis_tree):
    leftovers = [p for p in redis_tree.rglob("*") if p.suffix in {".o", ".a"} or p.name.startswith(".make-")]
    assert leftovers == []
    assert not (redis_tree / "src" / "redis-server").exists()


# -- git -------------------------------------------------------------------------------------
def test_each_commit_builds_and_reports_its_sha(git_builds, fixture_repo):
    repo, baseline_sha, patched_sha = fixture_repo
    (baseline, baseline_lines), (patched, patched_lines) = git_builds["baseline"], git_builds["patched"]
    assert baseline.source == f"git:{repo.resolve()}@{baseline_sha}"
    assert patched.source == f"git:{repo.resolve()}@{patched_sha}"
    assert baseline.cache_key != patched.cache_key
    assert not baseline.cache_hit and not patched.cache_hit
    for result, sha in ((baseline, baseline_sha), (patched, patched_sha)):
        info = _info_server(result.binary)
        assert info["redis_git_sha1"] == sha[:8]
        assert str(info["redis_git_dirty"]) == "0"
    # progress got make's lines as they came
    assert any("redis-server" in line for line in baseline_lines)
    assert any(line.startswith("redline: cloning") for line in patched_lines)


def test_git_build_leaves_the_repository_alone(git_builds, fixture_repo):
    repo, baseline_sha, patched_sha = fixture_repo
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--ignored"], capture_output=True,
                            text=True, check=True).stdout
    assert status == ""
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert head == patched_sha
    worktrees = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True,
                               check=True).stdout.strip().splitlines()
    assert len(worktrees) == 1


def test_any_name_of_a_commit_hits_the_same_entry(git_builds, fixture_repo, quick_variant, build_cache):
    repo, baseline_sha, _ = fixture_repo
    baseline = git_builds["baseline"][0]
    for ref in (baseline_sha, baseline_sha[:10], "patched~1"):
        started = time.monotonic()
        again = build_git(repo, ref, quick_variant, cache=build_cache)
        assert time.monotonic() - started < 1.0
        assert again.cache_hit and again.cache_key == baseline.cache_key and again.binary == baseline.binary


@pytest.mark.slow
def test_debian_tree_with_bundled_jemalloc_fails_with_a_hint(redis_tree, build_cache):
    """Debian's patch makes the tree link only with the system jemalloc (see docs/build.md)."""
    with pytest.raises(BuildFailed, match="hint: this tree expects the system jemalloc"):
        build_source(redis_tree, load_variant("default"), cache=build_cache, timeout_s=BUILD_TIMEOUT_S)


def test_a_build_waits_for_the_lock_holder_then_hits(git_builds, fixture_repo, quick_variant, tmp_path):
    import shutil
    import threading

    repo, _, _ = fixture_repo
    built = git_builds["baseline"][0]
    cache = BuildCache(root=tmp_path / "builds")
    holding, release = threading.Event(), threading.Event()

    def other_builder():
        with cache.locked(built.cache_key):
            holding.set()
            release.wait(30)
            shutil.copytree(built.binary.parent, cache.root / ".tmp" / "done")
            cache.publish(key=built.cache_key, staged=cache.root / ".tmp" / "done")

    thread = threading.Thread(target=other_builder)
    thread.start()
    try:
        assert holding.wait(30)
        lines: list[str] = []
        threading.Timer(1.0, release.set).start()
        result = build_git(repo, "baseline", quick_variant, cache=cache, progress=lines.append)
    finally:
        release.set()
        thread.join(30)
    assert result.cache_hit and result.binary == cache.entry(built.cache_key) / "redis-server"
    assert lines == [f"redline: waiting for another build of {built.cache_key} to finish"]
    assert result.seconds >= 0.9


# -- from commits to a verdict ----------------------------------------------------------------
def test_compare_of_two_commits_flags_the_patched_command_and_not_the_other(
        git_builds, fixture_repo, quick_variant_file, cache_dir, tmp_path):
    """Issue 7's end-to-end check: `patched` adds work to GET's code path only."""
    repo, _, _ = fixture_repo
    out = tmp_path / "cmp.json"
    proc = subprocess.run(
        [sys.executable, "-m", "redline.cli", "compare", "quick", "--name", "string-(get|set)-100B-pipeline-10$",
         "--baseline", f"git:{repo}@baseline", "--comparison", f"git:{repo}@patched",
         "--variant", str(quick_variant_file), "--runs", "7", "--max-runs", "11", "--duration", "1s",
         "--warmup", "0.5s", "--json", str(out), "--store", str(tmp_path / "r.db")],
        capture_output=True, text=True, timeout=900, env=_cli_env(cache_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "cache hit" in proc.stderr          # the builds made above are reused, not redone
    verdicts = {("get" if "-get-" in c["test"] else "set", c["metric"]): c
                for c in json.loads(out.read_text())["comparisons"]}
    assert verdicts[("get", "server_cpu_us_per_op")]["verdict"] == "regression", verdicts[("get", "server_cpu_us_per_op")]
    # SET's code is untouched: no regression of its own — or, on a loaded machine where 1 s windows
    # resolve a few percent (a code-layout move, a neighbour), one of a few percent, not GET's
    get, set_ = verdicts[("get", "server_cpu_us_per_op")], verdicts[("set", "server_cpu_us_per_op")]
    assert set_["verdict"] != "regression" or set_["delta_pct"] < 5.0, (get, set_)
    facts = json.loads(__import__("sqlite3").connect(tmp_path / "r.db").execute(
        "SELECT facts FROM runs WHERE side='comparison' LIMIT 1").fetchone()[0])
    assert facts["build"]["source"].startswith(f"git:{repo}@") and facts["build"]["variant"]
