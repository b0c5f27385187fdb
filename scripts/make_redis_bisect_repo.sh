#!/usr/bin/env bash
# make_redis_bisect_repo.sh SOURCE_TREE DEST_REPO [SPIN]
#
# A git repository for `redline bisect`'s tests, made from an unpacked redis source tree (e.g.
# the one scripts/redis_source.sh prints): the tree as it is (tag `good`), then 16 commits on one
# line (tag `bad` is the last):
#   - commits that change no code (a line added to REDLINE-FIXTURE.txt);
#   - commit 8 of 16 (tag `broken`): an #error in src/adlist.c, so it does not build; the next
#     commit removes it again;
#   - commit 12 of 16 (tag `culprit`): scripts/make_redis_fixture_repo.sh's `patched` change,
#     SPIN iterations (default 5000) of busy work at the start of getGenericCommand(): GET gets
#     slower, SET does not.
# Commit dates and authors are fixed, so the same tree always gives the same shas.
# Prints "INDEX SHA SUBJECT" per commit (0 = good). DEST_REPO must not exist yet.
set -euo pipefail

[[ $# == 2 || $# == 3 ]] || { echo "usage: $0 SOURCE_TREE DEST_REPO [SPIN]" >&2; exit 2; }
DEST=$2
COMMITS=16
BROKEN=8
CULPRIT=12
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# good and the GET change (as `baseline` and `patched`) from the two-commit fixture.
# (it checks the arguments)
bash "$HERE/make_redis_fixture_repo.sh" "$1" "$DEST" "${3:-5000}" >/dev/null

export GIT_AUTHOR_NAME=redline GIT_AUTHOR_EMAIL=redline@localhost
export GIT_COMMITTER_NAME=redline GIT_COMMITTER_EMAIL=redline@localhost
git_() { git -C "$DEST" -c core.autocrlf=false -c commit.gpgsign=false "$@"; }
at() { export GIT_AUTHOR_DATE="2024-02-$(printf %02d "$1")T00:00:00Z" GIT_COMMITTER_DATE="2024-02-$(printf %02d "$1")T00:00:00Z"; }

git_ checkout --quiet -b line baseline
git_ tag good baseline
for ((i = 1; i <= COMMITS; i++)); do
    at "$i"
    if ((i == CULPRIT)); then
        git_ cherry-pick --quiet patched >/dev/null
        git_ tag culprit
    elif ((i == BROKEN)); then
        sed -i '1i #error "redline fixture: this commit does not build"' "$DEST/src/adlist.c"
        git_ commit --quiet --no-verify -am "fixture: a commit that does not build"
        git_ tag broken
    elif ((i == BROKEN + 1)); then
        sed -i '1d' "$DEST/src/adlist.c"
        git_ commit --quiet --no-verify -am "fixture: builds again"
    else
        echo "commit $i" >> "$DEST/REDLINE-FIXTURE.txt"
        git_ add REDLINE-FIXTURE.txt
        git_ commit --quiet --no-verify -m "fixture: commit $i changes no code"
    fi
done
git_ tag bad
git_ branch --quiet -D main
git_ tag -d baseline patched >/dev/null
{ git_ log -1 --format='%H %s' good; git_ log --reverse --format='%H %s' good..bad; } | awk '{ print NR - 1, $0 }'
