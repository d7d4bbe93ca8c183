#!/bin/sh
# 40000 bytes on stderr: lines of 1000 bytes (999 x and a newline), so that
# the one from byte 32000 on goes on past the first 32 KiB; then a valid
# response.
cat >/dev/null
i=0
while [ "$i" -lt 40 ]; do
	head -c 999 /dev/zero | tr '\0' 'x' >&2
	echo >&2
	i=$((i + 1))
done
printf '%s\n' '{"status":"ok","result":"straddle"}'
