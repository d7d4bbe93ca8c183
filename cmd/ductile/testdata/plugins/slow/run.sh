#!/bin/sh
# slow: answers ok after config.sleep seconds, or once config.dir/release
# exists (see manifest.yaml).
req=$(cat)
dir=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"dir":"\([^"]*\)".*/\1/p')
if [ -n "$dir" ]; then
	i=0
	while [ ! -e "$dir/release" ] && [ -d "$dir" ] && [ "$i" -lt 1200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	if [ ! -e "$dir/release" ]; then
		printf '%s\n' '{"status":"error","error":"slow: never released","retry":false}'
		exit 0
	fi
else
	s=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"sleep":"\([0-9.]*\)".*/\1/p')
	sleep "${s:-0.3}"
fi
printf '%s\n' '{"status":"ok","result":"slow: done"}'
