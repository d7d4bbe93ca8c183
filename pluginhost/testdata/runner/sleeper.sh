#!/bin/sh
# Waits forever; dies on SIGTERM.
cat >/dev/null
exec sleep 2147483647
