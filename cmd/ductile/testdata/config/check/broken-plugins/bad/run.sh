#!/bin/sh
# sink: reads its request and answers ok (see manifest.yaml).
cat >/dev/null
printf '%s\n' '{"status":"ok","result":"sunk"}'
