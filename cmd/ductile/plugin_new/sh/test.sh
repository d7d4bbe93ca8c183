#!/bin/sh
# {{.Name}}: runs run.sh through the real protocol (a request on stdin, the
# response on stdout, reports on the control channel, fd 3) and checks what
# it answers. Exit 0 when every check passes.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
control=$(mktemp)
trap 'rm -f "$control"' EXIT
failed=0
fail() {
	echo "FAIL: $*" >&2
	failed=1
}

# call COMMAND PAYLOAD runs the plugin as Ductile does and prints its response.
call() {
	printf '{"protocol":2,"job_id":"test","command":"%s","config":{},"state":{},"context":{},"event":{"type":"test","payload":%s}}\n' "$1" "$2" |
		DUCTILE_CONTROL_FD=3 "$here/run.sh" 3>"$control"
}

out=$(call handle '{"name":"Ada"}')
[ "$out" = '{"status":"ok","result":"hello, Ada"}' ] || fail "handle answered $out"
grep -q '"progress":0.5' "$control" || fail "handle reported no progress: $(cat "$control")"

out=$(call handle '{}')
[ "$out" = '{"status":"ok","result":"hello, world"}' ] || fail "handle without a name answered $out"

out=$(call nosuch '{}')
case $out in
*'"status":"error"'*'"retry":false'*) ;;
*) fail "an unknown command answered $out" ;;
esac

[ "$failed" = 0 ] || exit 1
echo "ok: {{.Name}} answers handle and refuses an unknown command"
