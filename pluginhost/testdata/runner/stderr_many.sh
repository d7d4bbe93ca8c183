#!/bin/sh
# 2000 numbered lines on stderr, a line of 10000 bytes among them (28894
# bytes in all: within the 32 KiB excerpt's start), as fast as the shell
# writes them, then a valid response.
cat >/dev/null
i=1
while [ "$i" -le 2000 ]; do
	echo "line $i" >&2
	if [ "$i" -eq 1000 ]; then
		head -c 10000 /dev/zero | tr '\0' 'L' >&2
		echo >&2
	fi
	i=$((i + 1))
done
printf '%s\n' '{"status":"ok","result":"many lines"}'
