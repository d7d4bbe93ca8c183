#!/bin/sh
# Answers and exits at once, leaving a background child that holds stdout.
cat >/dev/null
sleep 2147483647 &
printf '%s\n' '{"status":"ok","result":"left a child behind"}'
exit 0
