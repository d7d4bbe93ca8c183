#!/bin/sh
# facts: saves the request, answers ok with a state update (see manifest.yaml).
set -eu
req=$(cat)
dir=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"dir":"\([^"]*\)".*/\1/p')
id=$(printf '%s' "$req" | sed -n 's/^{"protocol":2,"job_id":"\([^"]*\)".*/\1/p')
printf '%s\n' "$req" >"$dir/$id.json"
n=$(cat "$dir/runs" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$dir/runs"
key=$(printf '%s' abcdefghijklmnopqrstuvwxyz | cut -c "$n")
printf '{"status":"ok","result":"recorded run %d","state_updates":{"%s":%d}}\n' "$n" "$key" "$n"
