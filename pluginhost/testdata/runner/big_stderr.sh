#!/bin/sh
# 110000 bytes on stderr (over twice the 32 KiB excerpt): 40000 b, 30000 m,
# 40000 z; then a valid response.
cat >/dev/null
head -c 40000 /dev/zero | tr '\0' 'b' >&2
head -c 30000 /dev/zero | tr '\0' 'm' >&2
head -c 40000 /dev/zero | tr '\0' 'z' >&2
printf '%s\n' '{"status":"ok","result":"noisy"}'
