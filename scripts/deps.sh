#!/usr/bin/env bash
# Installs what `make run` / `make test` need and the machine lacks:
# Debian's redis-server and libclang-dev (bindgen), and with `--python` a
# local venv with the Python test packages. Safe to run again: it only acts
# on what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Rust: Debian's own (1.63 on bookworm) is older than the crates need, so
# a machine without cargo gets rustup's stable toolchain, rustfmt and
# clippy in ~/.cargo (the Makefile puts ~/.cargo/bin on its PATH).
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "==> installing Rust (rustup, stable, into ~/.cargo)"
  if ! command -v curl >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq curl ca-certificates >/dev/null
  fi
  if ! curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
    sh -s -- -y --profile minimal -c rustfmt -c clippy --default-toolchain stable >/dev/null; then
    echo "cargo is missing and rustup could not be fetched: install Rust" \
      "(https://rustup.rs), then run make again" >&2
    exit 1
  fi
fi

if [ "${1:-}" = "--node" ]; then
  # Node 18+ and npm for the TypeScript client; its packages go into
  # clients/typescript/node_modules only.
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "==> installing nodejs and npm"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
  fi
  if [ ! -d clients/typescript/node_modules ] || [ clients/typescript/package-lock.json -nt clients/typescript/node_modules ]; then
    echo "==> installing the TypeScript client's packages into clients/typescript/node_modules"
    (cd clients/typescript && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
    touch clients/typescript/node_modules
  fi
fi

if [ "${1:-}" = "--java" ]; then
  # A JDK 17+ and Maven for the Java client; Maven fetches its packages
  # (drivers, JUnit, Kotlin) from Maven Central into ~/.m2.
  if ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
    echo "==> installing a JDK and Maven"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq default-jdk-headless maven >/dev/null
  fi
fi

if [ "${1:-}" = "--go" ]; then
  # Go 1.26+ for the Go client (on every machine of this kind; Debian's
  # golang is older); the go command fetches its modules from the Go
  # module proxy into its own cache, as go.sum pins them.
  if ! command -v go >/dev/null 2>&1; then
    for d in /usr/local/go/bin "$HOME/go/bin"; do [ -x "$d/go" ] && export PATH="$d:$PATH"; done
  fi
  if ! command -v go >/dev/null 2>&1; then
    echo "go is missing: install Go 1.26 or newer (https://go.dev/dl) first" >&2
    exit 1
  fi
  (cd clients/go && go mod download)
fi

if [ "${1:-}" = "--observe" ]; then
  # The observability tests: Debian's prometheus-redis-exporter (scraped on
  # loopback), Graphviz's dot (`python -m padlock graph`) and tmux (`top`
  # as a person sees it).
  need=()
  command -v prometheus-redis-exporter >/dev/null 2>&1 || need+=(prometheus-redis-exporter)
  # promtool (Debian's prometheus package) checks deploy/prometheus-rules.yml.
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  command -v dot >/dev/null 2>&1 || need+=(graphviz)
  command -v tmux >/dev/null 2>&1 || need+=(tmux)
  if [ "${#need[@]}" -gt 0 ]; then
    echo "==> installing ${need[*]}"
    $SUDO apt-get update -qq
    # The exporter's package starts no server here (no systemd in CI
    # containers); where it does, it listens on :9121, which tests never use.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

if [ "${1:-}" = "--partitions" ]; then
  # make partitions: iproute2 (ip netns, veth, bridge) and iptables, from
  # Debian's packages; it runs as root.
  need=()
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  if [ "${#need[@]}" -gt 0 ]; then
    echo "==> installing ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

if [ "${1:-}" = "--python" ]; then
  # The blocking Python client is generated from the asyncio one (one
  # source; see clients/python/unasync.py): written anew before any use.
  python3 clients/python/unasync.py
  req=python-tests/requirements.txt
  stamp=.venv/.installed
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv 2>/dev/null || {
      rm -rf .venv
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv .venv
    }
  fi
  if [ ! -f "$stamp" ] || [ "$req" -nt "$stamp" ]; then
    echo "==> installing Python test packages into .venv"
    .venv/bin/pip install -q --disable-pip-version-check -r "$req"
    touch "$stamp"
  fi
fi

if [ "${1:-}" = "--bench" ]; then
  # make bench: valgrind (instructions per call), the Python lock
  # libraries padlock is compared with, matplotlib for the chart, and the
  # TypeScript, Java and Go clients' toolchains (their rows are measured
  # through them).
  if ! command -v valgrind >/dev/null 2>&1; then
    echo "==> installing valgrind"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq valgrind >/dev/null
  fi
  "$0" --python
  "$0" --node
  "$0" --java
  "$0" --go
  if [ ! -f .venv/.bench-installed ] || [ scripts/bench/bench-requirements.txt -nt .venv/.bench-installed ]; then
    echo "==> installing the benchmark's Python packages into .venv"
    .venv/bin/pip install -q --disable-pip-version-check -r scripts/bench/bench-requirements.txt
    touch .venv/.bench-installed
  fi
fi
