#!/usr/bin/env bash
# The Go client against redsync v4 and bsm/redislock (clients/go/bench):
# one server with the module on a free loopback port, every library in one
# process.
set -euo pipefail
cd "$(dirname "$0")/../.."
SO="${PADLOCK_SO:-$PWD/target/release/libpadlock.so}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no --loadmodule "$SO" >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
cd clients/go/bench
go run . -addr "127.0.0.1:$port" -seconds "${PADLOCK_GO_BENCH_SECONDS:-10}" -work "${PADLOCK_GO_BENCH_WORK:-sleep,nanosleep,spin}"
echo
echo "### What a 1 ms time.Sleep measures besides 1 ms (the contended table's work column)"
echo
go run . -addr "127.0.0.1:$port" -timerprobe
