"""The builder: from `git:PATH@REF` or `src:DIR` to a cached redis-server binary.

    variant = load_variant("default")
    result = build_git(Path("~/redis"), "7.2.4", variant)      # or build_source(Path(dir), variant)
    result.binary, result.cache_hit, result.facts()

`run` and `compare` can show the same progress as `redline build` (redline.output.progress):

    with progress_display(f"building {text}") as progress:
        result = parse_build_target(text).build(variant, progress=progress)

See docs/build.md for targets, variants and the cache layout.
"""

from redline.builder.builder import BuildResult, build_git, build_source
from redline.builder.make import BuildFailed
from redline.builder.targets import BuildTarget, is_build_target, parse_build_target
from redline.builder.variants import DEFAULT_VARIANT, Variant, list_variants, load_variant, load_variant_file

__all__ = ["BuildFailed", "BuildResult", "BuildTarget", "DEFAULT_VARIANT", "Variant", "build_git", "build_source",
           "is_build_target", "list_variants", "load_variant", "load_variant_file", "parse_build_target"]
