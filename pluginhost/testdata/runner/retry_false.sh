#!/bin/sh
cat >/dev/null
printf '%s\n' '{"status":"error","error":"permanent","retry":false}'
