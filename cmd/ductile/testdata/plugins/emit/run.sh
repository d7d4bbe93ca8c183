#!/bin/sh
# emit: answers ok with an emit.done event carrying its payload (see manifest.yaml).
req=$(cat)
p=$(printf '%s' "$req" | sed -n 's/.*"event":{[^}]*"payload":\({[^{}]*}\).*/\1/p')
[ -n "$p" ] || p='{}'
printf '{"status":"ok","result":"emitted","events":[{"type":"emit.done","payload":%s}]}\n' "$p"
