#!/bin/sh
# Closes its control channel at once, then answers.
exec 3>&-
cat >/dev/null
printf '%s\n' '{"status":"ok","result":"closed fd 3"}'
