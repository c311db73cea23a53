#!/usr/bin/env bash
# make test's server matrix: the Python suite on Redis 7.0 (Debian's),
# Redis 8.0 (trixie), Redis 8.6 (experimental) and Valkey 9.1 (sid, the
# jemalloc build), unpacked beside the system by scripts/redis8.sh. Two
# lanes run side by side (each suite uses its own ports and directories);
# the multi-second measurements ("heavy") run on Redis 7.0 only. Prints
# each suite's output and its wall-clock time, and fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
SO=$PWD/target/release/libpadlock.so
logs=$(mktemp -d /tmp/padlock-matrix.XXXXXX)
trap 'rm -rf "$logs"' EXIT

r70=$(command -v redis-server)
r80=$(scripts/redis8.sh redis)
r86=$(scripts/redis8.sh redis86)
v91=$(scripts/redis8.sh valkey91)

suite() {  # name server pytest-args...
  local name=$1 server=$2; shift 2
  local start=$SECONDS
  PADLOCK_SO=$SO PADLOCK_SERVER=$server timeout -k 30 900 $PY -m pytest -q -p no:cacheprovider python-tests "$@" \
    > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name $((SECONDS - start)) $rc" > "$logs/$name.done"
  return $rc
}

started=$SECONDS
( suite redis-7.0 "$r70"; suite redis-8.6 "$r86" -m "not heavy" ) &
( suite redis-8.0 "$r80" -m "not heavy"; suite valkey-9.1 "$v91" -m "not heavy" ) &
wait

failed=0
for name in redis-7.0 redis-8.0 redis-8.6 valkey-9.1; do
  read -r _ secs rc < "$logs/$name.done" || { secs=?; rc=1; }
  echo "==> Python suite on $name ($secs s)"
  cat "$logs/$name.log"
  [ "$rc" = 0 ] || failed=1
done
echo "==> server matrix: $((SECONDS - started)) s wall clock"
exit $failed
