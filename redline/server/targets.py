"""Where a server comes from: a binary redline starts, or an endpoint someone else runs."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from redline.core.errors import UsageError
from redline.suites.owned import owned_server_parameter

SCHEMES = "bin:PATH, git:REPO@REF, src:DIR or tcp://HOST:PORT"


@dataclass(frozen=True)
class Target:
    """A server to measure.

    `binary` is set for targets redline starts and controls (bin:, and git:/src: once built);
    `build` for targets redline must build first (git:, src:); `address` for endpoints it only
    connects to (tcp://), where it can measure neither server CPU nor profiles.
    """

    spec: str
    binary: Path | None = None
    address: tuple[str, int] | None = None
    config: dict[str, str] = field(default_factory=dict)
    build: object | None = None            # redline.builder.BuildTarget
    variant: str | None = None             # build variant name or YAML path
    build_facts: dict | None = None        # how the binary was built (after ensure_built)

    @property
    def managed(self) -> bool:
        return self.address is None

    @property
    def label(self) -> str:
        if not self.config:
            return self.spec
        settings = " ".join(f"{k}={v}" for k, v in sorted(self.config.items()))
        return f"{self.spec} [{settings}]"


def default_target() -> Target:
    found = shutil.which("redis-server")
    if not found:
        raise UsageError("no redis-server on PATH; install it (bash setup.sh) or pass --target bin:PATH")
    return Target(spec=f"bin:{found}", binary=Path(found))


def parse_target(text: str, config: dict[str, str] | None = None, variant: str | None = None) -> Target:
    config = dict(config or {})
    if text.startswith(("git:", "src:")):
        from redline.builder import parse_build_target
        return Target(spec=text, config=config, build=parse_build_target(text), variant=variant)
    if text.startswith("bin:"):
        path = Path(text[len("bin:"):]).expanduser()
        if not path.exists():
            raise UsageError(f"server binary does not exist: {path} (from --target {text})")
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UsageError(f"server binary is not an executable file: {path} (from --target {text})")
        # not resolve(): Debian's redis-server is a symlink to redis-check-rdb and argv[0] picks the role
        return Target(spec=text, binary=path.absolute(), config=config)
    if text.startswith("tcp://"):
        try:
            parts = urlsplit(text)
            host, port = parts.hostname, parts.port
        except ValueError:          # an unclosed [IPv6 bracket, a port out of range
            host = port = None
        if not host or port is None:
            raise UsageError(f"target {text!r} needs a host and a port: tcp://HOST:PORT")
        if config:
            raise UsageError(f"target {text} is someone else's server: redline cannot apply server configuration to it")
        return Target(spec=text, address=(host, port))
    scheme = text.split(":", 1)[0] if ":" in text else text
    raise UsageError(f"unknown target scheme {scheme!r} in {text!r}: expected {SCHEMES}")


def parse_config_pairs(pairs: list[str], flag: str) -> dict[str, str]:
    """NAME=VALUE settings from a repeatable command-line flag."""
    config: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"{flag} expects NAME=VALUE, got {pair!r}")
        owned = owned_server_parameter(name)
        if owned:
            raise UsageError(f"{flag} {name.strip()}: redline sets this parameter itself ({owned})")
        config[name.strip()] = value
    return config


def ensure_built(target: Target, *, progress=None) -> Target:
    """The same target with `binary` set: built (or taken from the build cache) for git:/src:."""
    if target.build is None or target.binary is not None:
        return target
    from redline.builder import DEFAULT_VARIANT, load_variant
    result = target.build.build(load_variant(target.variant or DEFAULT_VARIANT), progress=progress)
    return replace(target, binary=result.binary, build_facts=result.facts())
