#!/bin/sh
# misbehave: fails as config.mode says (see manifest.yaml).
req=$(cat)
mode=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"mode":"\([a-z0-9]*\)".*/\1/p')
case $mode in
exit78)
	echo "misbehave: bad config" >&2
	exit 78
	;;
noretry)
	printf '%s\n' '{"status":"error","error":"misbehave: permanent failure","retry":false}'
	;;
bigout)
	head -c 11534336 /dev/zero | tr '\0' o
	;;
bigerr)
	head -c 40000 /dev/zero | tr '\0' b >&2
	head -c 20000 /dev/zero | tr '\0' m >&2
	head -c 40000 /dev/zero | tr '\0' z >&2
	printf '%s\n' '{"status":"ok","result":"misbehave: noisy"}'
	;;
*)
	printf '{"status":"error","error":"misbehave: unknown mode %s","retry":false}\n' "$mode"
	;;
esac
