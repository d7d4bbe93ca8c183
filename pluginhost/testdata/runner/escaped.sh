#!/bin/sh
# Answers and exits, leaving a child that escaped the process group (setsid)
# and holds stdout and stderr open. The FIFO makes sure the child has left
# the group before this script exits.
cat >/dev/null
fifo=$(mktemp -u) && mkfifo "$fifo" || exit 1
setsid sh -c 'echo ready >"$1"; exec sleep 2147483647' sh "$fifo" &
read -r _ <"$fifo"
rm -f "$fifo"
echo "escaped=$!" >&2
printf '%s\n' '{"status":"ok","result":"escaped child"}'
exit 0
