#!/bin/sh
cat >/dev/null
echo "not json"
