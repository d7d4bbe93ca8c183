#!/bin/sh
# A successful run with every response field.
cat >/dev/null
printf '%s\n' '{"status":"ok","result":"done","events":[{"type":"t.done","payload":{"n":1},"dedupe_key":"k1"}],"state_updates":{"cursor":"abc"},"logs":[{"level":"info","message":"hi"}]}'
