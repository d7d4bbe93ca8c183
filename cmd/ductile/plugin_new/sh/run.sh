#!/bin/sh
# {{.Name}}: the entrypoint (protocol 2). Ductile starts it once per job,
# writes one JSON request on stdin and reads one JSON response from stdout.
# ductile.sh, beside it, is the shell SDK (a copy of Ductile's plugins/lib).
set -u
. "$(dirname "$0")/ductile.sh"

req=$(cat)
# The request is one line of compact JSON (protocol, job_id, command,
# config, state, context, event, in that order): a regex is enough for flat
# string fields; use jq for more.
command=$(printf '%s' "$req" | sed 's/"config":.*//' | sed -n 's/.*"command":"\([^"]*\)".*/\1/p')
# payload_field KEY is the event's payload.KEY, a string without quotes or
# backslashes (else empty).
payload_field() { printf '%s' "$req" | sed -n "s/.*\"event\":.*\"$1\":\"\([^\"\\\\]*\)\".*/\1/p"; }

case $command in
handle)
	name=$(payload_field name)
	ductile_progress 0.5 "greeting ${name:-world}" handle
	ductile_respond_ok "hello, ${name:-world}"
	;;
*)
	# A command the manifest does not declare: permanent, never retried.
	ductile_respond_error "unknown command '$command'" false
	;;
esac
