#!/bin/sh
# Healthy when the server answers a padlock command (so the module is
# loaded), not merely PING. Set REDISCLI_AUTH when a password is set, and
# PADLOCK_PORT when the server listens elsewhere than 6379.
out=$("${PADLOCK_CLI:-redis-cli}" -p "${PADLOCK_PORT:-6379}" LOCK.INFO padlock:health 2>&1) || exit 1
case "$out" in
  *ERR*|*NOAUTH*|*WRONGPASS*|*LOADING*|*refused*|*denied*) exit 1 ;;
esac
exit 0
