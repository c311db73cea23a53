#!/usr/bin/env bash
# make test's suites, in lanes side by side: the server's Python suite on
# Redis 7.0 (Debian's), Redis 8.0 (trixie), Redis 8.6 (experimental) and
# Valkey 9.1 (sid, the jemalloc build), unpacked beside the system by
# scripts/redis8.sh, and the four client suites (Python, TypeScript, Java,
# Go) on Redis 7.0. Every suite starts its own servers on its own ports
# and directories, and they mostly wait (leases running out, timeouts): one
# alone keeps a tenth of this 2-core machine busy, so they share it. The
# multi-second measurements ("heavy") run on Redis 7.0 only. Prints each
# suite's output and its wall-clock time, and fails if any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=$PWD/.venv/bin/python
SO=$PWD/target/release/libpadlock.so
LIMIT=${SUITE_LIMIT:-600}
logs=$(mktemp -d /tmp/padlock-matrix.XXXXXX)
trap 'rm -rf "$logs"' EXIT

r70=$(command -v redis-server)
r80=$(scripts/redis8.sh redis)
r86=$(scripts/redis8.sh redis86)
v91=$(scripts/redis8.sh valkey91)

run() {  # name dir command...: one suite, its output kept for the report
  local name=$1 dir=$2; shift 2
  local start=$SECONDS
  (cd "$dir" && PADLOCK_SO=$SO "$@") > "$logs/$name.log" 2>&1
  local rc=$?
  echo "$name $((SECONDS - start)) $rc" > "$logs/$name.done"
  return 0
}

server() {  # name server pytest-args...
  local name=$1 srv=$2; shift 2
  run "$name" . env PADLOCK_SERVER="$srv" timeout -k 30 900 "$PY" -m pytest -q -p no:cacheprovider python-tests "$@"
}

SUITES="redis-7.0 redis-8.0 redis-8.6 valkey-9.1 python-client typescript-client java-client go-client"
started=$SECONDS
# Longest first in each lane: the 7.0 suite carries the heavy tests, Valkey
# is the slowest server, the Java build takes a core for a minute.
( server redis-7.0 "$r70"; run python-client . sh -c \
    "cd clients/python && $PY -m mypy --strict src && cd ../.. && timeout -k 30 $LIMIT $PY -m pytest -q -p no:cacheprovider clients/python/tests" ) &
( server valkey-9.1 "$v91" -m "not heavy"; run typescript-client clients/typescript env PADLOCK_ASM_SERVER="$r86" timeout -k 30 "$LIMIT" npm test --silent ) &
( server redis-8.0 "$r80" -m "not heavy"; run go-client clients/go env PADLOCK_ASM_SERVER="$v91" sh -c \
    "go vet ./... && timeout -k 30 $LIMIT go test -race -count=1 ./..." ) &
( server redis-8.6 "$r86" -m "not heavy" ) &
( run java-client clients/java env PADLOCK_ASM_SERVER="$v91" timeout -k 30 "$LIMIT" mvn -q -B -ntp verify ) &
wait

failed=0
for name in $SUITES; do
  read -r _ secs rc < "$logs/$name.done" || { secs=?; rc=1; }
  echo "==> $name ($secs s)"
  cat "$logs/$name.log"
  [ -z "$(tail -c 1 "$logs/$name.log")" ] || echo  # a log without its last newline (Maven's)
  [ "$rc" = 0 ] || { failed=1; echo "==> $name FAILED (exit $rc)"; }
done
echo "==> all suites: $((SECONDS - started)) s wall clock"
exit $failed
