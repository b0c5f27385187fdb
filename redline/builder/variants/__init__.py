"""Build variants: how a server is compiled, declared in YAML (redline/builder/variants/<name>.yml)."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from redline.core.errors import UsageError

VARIANTS_DIR = Path(__file__).resolve().parent
DEFAULT_VARIANT = "default"

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MAKE_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
KNOWN_KEYS = {"description", "cc", "cflags", "ldflags", "malloc", "build_tls", "make_args"}
REQUIRED_KEYS = {"cc"}


@dataclass(frozen=True)
class Variant:
    """One way to compile a server: each field becomes a make variable (see make_variables())."""

    name: str
    cc: str
    cflags: str
    ldflags: str
    malloc: str | None
    build_tls: bool
    make_args: tuple[str, ...]
    description: str = ""

    def make_variables(self) -> list[str]:
        """The NAME=VALUE arguments for make, in a fixed order (empty settings are left out so
        the project's own defaults stay)."""
        args = [f"CC={self.cc}"]
        if self.cflags:
            args.append(f"CFLAGS={self.cflags}")
        if self.ldflags:
            args.append(f"LDFLAGS={self.ldflags}")
        if self.malloc:
            args.append(f"MALLOC={self.malloc}")
        if self.build_tls:
            args.append("BUILD_TLS=yes")
        args.extend(self.make_args)
        return args

    def settings(self) -> dict:
        """Everything that changes the binary (the name and description do not)."""
        return {"cc": self.cc, "cflags": self.cflags, "ldflags": self.ldflags, "malloc": self.malloc,
                "build_tls": self.build_tls, "make_args": list(self.make_args)}

    def fingerprint(self) -> str:
        """A short hash of the settings: two variants with the same settings build the same binary."""
        text = json.dumps(self.settings(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def facts(self) -> dict:
        return {"name": self.name, "fingerprint": self.fingerprint(), **self.settings()}


def list_variants() -> list[str]:
    """Names of the variants shipped with redline."""
    return sorted(path.stem for path in VARIANTS_DIR.glob("*.yml"))


def load_variant(name: str) -> Variant:
    """A shipped variant by name, or a variant file by path (a name ending in .yml/.yaml or
    containing a slash)."""
    if name.endswith((".yml", ".yaml")) or "/" in name:
        return load_variant_file(Path(name).expanduser())
    if not NAME.match(name):
        raise UsageError(f"bad variant name {name!r}: use letters, digits, '.', '_' and '-'")
    path = VARIANTS_DIR / f"{name}.yml"
    if not path.is_file():
        known = ", ".join(list_variants()) or "none"
        raise UsageError(f"unknown build variant {name!r}: known variants are {known} "
                         f"(or pass the path of a variant YAML file)")
    return load_variant_file(path)


def load_variant_file(path: Path) -> Variant:
    """A variant from a YAML file; its name is the file's stem."""
    if not path.is_file():
        raise UsageError(f"variant file does not exist: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from None
    return variant_from_mapping(name=path.stem, data=data, where=str(path))


def variant_from_mapping(*, name: str, data, where: str) -> Variant:
    """Validate a parsed variant document; every error names `where` and the key."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a variant is a mapping of keys ({', '.join(sorted(KNOWN_KEYS))})")
    if not NAME.match(name):
        raise UsageError(f"{where}: bad variant name {name!r}: use letters, digits, '.', '_' and '-'")
    unknown = sorted(set(map(str, data)) - KNOWN_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(KNOWN_KEYS))}")
    missing = sorted(REQUIRED_KEYS - set(data))
    if missing:
        raise UsageError(f"{where}: missing key(s) {', '.join(missing)}")

    def text(key: str, *, optional: bool = False) -> str | None:
        value = data.get(key)
        if value is None:
            return None if optional else ""
        if not isinstance(value, str):
            raise UsageError(f"{where}: {key} must be a string, got {value!r}")
        return value.strip()

    cc = text("cc")
    if not cc or any(ch.isspace() for ch in cc):
        raise UsageError(f"{where}: cc must be one compiler name or path (no arguments), got {data.get('cc')!r}")
    malloc = text("malloc", optional=True) or None
    if malloc is not None and not re.match(r"^[A-Za-z0-9_]+$", malloc):
        raise UsageError(f"{where}: malloc must be an allocator name such as libc or jemalloc, got {malloc!r}")
    build_tls = data.get("build_tls", False)
    if not isinstance(build_tls, bool):
        raise UsageError(f"{where}: build_tls must be true or false, got {build_tls!r}")
    make_args = data.get("make_args") or []
    if not isinstance(make_args, list) or not all(isinstance(arg, str) for arg in make_args):
        raise UsageError(f"{where}: make_args must be a list of NAME=VALUE strings")
    for arg in make_args:
        if not MAKE_ASSIGNMENT.match(arg):
            raise UsageError(f"{where}: make_args entry {arg!r} is not a NAME=VALUE make variable")
    return Variant(name=name, cc=cc, cflags=text("cflags"), ldflags=text("ldflags"), malloc=malloc,
                   build_tls=build_tls, make_args=tuple(make_args), description=text("description"))
