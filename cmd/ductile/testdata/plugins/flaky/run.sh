#!/bin/sh
# flaky: fails its first run, succeeds from the second on (see manifest.yaml).
set -eu
req=$(cat)
dir=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"dir":"\([^"]*\)".*/\1/p')
n=$(cat "$dir/flaky-runs" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$dir/flaky-runs"
if [ "$n" -eq 1 ]; then
	printf '%s\n' '{"status":"error","error":"flaky: first run fails on purpose"}'
else
	printf '{"status":"ok","result":"flaky: ok on run %d"}\n' "$n"
fi
