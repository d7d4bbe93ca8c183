#!/bin/sh
# 100 KiB on stderr (over the 64 KiB cap), then a valid response.
cat >/dev/null
head -c 102400 /dev/zero | tr '\0' 'e' >&2
printf '%s\n' '{"status":"ok","result":"noisy"}'
