#!/usr/bin/env bash
# make_redis_fixture_repo.sh SOURCE_TREE DEST_REPO [SPIN]
#
# Makes a local git repository from an unpacked redis source tree (e.g. the one
# scripts/redis_source.sh prints), with two commits:
#   tag `baseline`: the tree as it is;
#   tag `patched`:  the same plus SPIN iterations (default 2000) of busy work at the start of
#                   getGenericCommand() in src/t_string.c: GET (and GETEX/GETDEL's shared path)
#                   gets measurably slower, SET and every other command do not.
# Commit dates and authors are fixed, so the same tree always gives the same two shas.
# Prints the two full shas, one per line (baseline first). DEST_REPO must not exist yet.
set -euo pipefail

if (($# < 2 || $# > 3)); then
    echo "usage: $0 SOURCE_TREE DEST_REPO [SPIN]" >&2
    exit 2
fi
SRC=$1
DEST=$2
SPIN=${3:-2000}
if [[ ! -f "$SRC/src/t_string.c" ]]; then
    echo "error: $SRC is not a redis source tree (no src/t_string.c)" >&2
    exit 2
fi
if [[ ! "$SPIN" =~ ^[0-9]+$ ]]; then
    echo "error: SPIN must be a whole number, got '$SPIN'" >&2
    exit 2
fi
if [[ -e "$DEST" ]]; then
    echo "error: $DEST already exists" >&2
    exit 2
fi

mkdir -p "$DEST"
cp -a "$SRC/." "$DEST/"
rm -rf "$DEST/.git"

export GIT_AUTHOR_NAME=redline GIT_AUTHOR_EMAIL=redline@localhost
export GIT_COMMITTER_NAME=redline GIT_COMMITTER_EMAIL=redline@localhost
export GIT_AUTHOR_DATE="2024-01-01T00:00:00Z" GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
git_() { git -C "$DEST" -c init.defaultBranch=main -c core.autocrlf=false -c commit.gpgsign=false "$@"; }

git_ init --quiet
# Keep every file of the tree (the source package's own .gitignore must not drop any).
git_ add --force --all
git_ commit --quiet --no-verify -m "baseline: $(basename "$SRC")"
git_ tag baseline

# The patch: a block of busy work as the first statement of getGenericCommand().
target="$DEST/src/t_string.c"
awk -v spin="$SPIN" '
    { print }
    /^int getGenericCommand\(client \*c\) \{$/ && !done {
        print "    /* redline fixture: measurable extra work on GET'"'"'s code path. */"
        print "    { volatile unsigned long redline_spin = 0;"
        print "      for (unsigned long i = 0; i < " spin "UL; i++) redline_spin += i; }"
        done = 1
    }
' "$target" > "$target.new"
if ! grep -q "redline_spin" "$target.new"; then
    rm -f "$target.new"
    echo "error: no 'int getGenericCommand(client *c) {' line in $target to patch" >&2
    exit 1
fi
mv "$target.new" "$target"
export GIT_AUTHOR_DATE="2024-01-02T00:00:00Z" GIT_COMMITTER_DATE="2024-01-02T00:00:00Z"
git_ commit --quiet --no-verify -am "fixture: $SPIN iterations of extra work on GET's code path"
git_ tag patched

git_ rev-parse baseline^{commit} patched^{commit}
