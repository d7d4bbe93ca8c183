#!/bin/sh
# 11 MiB on stdout: over the 10 MiB cap.
cat >/dev/null
head -c 11534336 /dev/zero | tr '\0' 'a'
