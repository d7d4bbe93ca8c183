#!/bin/sh
cat >/dev/null
printf '%s\n' '{"status":"ok"}'
