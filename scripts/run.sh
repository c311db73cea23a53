#!/usr/bin/env bash
# `make run`: redis-server on 127.0.0.1 with padlock loaded, in the
# foreground, and how to connect to it.
#
#   scripts/run.sh path/to/libpadlock.so [port]
#
# Without a port it takes 6379, or the next free one up to 6399 when 6379
# is taken: installing Debian's redis-server package (what `make run` does
# on a fresh machine) starts its own service there on a machine with
# systemd. A port given and taken is an error. PADLOCK_RUN_FROM moves the
# first port tried (the tests' way to make 6379 taken without using it).
set -euo pipefail

so=${1:?usage: scripts/run.sh path/to/libpadlock.so [port]}
asked=${2:-}

taken() {
  # Something answers on 127.0.0.1 (bound there or on every address).
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

if [ -n "$asked" ]; then
  if taken "$asked"; then
    echo "make run: port $asked on 127.0.0.1 is taken; choose another: make run PORT=<port>" >&2
    exit 1
  fi
  port=$asked
else
  from=${PADLOCK_RUN_FROM:-6379}
  port=
  for p in $(seq "$from" $((from + 20))); do
    if ! taken "$p"; then
      port=$p
      break
    fi
  done
  if [ -z "$port" ]; then
    echo "make run: ports $from to $((from + 20)) on 127.0.0.1 are all taken; choose one: make run PORT=<port>" >&2
    exit 1
  fi
  if [ "$port" != "$from" ]; then
    echo "==> port $from is taken (another redis-server? Debian's starts as a service:" \
      "systemctl status redis-server); using $port"
  fi
fi

echo "==> redis-server on 127.0.0.1:$port with padlock loaded"
echo "    connect: redis-cli -p $port    try: LOCK.ACQUIRE mylock me 30000"
exec redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
  --loadmodule "$so"
