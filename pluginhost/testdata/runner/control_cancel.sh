#!/bin/sh
# Reports progress, then waits; on SIGTERM answers that it stopped on
# request ({"status":"error","error":"canceled"}) and exits 1.
trap 'printf "%s\n" "{\"status\":\"error\",\"error\":\"canceled\"}"; exit 1' TERM
cat >/dev/null
printf '%s\n' '{"progress":0.1,"stage":"waiting"}' >&3
while :; do sleep 1; done
