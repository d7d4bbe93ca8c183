#!/bin/sh
cat >/dev/null
printf '%s\n%s\n' '{"status":"ok","result":"a"}' '{"status":"ok","result":"b"}'
