#!/bin/sh
# Writes 20,000 progress lines on its control channel as fast as it can,
# then answers.
cat >/dev/null
awk 'BEGIN { for (i = 1; i <= 20000; i++) printf "{\"progress\":%.5f,\"message\":\"line %d\"}\n", i / 20000, i }' >&3
printf '%s\n' '{"status":"ok","result":"flooded"}'
