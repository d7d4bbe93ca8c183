#!/bin/sh
# Never reads stdin, and leaves a child that escaped the process group
# (setsid) holding it open (and nothing else): a request larger than the
# pipe buffer can then never be written to its end. A background command
# gets /dev/null as its stdin: the real one goes through fd 4. The FIFO
# makes sure the child has left the group before this script exits.
exec 4<&0
fifo=$(mktemp -u) && mkfifo "$fifo" || exit 1
setsid sh -c 'echo ready >"$1"; exec sleep 2147483647' sh "$fifo" <&4 >/dev/null 2>&1 3>&- 4<&- &
read -r _ <"$fifo"
rm -f "$fifo"
echo "escaped=$!" >&2
printf '%s\n' '{"status":"ok","result":"stdin held"}'
