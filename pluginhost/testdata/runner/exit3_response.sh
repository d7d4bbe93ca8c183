#!/bin/sh
# A response with status error and a non-zero exit.
cat >/dev/null
printf '%s\n' '{"status":"error","error":"upstream 503","retry":true}'
exit 3
