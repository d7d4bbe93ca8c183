#!/bin/sh
# unruly: answers as the payload's mode says (see manifest.yaml).
req=$(cat)
mode=$(printf '%s' "$req" | sed -n 's/.*"mode":"\([a-z0-9]*\)".*/\1/p')
# deep N: N nested empty arrays.
deep() {
	head -c "$1" /dev/zero | tr '\0' '['
	head -c "$1" /dev/zero | tr '\0' ']'
}
case $mode in
chatty)
	fifo=$(printf '%s' "$req" | sed -n 's/.*"fifo":"\([^"]*\)".*/\1/p')
	echo "chatty: waiting for $fifo" >&2
	read line <"$fifo"
	echo "chatty: released by $line" >&2
	printf 'chatty: a last line without a newline' >&2
	printf '%s\n' '{"status":"ok","result":"chatty: done","logs":[{"level":"info","message":"chatty: logged"}]}'
	;;
deepevent)
	printf '{"status":"ok","result":"deep event","events":[{"type":"unruly.deep","payload":%s}]}\n' "$(deep 1000)"
	;;
deepstate)
	printf '{"status":"ok","result":"deep state","state_updates":{"k":%s}}\n' "$(deep 1000)"
	;;
badutf8)
	printf '{"status":"ok","result":"caf\351"}\n'
	;;
bigstate)
	printf '{"status":"ok","result":"big state","state_updates":{"blob":"'
	head -c 1100000 /dev/zero | tr '\0' x
	printf '"}}\n'
	;;
*)
	printf '{"status":"ok","result":"unruly: %s"}\n' "$mode"
	;;
esac
