#!/bin/sh
# countdown-sh: an example of the Ductile shell SDK (see manifest.yaml).
set -u

# The SDK: a copy beside this file wins, else the bundled plugins/lib.
here=$(dirname "$0")
if [ -f "$here/ductile.sh" ]; then . "$here/ductile.sh"; else . "$here/../../lib/ductile.sh"; fi

req=$(cat)
# The request is one line of compact JSON: a regex is enough for flat
# fields. The payload's value wins over the config's (it comes later in
# the request, and sed keeps the last match).
number() { printf '%s' "$req" | sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p"; }
command=$(printf '%s' "$req" | sed -n 's/.*"command":"\([^"]*\)".*/\1/p')
from=$(number from)
from=${from:-5}
interval=$(number interval)
interval=${interval:-1}

if [ "$command" != count ]; then
	ductile_respond_error "unknown command '$command'" false
	exit 0
fi
if [ "$from" -lt 1 ]; then
	ductile_respond_error "from must be at least 1" false
	exit 0
fi

ductile_progress 0 "counting down from $from" starting
ductile_export_text "counting down from $from" "what this run does" "" "{\"from\":$from}"
tick=0
while [ "$tick" -lt "$from" ]; do
	sleep "$interval" # gets SIGTERM with the plugin's group on a cancel
	if ductile_cancelled; then
		ductile_stage canceled "stopped with $((from - tick)) to go"
		ductile_respond_error canceled false
		exit 0
	fi
	tick=$((tick + 1))
	ductile_progress "$(awk -v t="$tick" -v n="$from" 'BEGIN { printf "%.4f", t / n }')" "$((from - tick)) to go" counting
done
ductile_export_url "https://example.com/countdown/${DUCTILE_RUN_ID:-by-hand}" "where a countdown would be shown" text/html
ductile_respond_ok "counted down from $from"
