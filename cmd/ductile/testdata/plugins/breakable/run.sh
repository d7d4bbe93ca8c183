#!/bin/sh
# breakable: fails while config.dir/broken exists (see manifest.yaml).
set -eu
req=$(cat)
dir=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"dir":"\([^"]*\)".*/\1/p')
echo run >>"$dir/runs"
if [ -e "$dir/broken" ]; then
	printf '%s\n' '{"status":"error","error":"breakable: upstream is down"}'
else
	printf '%s\n' '{"status":"ok","result":"breakable: ok"}'
fi
