#!/bin/sh
# slow: answers ok after config.sleep seconds (see manifest.yaml).
req=$(cat)
s=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"sleep":"\([0-9.]*\)".*/\1/p')
sleep "${s:-0.3}"
printf '%s\n' '{"status":"ok","result":"slow: done"}'
