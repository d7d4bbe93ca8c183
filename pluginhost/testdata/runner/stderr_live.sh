#!/bin/sh
# Writes a line to stderr, then waits for a line on the FIFO named by its
# config ("fifo") before writing a second, unfinished line and answering.
req=$(cat)
fifo=$(printf '%s' "$req" | sed -n 's/.*"fifo":"\([^"]*\)".*/\1/p')
echo "waiting for the test" >&2
read line < "$fifo"
printf 'released by %s, no newline' "$line" >&2
printf '%s\n' '{"status":"ok","result":"released"}'
