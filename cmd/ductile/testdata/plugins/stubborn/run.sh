#!/bin/sh
# stubborn: ignores SIGTERM, and so does its child (see manifest.yaml).
trap '' TERM
req=$(cat)
dir=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"dir":"\([^"]*\)".*/\1/p')
# An ignored signal stays ignored in children: the sleep ignores TERM too.
sleep 2147483647 &
echo "$$ $!" >"$dir/pids.tmp"
mv "$dir/pids.tmp" "$dir/pids"
wait
