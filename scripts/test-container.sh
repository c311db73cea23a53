#!/usr/bin/env bash
# make test-container: builds deploy/Dockerfile's runtime stage on two
# locally made bases (Debian trixie's Redis 8.0 and bookworm's Redis 7.0;
# no registry is needed) with a private Docker daemon, and checks each
# image for real: loaded once, answers, turns healthy, runs as non-root,
# takes module configs, keeps a lock (fence and remaining lease) across
# `docker restart` with AOF, and starts again after `CONFIG REWRITE`.
# Everything it starts (daemon, containers, images, bridge, iptables
# chains) is removed when it ends, also on failure. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
[ "$(id -u)" = 0 ] || { echo "test-container: needs root (a private dockerd)" >&2; exit 1; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v iptables >/dev/null || need+=(iptables)
if [ ${#need[@]} -gt 0 ]; then
  echo "==> installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
DOCKER=/usr/bin/docker   # Debian's client, the daemon's own version
[ -x "$DOCKER" ] || DOCKER=$(command -v docker)
SO=$root/target/release/libpadlock.so
[ -f "$SO" ] || { echo "test-container: build first (make build)" >&2; exit 1; }

work=$(mktemp -d /tmp/padlock-container.XXXXXX)
cache=$root/.deps/container
mkdir -p "$cache"
export DOCKER_HOST=unix://$work/docker.sock DOCKER_BUILDKIT=0
started=$(date +%s)
step() { echo "==> [$(( $(date +%s) - started ))s] $*"; }

cleanup() {
  set +e
  if [ -S "$work/docker.sock" ]; then
    $DOCKER ps -aq | xargs -r $DOCKER rm -f >/dev/null 2>&1
  fi
  local pid; pid=$(cat "$work/pid" 2>/dev/null)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  ip link delete docker0 2>/dev/null
  for table in filter nat; do
    for chain in $(iptables -t $table -S 2>/dev/null | awk '/^-N DOCKER/ {print $2}'); do
      iptables -t $table -F "$chain" 2>/dev/null
    done
    iptables -t $table -S 2>/dev/null | grep -E '^-A .*DOCKER' | sed 's/^-A/-D/' |
      while read -r rule; do eval iptables -t $table "$rule" 2>/dev/null; done
    for chain in $(iptables -t $table -S 2>/dev/null | awk '/^-N DOCKER/ {print $2}'); do
      iptables -t $table -X "$chain" 2>/dev/null
    done
  done
  awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

step "private dockerd in $work"
dockerd --storage-driver=overlay2 --data-root="$work/data" --exec-root="$work/exec" \
  --pidfile="$work/pid" -H "$DOCKER_HOST" --bridge=none --iptables=false \
  >"$work/dockerd.log" 2>&1 &
for _ in $(seq 100); do $DOCKER info >/dev/null 2>&1 && break; sleep 0.1; done
$DOCKER info >/dev/null 2>&1 || { tail -20 "$work/dockerd.log"; exit 1; }

base() { # base SUITE -> image with Debian's redis-server of that suite
  local suite=$1 tar=$cache/$1.tar
  if [ ! -s "$tar" ]; then
    step "mmdebstrap $suite (redis-server)"
    rm -rf "$cache/$suite.partial.tar"
    mmdebstrap --quiet --variant=minbase --include=redis-server "$suite" "$cache/$suite.partial.tar" >/dev/null
    mv "$cache/$suite.partial.tar" "$tar"
  fi
  $DOCKER import "$tar" "padlock-base:$suite" >/dev/null
}

# The build context: the sources the Dockerfile copies, and the module
# built on this machine as prebuilt/libpadlock.so (no Rust image to pull).
ctx=$work/ctx
mkdir -p "$ctx/prebuilt"
cp -r Cargo.toml Cargo.lock src deploy .dockerignore "$ctx/"
cp "$SO" "$ctx/prebuilt/libpadlock.so"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

check() { # check SUITE
  local suite=$1 tag=padlock-test:$1 name=padlock-$1 port
  base "$suite"
  step "build runtime on padlock-base:$suite"
  $DOCKER build -q -f "$ctx/deploy/Dockerfile" --target runtime \
    --build-arg BASE="padlock-base:$suite" --build-arg BUILDER=padlock-base:bookworm \
    -t "$tag" "$ctx" >/dev/null 2>"$work/build.log" || { cat "$work/build.log"; exit 1; }
  port=$(free_port)
  cli() { redis-cli -p "$port" "$@"; }
  step "run $name on 127.0.0.1:$port (host network)"
  $DOCKER run -d --name "$name" --network host -e PADLOCK_PORT="$port" \
    --health-interval=1s --health-start-period=1s "$tag" \
    --port "$port" --bind 127.0.0.1 >/dev/null
  healthy() {
    for _ in $(seq 60); do
      [ "$($DOCKER inspect -f '{{.State.Health.Status}}' "$name")" = healthy ] && return 0
      sleep 0.5
    done
    $DOCKER logs "$name" | tail -20; return 1
  }
  healthy
  local version; version=$(cli INFO server | awk -F: '/^redis_version/ {print $2}' | tr -d '\r')
  step "$suite: Redis $version is healthy"
  [ "$(cli MODULE LIST | grep -c '^padlock$')" = 1 ] || { echo "module not loaded exactly once"; exit 1; }
  [ "$($DOCKER exec "$name" id -u)" != 0 ] || { echo "runs as root"; exit 1; }
  cli CONFIG SET padlock.restart-grace-ms auto | grep -q OK
  [ "$(cli CONFIG GET padlock.restart-grace-ms | tail -1)" = auto ]
  cli CONFIG SET padlock.restart-grace-ms 0 >/dev/null
  local fence ttl_before ttl_after
  fence=$(cli LOCK.ACQUIRE job:1 worker 60000)
  [ "$fence" -gt 0 ]
  ttl_before=$(cli PTTL job:1)
  step "$suite: lock held (fence $fence); docker restart"
  $DOCKER restart "$name" >/dev/null
  healthy
  [ "$(cli LOCK.INFO job:1 | sed -n 4p)" = "$fence" ] || { echo "fence lost"; cli LOCK.INFO job:1; exit 1; }
  ttl_after=$(cli PTTL job:1)
  [ "$ttl_after" -gt 0 ] && [ "$ttl_after" -le "$ttl_before" ] || { echo "lease $ttl_before -> $ttl_after"; exit 1; }
  step "$suite: fence $fence kept, lease $ttl_before -> $ttl_after ms; CONFIG REWRITE, restart"
  cli CONFIG SET padlock.max-holder-len 1024 >/dev/null
  cli CONFIG REWRITE | grep -q OK
  [ "$($DOCKER exec "$name" grep -c '^loadmodule' /etc/padlock/padlock.conf)" = 1 ]
  $DOCKER restart "$name" >/dev/null
  healthy
  [ "$(cli MODULE LIST | grep -c '^padlock$')" = 1 ]
  [ "$(cli CONFIG GET padlock.max-holder-len | tail -1)" = 1024 ]
  [ "$(cli LOCK.INFO job:1 | sed -n 4p)" = "$fence" ]
  step "$suite: restarted after CONFIG REWRITE, module loaded once, config kept"
  $DOCKER rm -f "$name" >/dev/null
}

# The docs' own recipes, run as written (scripts/doc-shell.py: only the
# published port becomes a free loopback one): the README's quick start
# and the guide's `docker run`, on images tagged with the names the
# Dockerfile's defaults pull (no registry here: Debian 13's Redis 8.0 is
# `redis:8`; the builder and the init stage's base are Debian 12).
recipe() { # recipe FILE HEADING
  local file=$1 heading=$2 port cmd
  port=$(free_port)
  step "recipe: $file \"$heading\" (port $port)"
  local up=0
  while IFS= read -r cmd; do
    echo "    \$ $cmd"
    if [ "$cmd" = run-session ]; then
      # The section's redis-cli session, replies checked by shape.
      "$root/.venv/bin/python" - "$root/scripts" "$root/$file" "$heading" "$port" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import examples, importlib.util
spec = importlib.util.spec_from_file_location("doc_shell", sys.argv[1] + "/doc-shell.py")
doc = importlib.util.module_from_spec(spec); spec.loader.exec_module(doc)
text = doc.section(open(sys.argv[2]).read(), sys.argv[3])
assert examples.sessions(text), "no redis session in the section"
diffs = examples.run(int(sys.argv[4]), text)
for line, cmd, want, got in diffs:
    print(f"  > {cmd}\n    expected {want}\n    got      {got}")
sys.exit(1 if diffs else 0)
PY
      continue
    fi
    (cd "$ctx" && DOCKER_HOST=$DOCKER_HOST PATH="$work/bin:$PATH" bash -euo pipefail -c "$cmd") > "$work/out" 2>&1 ||
      { cat "$work/out"; echo "recipe failed: $cmd"; exit 1; }
    sed 's/^/      /' "$work/out" | tail -5
    if [[ $cmd == "docker run "* ]]; then
      # A person types the next line a moment later: wait until it listens.
      for _ in $(seq 100); do redis-cli -p "$port" PING 2>/dev/null | grep -q 'PONG\|NOAUTH' && up=1 && break; sleep 0.1; done
      [ "$up" = 1 ] || { $DOCKER logs locks | tail; exit 1; }
    fi
  done < <(python3 "$root/scripts/doc-shell.py" "$root/$file" "$heading" "$port")
  $DOCKER rm -f locks >/dev/null 2>&1 || true
}

base bookworm   # also the builder stage's base (it only copies the prebuilt .so)
base trixie
mkdir -p "$work/bin"
ln -sf "$DOCKER" "$work/bin/docker"
$DOCKER tag padlock-base:trixie redis:8
$DOCKER tag padlock-base:bookworm rust:1-bookworm
$DOCKER tag padlock-base:bookworm busybox:stable
recipe README.md "Quick start"
[ "$($DOCKER inspect -f '{{.Config.User}}' redis-padlock)" = redis ] || { echo "the default target is not the server"; exit 1; }
recipe docs/operations.md "docker run and compose"
(cd "$ctx" && $DOCKER build -q -f deploy/Dockerfile --target init -t padlock-init . >/dev/null)
step "the guide's init stage builds (docs/operations.md \"The image\")"

check trixie
check bookworm

step "module stage: the .so alone, for COPY --from and init containers"
$DOCKER build -q -f "$ctx/deploy/Dockerfile" --target module \
  --build-arg BUILDER=padlock-base:bookworm -t padlock-test:module "$ctx" >/dev/null 2>"$work/build.log" ||
  { cat "$work/build.log"; exit 1; }
id=$($DOCKER create padlock-test:module none)
$DOCKER export "$id" | tar -t > "$work/files"
$DOCKER cp "$id:/libpadlock.so" "$work/out.so"
$DOCKER rm "$id" >/dev/null
cmp "$SO" "$work/out.so"
grep -qx 'libpadlock.so' "$work/files" && [ "$(grep -vc '^\.\?dockerenv\|^dev\|^etc\|^proc\|^sys' "$work/files")" -le 1 ] ||
  { echo "module stage holds more than the .so:"; cat "$work/files"; exit 1; }
step "all container checks passed"
