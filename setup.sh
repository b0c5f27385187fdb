#!/usr/bin/env bash
# Sets up everything redline needs on Debian 12, as root. Idempotent: a second run only
# checks and returns (apt, pip and cargo steps are skipped when nothing changed).
set -euo pipefail
cd "$(dirname "$0")"
say() { printf '\033[1msetup:\033[0m %s\n' "$*" >&2; }

# Debian packages: the servers redline measures, perf, build tools, Python.
APT_PACKAGES=(redis-server redis-tools linux-perf build-essential pkg-config git ccache
              python3 python3-venv util-linux procps ca-certificates openssl
              chromium    # chromium: tests render flame graphs headless and look at them
              valgrind)   # valgrind: --measure instructions runs the server under callgrind
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Rust toolchain: rustup's if present, else Debian's rustc-web/cargo-web (1.7x+; Debian's
# plain 'cargo' package is too old for current crates).
CARGO=""
for c in cargo "$HOME/.cargo/bin/cargo"; do
    if command -v "$c" >/dev/null 2>&1; then CARGO=$(command -v "$c"); break; fi
done
if [[ -z "$CARGO" ]]; then
    say "installing Debian's rustc-web and cargo-web"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends rustc-web cargo-web >/dev/null
    CARGO=$(command -v cargo)
fi

# The load generator. Its build directory is shared by every clone on this machine (compiled
# dependencies are reused; cargo's lock serialises concurrent builds); the binary is copied into
# this clone's bin/, so clones never see each other's builds.
export CARGO_TARGET_DIR="${REDLINE_CACHE:-$HOME/.cache/redline}/cargo-target"
say "building redline-load (cargo build --release)"
"$CARGO" build --release --locked --quiet --manifest-path loadgen/Cargo.toml
mkdir -p bin
if ! cmp -s "$CARGO_TARGET_DIR/release/redline-load" bin/redline-load; then
    rm -f bin/redline-load
    install -m 755 "$CARGO_TARGET_DIR/release/redline-load" bin/redline-load
fi

# Flame graphs: inferno's command-line tools from crates.io, built once per machine into
# redline's cache and linked as .tools (a fresh clone reuses them).
TOOLS_CACHE="${REDLINE_CACHE:-$HOME/.cache/redline}/tools"
if [[ ! -x .tools/bin/inferno-flamegraph || ! -x .tools/bin/inferno-diff-folded ]]; then
    if [[ ! -x "$TOOLS_CACHE/bin/inferno-flamegraph" || ! -x "$TOOLS_CACHE/bin/inferno-diff-folded" ]]; then
        say "installing inferno (flame graphs) into $TOOLS_CACHE"
        "$CARGO" install inferno --locked --version 0.12.8 --quiet --root "$TOOLS_CACHE"
    fi
    rm -rf .tools
    ln -s "$TOOLS_CACHE" .tools
fi

# Python environment: Debian's python3 in a venv; reinstalled only when pyproject.toml changes.
if [[ ! -x .venv/bin/python ]]; then
    say "creating .venv"
    /usr/bin/python3 -m venv .venv
fi
stamp=.venv/.redline-deps
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    say "installing Python dependencies"
    .venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
    echo "$want" > "$stamp"
fi
# Debian's redis source package (the builder's tests build it): deb-src lines and `apt-get source`
# once; later runs only print where it is.
say "redis source tree: $(bash scripts/redis_source.sh)"
say "ready"
