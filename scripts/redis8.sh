#!/usr/bin/env bash
# Unpacks a Redis or Valkey server from Debian's archive beside the system,
# never installing it over the system's packages, and prints the path of a
# wrapper script that starts that server with its own libraries (a CLI
# wrapper sits beside it). The server package comes from its own suite;
# every library comes from trixie, so the unpacked libc is trixie's.
#
#   scripts/redis8.sh            Redis 8.0 (trixie)          .deps/redis8
#   scripts/redis8.sh valkey     Valkey 8.1 (trixie)         .deps/valkey8
#   scripts/redis8.sh redis86    Redis 8.6.3 (experimental)  .deps/redis86
#   scripts/redis8.sh valkey91   Valkey 9.1.2, jemalloc (sid) .deps/valkey91
#   scripts/redis8.sh valkey80   Valkey 8.0.1 (bookworm-backports) .deps/valkey80
#
# Safe to run again: an unpacked server is reused. The mirror is the one
# the system already uses (read at run time, named in no file).
set -euo pipefail
cd "$(dirname "$0")/.."
flavor=${1:-redis}
case "$flavor" in
  redis)    root=$PWD/.deps/redis8   prog=redis  tools=redis-tools                 suite=trixie ;;
  valkey)   root=$PWD/.deps/valkey8  prog=valkey tools=valkey-tools                suite=trixie ;;
  redis86)  root=$PWD/.deps/redis86  prog=redis  tools=redis-tools=5:8.6.3-1       suite=experimental ;;
  valkey91) root=$PWD/.deps/valkey91 prog=valkey tools=valkey-tools=9.1.2-1        suite=sid ;;
  valkey80) root=$PWD/.deps/valkey80 prog=valkey tools=valkey-tools=8.0.1+dfsg1-1~bpo12+1 suite=bookworm-backports ;;
  *) echo "usage: $0 [redis|valkey|redis86|valkey91|valkey80]" >&2; exit 2 ;;
esac
wrapper=$root/$prog-server
if [ -x "$wrapper" ] && "$wrapper" --version >/dev/null 2>&1; then
  echo "$wrapper"
  exit 0
fi
rm -rf "$root"
mkdir -p "$root/debs" "$root/fs"
mirror=$( (grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
           grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}') | grep -v security | head -n 1 || true)
[ -n "$mirror" ] || { echo "redis8.sh: no Debian mirror configured in /etc/apt" >&2; exit 1; }

# One apt state per suite, so that each download sees only its own suite.
fetch() {  # suite, packages...
  local s=$1; shift
  local a=$root/apt-$s
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $s main" > "$a/sources.list"
  local opts=(-o "Dir::Etc::sourcelist=$a/sources.list" -o Dir::Etc::sourceparts=-
              -o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache"
              -o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1)
  apt-get "${opts[@]}" update -qq >&2 || {
    # An older keyring may lack the newer suites' keys: the packages are
    # still checked against the hashes of the (then unsigned) index.
    sed -i 's/signed-by=[^]]*/trusted=yes/' "$a/sources.list"
    apt-get "${opts[@]}" update -qq >&2
  }
  (cd "$root/debs" && apt-get "${opts[@]}" download -qq "$@" >&2)
}
fetch "$suite" "$tools"
fetch trixie libc6 libssl3t64 libjemalloc2 liblzf1 libsystemd0 libatomic1 libstdc++6 \
  libgcc-s1 libcap2 libzstd1 liblz4-1 liblzma5 libgcrypt20 libgpg-error0
for d in "$root"/debs/*.deb; do dpkg -x "$d" "$root/fs"; done
loader=$(ls "$root"/fs/usr/lib64/ld-linux-x86-64.so.2 "$root"/fs/lib64/ld-linux-x86-64.so.2 2>/dev/null | head -n 1 || true)
[ -n "$loader" ] || { echo "redis8.sh: no loader in the unpacked libc6" >&2; exit 1; }
libs="$root/fs/lib/x86_64-linux-gnu:$root/fs/usr/lib/x86_64-linux-gnu"
# The server is the rdb checker under another name (argv[0] decides).
ln -sf "$prog-check-rdb" "$root/fs/usr/bin/$prog-server"
for p in "$prog-server" "$prog-cli"; do
  cat > "$root/$p" <<WRAP
#!/bin/sh
exec "$loader" --library-path "$libs" "$root/fs/usr/bin/$p" "\$@"
WRAP
  chmod +x "$root/$p"
done
"$wrapper" --version >&2
echo "$wrapper"
