#!/usr/bin/env bash
# The two real series of issue #25, measured again with redline's own commands.
#
#   bash experiments/changepoint/real_series.sh REDIS_CLONE WORKDIR
#
# REDIS_CLONE: any git clone of redis holding 7.0.5..7.0.7 (it is cloned again, never changed).
# 1. git: series — a branch `track` moved through 11 first-parent commits of 7.0.5..7.0.7 (three
#    GEOSEARCH BYBOX changes among them: cffabb641, 3d206f0fc, 5e02338e5), one session per commit
#    on the upstream BYBOX suite (scale 0.1644, 3 runs of 5 s).
# 2. bin: series — one binary path whose contents are replaced twice (builds of 4972f5768,
#    3d206f0fc, 5e02338e5 from series 1), 11 sessions at scale 0.02, 2 runs each.
# Then `redline history` on each store (table and --json).
set -euo pipefail
SOURCE=$(realpath "$1"); WORK=$(realpath -m "$2")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
REDLINE="$REPO/.venv/bin/redline"
SUITE="$REPO/../shared/upstream-suites/test-suites/memtier_benchmark-1key-geo-60M-elements-geosearch-fromlonlat-bybox.yml"
COMMITS=(a26ac7ebb d81c2a5f3 4972f5768 cffabb641 81e72e8e2 3d206f0fc fba49b107 77570e396 5e02338e5 b322a77e9 05c9378b3)
mkdir -p "$WORK"
[ -d "$WORK/redis" ] || git clone --quiet --no-checkout "$SOURCE" "$WORK/redis"

echo "== git: series (one session per commit)"
for sha in "${COMMITS[@]}"; do
  git -C "$WORK/redis" branch --force track "$sha"
  echo "-- track at $sha: $(git -C "$WORK/redis" log -1 --format=%s "$sha")"
  "$REDLINE" run "$SUITE" --target "git:$WORK/redis@track" --scale 0.1644 --runs 3 --duration 5s \
    --store "$WORK/git-series.db" > "$WORK/git-session-$sha.txt" 2>&1 || { tail -5 "$WORK/git-session-$sha.txt"; exit 1; }
  grep -E "µs/op" "$WORK/git-session-$sha.txt" | tail -3 || true
done
"$REDLINE" history --store "$WORK/git-series.db" --metric server_cpu_us_per_op --json "$WORK/git-history.json"

echo "== bin: series (one path, rebuilt twice)"
mkdir -p "$WORK/bin"
binary_of() { "$REDLINE" build "git:$WORK/redis@$1" 2>/dev/null; }
for i in $(seq 1 11); do
  if [ "$i" -le 4 ]; then sha=4972f5768; elif [ "$i" -le 7 ]; then sha=3d206f0fc; else sha=5e02338e5; fi
  cp "$(binary_of $sha)" "$WORK/bin/redis-server.new" && mv "$WORK/bin/redis-server.new" "$WORK/bin/redis-server"
  echo "-- session $i: bin:$WORK/bin/redis-server holds the build of $sha"
  "$REDLINE" run "$SUITE" --target "bin:$WORK/bin/redis-server" --scale 0.02 --runs 2 --duration 5s \
    --store "$WORK/bin-series.db" > "$WORK/bin-session-$i.txt" 2>&1 || { tail -5 "$WORK/bin-session-$i.txt"; exit 1; }
done
"$REDLINE" history --store "$WORK/bin-series.db" --metric server_cpu_us_per_op --json "$WORK/bin-history.json"
