#!/usr/bin/env bash
# Unpacks Redis 8.0 from Debian 13 (trixie) into .deps/redis8 beside the
# system, never installing it over the system's packages, and prints the
# path of a wrapper script that starts that server with its own libraries
# (a `redis-cli` wrapper sits beside it). `scripts/redis8.sh valkey` does
# the same for trixie's Valkey 8.1 in .deps/valkey8 (`valkey-server`,
# `valkey-cli`). Safe to run again: an unpacked server is reused.
set -euo pipefail
cd "$(dirname "$0")/.."
flavor=${1:-redis}
case "$flavor" in
  redis) root=$PWD/.deps/redis8 tools=redis-tools ;;
  valkey) root=$PWD/.deps/valkey8 tools=valkey-tools ;;
  *) echo "usage: $0 [redis|valkey]" >&2; exit 2 ;;
esac
wrapper=$root/$flavor-server
if [ -x "$wrapper" ] && "$wrapper" --version >/dev/null 2>&1; then
  echo "$wrapper"
  exit 0
fi
rm -rf "$root"
mkdir -p "$root/apt/lists/partial" "$root/apt/cache/archives/partial" "$root/debs" "$root/fs"
# The mirror the system already uses, with the suite swapped for trixie.
mirror=$( (grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
           grep -hE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}') | grep -v security | head -n 1 || true)
[ -n "$mirror" ] || { echo "redis8.sh: no Debian mirror configured in /etc/apt" >&2; exit 1; }
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$root/apt/sources.list"
apt_opts=(-o "Dir::Etc::sourcelist=$root/apt/sources.list" -o Dir::Etc::sourceparts=-
          -o "Dir::State::Lists=$root/apt/lists" -o "Dir::Cache=$root/apt/cache"
          -o APT::Get::List-Cleanup=0 -o Debug::NoLocking=1)
apt-get "${apt_opts[@]}" update -qq >&2 || {
  # An older keyring may lack the trixie keys: the packages are still
  # checked against the hashes of the (then unsigned) index.
  sed -i 's/signed-by=[^]]*/trusted=yes/' "$root/apt/sources.list"
  apt-get "${apt_opts[@]}" update -qq >&2
}
(cd "$root/debs" && apt-get "${apt_opts[@]}" download -qq "$tools" libc6 libssl3t64 \
  libjemalloc2 liblzf1 libsystemd0 libatomic1 libstdc++6 libgcc-s1 libcap2 libzstd1 \
  liblz4-1 liblzma5 libgcrypt20 libgpg-error0 >&2)
for d in "$root"/debs/*.deb; do dpkg -x "$d" "$root/fs"; done
loader=$(ls "$root"/fs/usr/lib64/ld-linux-x86-64.so.2 "$root"/fs/lib64/ld-linux-x86-64.so.2 2>/dev/null | head -n 1 || true)
[ -n "$loader" ] || { echo "redis8.sh: no loader in the unpacked libc6" >&2; exit 1; }
libs="$root/fs/lib/x86_64-linux-gnu:$root/fs/usr/lib/x86_64-linux-gnu"
# The server is the rdb checker under another name (argv[0] decides).
ln -sf "$flavor-check-rdb" "$root/fs/usr/bin/$flavor-server"
for prog in "$flavor-server" "$flavor-cli"; do
  cat > "$root/$prog" <<WRAP
#!/bin/sh
exec "$loader" --library-path "$libs" "$root/fs/usr/bin/$prog" "\$@"
WRAP
  chmod +x "$root/$prog"
done
"$wrapper" --version >&2
echo "$wrapper"
