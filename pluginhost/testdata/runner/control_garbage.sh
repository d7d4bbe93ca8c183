#!/bin/sh
# Writes every kind of bad control line, then one good one, then answers.
cat >/dev/null
{
	echo 'not json'
	echo '[1,2]'
	echo '{"progress":1.5}'
	echo '{"progress":"half"}'
	echo '{"nothing":"known"}'
	echo '{"export":{"type":"pdf","text":"x"}}'
	echo '{"export":{"type":"url"}}'
	echo '{"export":{"type":"binary","binary":"not base64!"}}'
	echo '{"export":{"type":"text","text":"x","metadata":[1]}}'
	echo '{"progress":0.1'
	head -c 1100000 /dev/zero | tr '\0' x
	echo
	echo '{"progress":0.9,"message":"still heard"}'
} >&3
printf '%s\n' '{"status":"ok","result":"garbage written"}'
