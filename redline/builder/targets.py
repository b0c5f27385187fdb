"""Build targets as text: `git:PATH@REF` and `src:DIR`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from redline.builder.builder import BuildResult, build_git, build_source
from redline.builder.make import Progress
from redline.builder.variants import Variant
from redline.core.errors import UsageError

BUILD_SCHEMES = "git:PATH@REF or src:DIR"


@dataclass(frozen=True)
class BuildTarget:
    kind: str              # "git" or "src"
    path: Path
    ref: str | None = None

    def build(self, variant: Variant, *, progress: Progress | None = None) -> BuildResult:
        if self.kind == "git":
            return build_git(self.path, self.ref or "HEAD", variant, progress=progress)
        return build_source(self.path, variant, progress=progress)


def is_build_target(text: str) -> bool:
    return text.startswith(("git:", "src:"))


def parse_build_target(text: str) -> BuildTarget:
    """`git:PATH@REF` (REF defaults to HEAD; the last '@' separates it) or `src:DIR`."""
    if text.startswith("git:"):
        body = text[len("git:"):]
        path, sep, ref = body.rpartition("@")
        if not sep:
            path, ref = body, "HEAD"
        if not path:
            raise UsageError(f"target {text!r} needs a repository path: git:PATH@REF")
        if not ref:
            raise UsageError(f"target {text!r} has an empty ref after '@': git:PATH@REF")
        return BuildTarget(kind="git", path=Path(path).expanduser(), ref=ref)
    if text.startswith("src:"):
        path = text[len("src:"):]
        if not path:
            raise UsageError(f"target {text!r} needs a directory: src:DIR")
        return BuildTarget(kind="src", path=Path(path).expanduser())
    scheme = text.split(":", 1)[0] if ":" in text else text
    raise UsageError(f"cannot build target {text!r} (scheme {scheme!r}): expected {BUILD_SCHEMES}")
