#!/usr/bin/env bash
# The Java client against Redisson (clients/java/src/bench): one server with
# the module on a free loopback port, both libraries in one JVM.
set -euo pipefail
cd "$(dirname "$0")/../.."
SO="${PADLOCK_SO:-$PWD/target/release/libpadlock.so}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no --loadmodule "$SO" >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
cd clients/java
PADLOCK_BENCH_PORT=$port mvn -q -B -ntp -P bench compile exec:java
# Uncontended, interleaved with SET NX PX + DEL (the ratio rows of docs/benchmarks.md).
PADLOCK_BENCH_PORT=$port mvn -q -B -ntp -P bench exec:java -Dbench.main=io.padlock.bench.Uncontended
