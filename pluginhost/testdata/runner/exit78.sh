#!/bin/sh
# EX_CONFIG: a configuration error, never retried.
cat >/dev/null
echo "missing api key" >&2
exit 78
