#!/bin/sh
# reporter: reports on its control channel, fd 3 (see manifest.yaml).
req=$(cat)
dir=$(printf '%s' "$req" | sed -n 's/.*"config":{[^}]*"dir":"\([^"]*\)".*/\1/p')
job=$(printf '%s' "$req" | sed -n 's/^{"protocol":2,"job_id":"\([^"]*\)".*/\1/p')
command=$(printf '%s' "$req" | sed -n 's/.*"command":"\([^"]*\)".*/\1/p')

# export TEXT writes one text export item.
export_text() {
	printf '{"export":{"type":"text","text":"%s","mime":"text/plain"}}\n' "$1" >&3
}

# await NAME waits for config.dir/NAME; it fails the run after 60s or once
# config.dir is gone.
await() {
	i=0
	while [ ! -e "$dir/$1" ] && [ -d "$dir" ] && [ "$i" -lt 1200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	if [ ! -e "$dir/$1" ]; then
		printf '{"status":"error","error":"reporter: %s never opened","retry":false}\n' "$1"
		exit 0
	fi
}

case $command in
flood)
	awk 'BEGIN { for (i = 1; i <= 1000; i++) printf "{\"progress\":%.3f,\"stage\":\"flood\",\"message\":\"line %d\"}\n", i / 1000, i }' >&3
	export_text "flood $job"
	;;
trickle)
	i=1
	while [ "$i" -le 1000 ]; do
		printf '{"progress":%d.%03d}\n' $((i / 1000)) $((i % 1000)) >&3
		if [ $((i % 50)) -eq 0 ]; then sleep 0.1; fi
		i=$((i + 1))
	done
	export_text "trickle $job"
	;;
burst)
	awk 'BEGIN { for (i = 1; i <= 100; i++) printf "{\"export\":{\"type\":\"text\",\"text\":\"burst %d\"}}\n", i }' >&3
	;;
refusals)
	printf '%s\n' 'not json' >&3
	printf '{"export":{"type":"binary","binary":"%s"}}\n' "$(head -c 70000 /dev/zero | base64 | tr -d '\n')" >&3
	printf '%s\n' '{"progress":1.5}' >&3
	printf '%s\n' '{"export":{"type":"carrier-pigeon","text":"x"}}' >&3
	export_text "the one good item"
	printf '%s\n' '{"progress":0.75,"stage":"after refusals"}' >&3
	;;
gated)
	export_text "item 1"
	export_text "item 2"
	await gate1
	export_text "item 3"
	export_text "item 4"
	export_text "item 5"
	await gate2
	;;
deaf)
	trap '' TERM
	echo $$ >"$dir/pids"
	export_text "deaf $job"
	await gate
	;;
crashgap)
	echo $$ >"$dir/pids"
	export_text "before $job"
	await gate
	;;
*)
	printf '{"status":"error","error":"reporter: unknown command %s","retry":false}\n' "$command"
	exit 0
	;;
esac
printf '{"status":"ok","result":"reporter %s done"}\n' "$command"
