#!/usr/bin/env bash
# Prints the directory of an unpacked Redis source tree (Debian 12's `redis` source package,
# Debian's patches applied), fetching it on the first run only.
#
#   - adds deb-src lines for bookworm (a separate file in /etc/apt/sources.list.d/) if apt has
#     no source index for redis yet, and runs `apt-get update` then;
#   - runs `apt-get source redis` into ${REDLINE_REDIS_SRC:-~/.cache/redline/redis-src} if that
#     directory holds no unpacked tree yet;
#   - prints the unpacked tree's path (the only line on stdout; progress goes to stderr).
#
# Idempotent: a second run touches nothing and prints the same path. Needs root for the apt
# steps (the first run only) and dpkg-dev (for dpkg-source).
set -euo pipefail

DEST=${REDLINE_REDIS_SRC:-"$HOME/.cache/redline/redis-src"}
SOURCES_FILE=/etc/apt/sources.list.d/redline-deb-src.sources
say() { printf 'redis_source: %s\n' "$*" >&2; }

find_tree() {
    # An unpacked tree is a redis-<version>/ directory with src/server.c in it.
    local d
    for d in "$DEST"/redis-*/; do
        [[ -f "$d/src/server.c" ]] && { printf '%s\n' "${d%/}"; return 0; }
    done
    return 1
}

if tree=$(find_tree); then
    printf '%s\n' "$tree"
    exit 0
fi

if ! command -v dpkg-source >/dev/null 2>&1; then
    say "installing dpkg-dev (for dpkg-source)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dpkg-dev >/dev/null
fi

if ! apt-cache showsrc redis 2>/dev/null | grep -q '^Package: redis$'; then
    if [[ ! -f "$SOURCES_FILE" ]]; then
        say "adding deb-src lines for bookworm in $SOURCES_FILE"
        cat > "$SOURCES_FILE" <<'EOF'
# Added by redline's scripts/redis_source.sh: source packages for `apt-get source redis`.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    say "apt-get update"
    apt-get update -qq >&2
fi

mkdir -p "$DEST"
work=$(mktemp -d "$DEST/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
say "apt-get source redis into $DEST"
(cd "$work" && apt-get source -qq redis >&2)
# Move the unpacked tree (and the .dsc/.tar files next to it) into place.
unpacked=""
for d in "$work"/redis-*/; do
    [[ -f "$d/src/server.c" ]] && { unpacked=${d%/}; break; }
done
if [[ -z "$unpacked" ]]; then
    say "error: apt-get source redis left no redis-*/src/server.c under $work"
    exit 1
fi
name=$(basename "$unpacked")
if [[ ! -e "$DEST/$name" ]]; then
    mv "$unpacked" "$DEST/$name"
fi
find "$work" -maxdepth 1 -type f -exec mv -f {} "$DEST/" \;
printf '%s\n' "$DEST/$name"
