"""The fixed seeds of every measured server: redline/server/fixed_seed.c, built once per source
version into the cache, preloaded into every server that runs under callgrind and every timed
server (redline.server.layout).

A Redis-protocol server draws its dictionaries' hash seed from /dev/urandom at startup; the
layout of the command table and of the keyspace follows from it, and so do some costs (a
command that shares its bucket with another pays one more string compare per lookup). Two
servers of the same code thus count differently by chance: 1.8% on GET, measured. With the
seed fixed, every counted server lays out its dictionaries as every other one of the same code.
The server's run_id is drawn from the same bytes, so equal run_ids show that the pin took
(redline.instructions.runner flags a server whose run_id differs)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from redline.core.errors import RunError
from redline.system.cache_dir import cache_root

SOURCE = Path(__file__).with_name("fixed_seed.c")


def fixed_seed_library() -> Path:
    """The shared object to preload, built with the system's C compiler on first use."""
    source = SOURCE.read_bytes()
    library = cache_root() / "tools" / f"fixed-seed-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if library.is_file():
        return library
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RunError("no C compiler to build the fixed hash seed of --measure instructions: run `bash setup.sh`")
    library.parent.mkdir(parents=True, exist_ok=True)
    partial = library.with_name(f"{library.name}.{os.getpid()}.tmp")
    proc = subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(SOURCE), "-ldl"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        said = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise RunError(f"building the fixed hash seed of --measure instructions failed: {said}")
    partial.replace(library)          # atomic: a concurrent run sees the whole file or none
    return library


def preloaded(argv: list[str]) -> list[str]:
    """`argv` (valgrind and the server) with the fixed seed preloaded into the server: valgrind
    passes LD_PRELOAD on to the program it runs."""
    return ["env", f"LD_PRELOAD={fixed_seed_library()}", *argv]
