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
cd "$(dirname "$0")/../.."
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
    # The compose deployments' networks (and their bridges).
    $DOCKER network prune -f >/dev/null 2>&1
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

# The docs' own recipes, run as written (scripts/docs/doc-shell.py: only the
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
      "$root/.venv/bin/python" - "$root/scripts/docs" "$root/$file" "$heading" "$port" <<'PY'
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
  done < <(python3 "$root/scripts/docs/doc-shell.py" "$root/$file" "$heading" "$port")
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

# The compose deployments of deploy/compose, on the quick start's image,
# each on a network of its own inside the private daemon (the test
# speaks to the nodes from inside their containers: no port is
# published): a lock taken survives a Sentinel failover, and a reshard of
# its slot in the cluster.
in_c() { local c=$1; shift; $DOCKER exec "$c" "$@"; }
until_ok() { # until_ok SECONDS CMD...: retries CMD until it succeeds
  local end=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || { echo "timed out: $*"; return 1; }
    sleep 0.5
  done
}
compose_sentinel() {
  local p=plsent dc=(docker-compose -p plsent -f "$ctx/deploy/compose/sentinel.yml")
  step "compose: deploy/compose/sentinel.yml (master, replica, three Sentinels)"
  (cd "$ctx" && "${dc[@]}" up -d) >/dev/null 2>"$work/compose.log" || { cat "$work/compose.log"; exit 1; }
  local m=${p}_master_1 r=${p}_replica_1 s=${p}_sentinel1_1
  until_ok 30 sh -c "$DOCKER exec $r redis-cli INFO replication | grep -q master_link_status:up"
  until_ok 30 sh -c "$DOCKER exec $s redis-cli -p 26379 SENTINEL replicas locks | grep -q slave"
  in_c "$m" redis-cli CONFIG SET padlock.restart-grace-ms 0 >/dev/null
  local fence; fence=$(in_c "$m" redis-cli LOCK.ACQUIRE job:1 w1 120000)
  [ "$fence" -gt 0 ] && [ "$(in_c "$m" redis-cli WAIT 1 5000)" = 1 ]
  step "sentinel: lock held (fence $fence), on the replica too; stopping the master"
  $DOCKER stop "$m" >/dev/null
  until_ok 60 sh -c "$DOCKER exec $r redis-cli ROLE | head -1 | grep -qx master"
  [ "$(in_c "$r" redis-cli LOCK.INFO job:1 | sed -n 4p)" = "$fence" ] || { echo "fence lost in the failover"; exit 1; }
  # nil (held), or refused (NOREPLICAS: no replica yet; TRYAGAIN: the
  # grace a promotion starts): never a fence for a second holder.
  local second; second=$(in_c "$r" redis-cli LOCK.ACQUIRE job:1 w2 1000)
  [[ ! $second =~ ^[0-9]+$ ]] || { echo "a second holder after the failover"; exit 1; }
  $DOCKER start "$m" >/dev/null
  until_ok 60 sh -c "$DOCKER exec $m redis-cli ROLE | head -1 | grep -qx slave"
  until_ok 30 sh -c "[ \"\$($DOCKER exec $r redis-cli LOCK.EXTEND job:1 w1 120000)\" = 1 ]"
  step "sentinel: replica promoted with the lock (fence kept, no second holder); the old master rejoined as its replica"
  (cd "$ctx" && "${dc[@]}" down -v) >/dev/null 2>&1
}
compose_cluster() {
  local p=plclus dc=(docker-compose -p plclus -f "$ctx/deploy/compose/cluster.yml")
  step "compose: deploy/compose/cluster.yml (three masters)"
  (cd "$ctx" && "${dc[@]}" up -d) >/dev/null 2>"$work/compose.log" || { cat "$work/compose.log"; exit 1; }
  local n1=${p}_node1_1
  [ "$($DOCKER wait ${p}_create_1)" = 0 ] || { $DOCKER logs ${p}_create_1 | tail; exit 1; }
  until_ok 30 sh -c "$DOCKER exec $n1 redis-cli CLUSTER INFO | grep -q cluster_state:ok"
  for n in node1 node2 node3; do in_c "${p}_${n}_1" redis-cli CONFIG SET padlock.restart-grace-ms 0 >/dev/null; done
  local fence second; fence=$(in_c "$n1" redis-cli -c LOCK.ACQUIRE '{job}:1' w1 120000)
  [ "$fence" -gt 0 ]
  local slot owner other
  slot=$(in_c "$n1" redis-cli CLUSTER KEYSLOT '{job}:1')
  owner=$(in_c "$n1" redis-cli CLUSTER NODES | awk -v s="$slot" '{for (i=9;i<=NF;i++) {split($i,r,"-"); if (r[2]=="") r[2]=r[1]; if (s>=r[1] && s<=r[2]) print $1}}')
  other=$(in_c "$n1" redis-cli CLUSTER NODES | awk -v o="$owner" '$1!=o {print $1; exit}')
  step "cluster: lock held (fence $fence) in slot $slot; resharding that node's slots"
  in_c "$n1" sh -c "redis-cli --cluster reshard \$(getent hosts node1 | cut -d' ' -f1):6379 --cluster-from $owner --cluster-to $other --cluster-slots 3000 --cluster-yes" >"$work/reshard.log" 2>&1 ||
    { tail -20 "$work/reshard.log"; exit 1; }
  local now; now=$(in_c "$n1" redis-cli CLUSTER NODES | awk -v s="$slot" '{for (i=9;i<=NF;i++) {split($i,r,"-"); if (r[2]=="") r[2]=r[1]; if (s>=r[1] && s<=r[2]) print $1}}')
  [ "$now" = "$other" ] || { echo "slot $slot did not move ($now)"; exit 1; }
  [ "$(in_c "$n1" redis-cli -c LOCK.INFO '{job}:1' | sed -n 4p)" = "$fence" ] || { echo "fence lost in the reshard"; exit 1; }
  second=$(in_c "$n1" redis-cli -c LOCK.ACQUIRE '{job}:1' w2 1000)
  [[ ! $second =~ ^[0-9]+$ ]] || { echo "a second holder after the reshard"; exit 1; }
  [ "$(in_c "$n1" redis-cli -c LOCK.RELEASE '{job}:1' w1)" = 0 ]
  step "cluster: the lock moved with its slot (fence kept, still held, released on its new node)"
  (cd "$ctx" && "${dc[@]}" down -v) >/dev/null 2>&1
}
command -v docker-compose >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
compose_sentinel
compose_cluster

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
