#!/bin/sh
cat >/dev/null
echo "something broke" >&2
exit 3
