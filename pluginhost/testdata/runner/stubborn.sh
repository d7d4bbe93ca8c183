#!/usr/bin/env bash
# Ignores SIGTERM and forks a child that ignores it too (the ignored
# disposition is inherited) and holds stdout. Only SIGKILL ends them.
trap '' TERM
cat >/dev/null
sleep 2147483647 &
echo "ready child=$!" >&2
wait
