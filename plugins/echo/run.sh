#!/usr/bin/env bash
# echo: Ductile's bundled diagnostic plugin (protocol v2). Pure bash: no jq,
# no python. See manifest.yaml for the modes (config.mode).
set -u
export LC_ALL=C

# json_get JSON KEY prints the raw JSON value of KEY in the top-level object
# of JSON, and fails when the key is absent. It is a small scanner, not a
# regex, so nested objects, arrays and strings holding escaped quotes or
# braces are skipped correctly. Splitting on '"' first keeps it linear: only
# the text between strings is walked character by character.
json_get() {
	local s=$1 want=$2
	local -a parts
	local part k j c bs pos=0 depth=0 instr=0 keypos=0 pending=0 vstart=-1 str="" key="" v
	IFS='"' read -r -d '' -a parts <<<"$s"
	for ((k = 0; k < ${#parts[@]}; k++)); do
		part=${parts[k]}
		if ((instr)); then
			str+=$part
			bs=${part##*[!\\]}
			if ((${#bs} % 2 == 1)); then
				str+='"' # escaped quote: still inside the string
			else
				instr=0
				if ((depth == 1 && keypos)); then
					key=$str
					keypos=0
				fi
			fi
			pos=$((pos + ${#part} + 1))
			continue
		fi
		for ((j = 0; j < ${#part}; j++)); do
			c=${part:j:1}
			if ((pending)) && [[ $c != [[:space:]] ]]; then
				pending=0
				vstart=$((pos + j))
			fi
			case $c in
			'{' | '[')
				depth=$((depth + 1))
				if ((depth == 1)); then keypos=1; fi
				;;
			'}' | ']' | ',')
				if ((depth == 1 && vstart >= 0)); then
					v=${s:vstart:pos+j-vstart}
					printf '%s' "${v%"${v##*[![:space:]]}"}"
					return 0
				fi
				if [[ $c == ',' ]]; then
					if ((depth == 1)); then keypos=1; fi
				else
					depth=$((depth - 1))
				fi
				;;
			':')
				if ((depth == 1)) && [[ $key == "$want" ]]; then pending=1; fi
				;;
			esac
		done
		# The part ended at an opening quote (unless it is the last part).
		if ((pending)); then
			pending=0
			vstart=$((pos + ${#part}))
		fi
		instr=1
		str=""
		pos=$((pos + ${#part} + 1))
	done
	return 1
}

# json_string strips the quotes of a simple JSON string value.
json_string() {
	local v=$1
	[[ $v =~ ^\"([^\"\\]*)\"$ ]] && printf '%s' "${BASH_REMATCH[1]}"
}

req=$(cat)

protocol=$(json_get "$req" protocol) || protocol=""
if [[ $protocol != 2 ]]; then
	echo "echo: unsupported protocol ${protocol:-<missing>} (this plugin speaks protocol 2)" >&2
	exit 78
fi

command=$(json_string "$(json_get "$req" command)") || command=""
config=$(json_get "$req" config) || config="{}"
mode=$(json_string "$(json_get "$config" mode)") || mode=""
mode=${mode:-ok}

case $command in
poll | handle | health) ;;
*)
	printf '{"status":"error","error":"echo: unknown command","retry":false}\n'
	exit 0
	;;
esac

case $mode in
ok) ;;
error)
	printf '{"status":"error","error":"echo %s: failing on purpose (mode=error)","retry":true,"logs":[{"level":"error","message":"mode=error"}]}\n' "$command"
	exit 0
	;;
hang)
	exec sleep 2147483647
	;;
protocol_error)
	echo "not json"
	exit 0
	;;
crash)
	echo "echo: crashing on purpose (mode=crash)" >&2
	exit 3
	;;
*)
	printf '{"status":"error","error":"echo: unknown mode (want ok, error, hang, protocol_error or crash)","retry":false}\n'
	exit 0
	;;
esac

payload="{}"
if event=$(json_get "$req" event) && p=$(json_get "$event" payload) && [[ $p == \{* ]]; then
	payload=$p
fi

runs=1
if state=$(json_get "$req" state) && prev=$(json_get "$state" runs) && [[ $prev =~ ^[0-9]{1,15}$ ]]; then
	runs=$((10#$prev + 1))
fi

printf '{"status":"ok","result":"echo %s","events":[{"type":"echo.%s","payload":%s}],"state_updates":{"last_command":"%s","runs":%d},"logs":[{"level":"info","message":"echo %s run %d"}]}\n' \
	"$command" "$command" "$payload" "$command" "$runs" "$command" "$runs"
