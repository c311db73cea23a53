#!/bin/sh
# Starts the server on padlock's config file; arguments are appended to it.
set -e
exec "${PADLOCK_SERVER:-redis-server}" /etc/padlock/padlock.conf "$@"
