#!/bin/sh
# 10000 empty lines on stderr (more than a run streams), then a valid response.
cat >/dev/null
head -c 10000 /dev/zero | tr '\0' '\n' >&2
printf '%s\n' '{"status":"ok","result":"blank lines"}'
