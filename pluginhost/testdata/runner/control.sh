#!/bin/sh
# Reports on its control channel (fd 3): two progress lines, a stage, three
# export items, a last progress line without its newline; then answers.
cat >/dev/null
printf '%s\n' '{"progress":0.25,"message":"a quarter","stage":"download"}' >&3
printf '%s\n' '{"progress":0.5}' >&3
printf '\n' >&3
printf '%s\n' '{"stage":"upload","unknown":"ignored beside known keys"}' >&3
printf '%s\n' '{"export":{"type":"text","text":"hello \"world\"","description":"a greeting","metadata":{"lang":"en"}}}' >&3
printf '%s\n' '{"export":{"type":"url","url":"https://example.com/r","mime":"text/html"}}' >&3
printf '%s\n' '{"export":{"type":"binary","binary":"AAEC","mime":"application/octet-stream"}}' >&3
printf '%s' '{"progress":1}' >&3
printf '%s\n' '{"status":"ok","result":"reported"}'
