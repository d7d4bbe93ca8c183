#!/bin/sh
# Returns the request it received as state_updates; reports cwd and PATH on stderr.
req=$(cat)
printf '{"status":"ok","result":"request","state_updates":%s}\n' "$req"
printf 'cwd=%s\nPATH=%s\n' "$(pwd)" "$PATH" >&2
