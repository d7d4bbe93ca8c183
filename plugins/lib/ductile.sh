# ductile.sh: Ductile plugin SDK for POSIX sh (sh, dash, bash, busybox ash).
#
# Source it from a plugin's entrypoint, then report while the run works:
#
#   . "$(dirname "$0")/../lib/ductile.sh"     # or wherever you keep it
#   req=$(cat)
#   ductile_progress 0.5 "half way" "download"
#   ductile_export_text "the answer is 42" "summary"
#   ductile_export_url "https://example.com/report.html" "full report" "text/html"
#   if ductile_cancelled; then ductile_respond_error canceled false; exit 0; fi
#   ductile_respond_ok "done"
#
# Reports go on the control channel, file descriptor $DUCTILE_CONTROL_FD (3),
# one JSON object per line. Run by hand, without that variable or with the
# descriptor closed, the functions write nothing and succeed: the plugin
# works the same. Every string is escaped as JSON (quotes, backslashes,
# control characters); give them UTF-8 text.
#
# Cancellation: sourcing this file traps SIGTERM (what Ductile sends the
# plugin's process group on a cancel or at its timeout) and sets a flag that
# ductile_cancelled reads. A shell runs the trap once its foreground command
# ends; that command gets SIGTERM too, so a loop of short steps stops at
# once. If you set your own TERM trap, call ductile_mark_cancelled in it.
#
# See docs/plugin-development.md ("Progress, export items and cancellation").

_ductile_cancelled=0
_ductile_fd=
case ${DUCTILE_CONTROL_FD-} in
'' | *[!0-9]*) ;;
*)
	# Open for writing? (A plugin run by hand may have nothing there.)
	# (true, not ":": a failed redirection of a special built-in would end
	# the shell.)
	if (eval "true >&$DUCTILE_CONTROL_FD") 2>/dev/null; then
		_ductile_fd=$DUCTILE_CONTROL_FD
	fi
	;;
esac

# ductile_mark_cancelled marks the run as asked to stop (the TERM trap).
ductile_mark_cancelled() { _ductile_cancelled=1; }
trap ductile_mark_cancelled TERM

# ductile_cancelled succeeds once the run has been asked to stop.
ductile_cancelled() { [ "$_ductile_cancelled" = 1 ]; }

# ductile_reporting succeeds when reports reach Ductile (the control
# channel is open).
ductile_reporting() { [ -n "$_ductile_fd" ]; }

# ductile_json_string TEXT prints TEXT as a JSON string, quotes included.
ductile_json_string() {
	# The trailing "." keeps a final newline of TEXT (awk drops it); it is
	# taken off again below.
	printf '%s.' "$1" | LC_ALL=C awk '
	BEGIN {
		for (i = 1; i < 32; i++) esc[sprintf("%c", i)] = sprintf("\\u%04x", i)
		esc["\t"] = "\\t"; esc["\r"] = "\\r"; esc["\b"] = "\\b"; esc["\f"] = "\\f"
		esc["\\"] = "\\\\"; esc["\""] = "\\\""
		printf "\""
	}
	{
		s = $0
		out = ""
		while (match(s, /[\\"\001-\037]/)) {
			out = out substr(s, 1, RSTART - 1) esc[substr(s, RSTART, 1)]
			s = substr(s, RSTART + 1)
		}
		# A record is printed once the next one comes: the last one ends
		# with the sentinel, taken off at the END.
		if (NR > 1) printf "%s\\n", prev
		prev = out s
	}
	END {
		printf "%s\"", substr(prev, 1, length(prev) - 1)
	}'
}

# _ductile_send LINE writes one line to the control channel, if open.
_ductile_send() {
	[ -n "$_ductile_fd" ] || return 0
	eval 'printf "%s\n" "$1" >&'"$_ductile_fd" 2>/dev/null || _ductile_fd=
	return 0
}

# ductile_progress P [MESSAGE [STAGE]] reports progress P, a number from 0
# to 1 (empty: unchanged), with an optional message and stage (empty: not
# given).
ductile_progress() {
	_ductile_line=
	if [ -n "${1-}" ]; then
		case $1 in
		*[!0-9.]* | *.*.* | .)
			echo "ductile_progress: progress must be a number from 0 to 1, not '$1'" >&2
			return 2
			;;
		esac
		# Written the way JSON writes numbers (no leading zeros, no bare ".").
		if ! _ductile_p=$(awk -v p="$1" 'BEGIN { if (p + 0 >= 0 && p + 0 <= 1) printf "%.6g", p + 0; else exit 1 }'); then
			echo "ductile_progress: progress must be a number from 0 to 1, not '$1'" >&2
			return 2
		fi
		_ductile_line="\"progress\":$_ductile_p"
	fi
	if [ -n "${2-}" ]; then
		_ductile_line="${_ductile_line:+$_ductile_line,}\"message\":$(ductile_json_string "$2")"
	fi
	if [ -n "${3-}" ]; then
		_ductile_line="${_ductile_line:+$_ductile_line,}\"stage\":$(ductile_json_string "$3")"
	fi
	if [ -z "$_ductile_line" ]; then
		echo "ductile_progress: give a progress, a message or a stage" >&2
		return 2
	fi
	_ductile_send "{$_ductile_line}"
}

# ductile_stage STAGE [MESSAGE] reports a stage (and a message) without
# changing the progress.
ductile_stage() {
	ductile_progress "" "${2-}" "$1"
}

# _ductile_export TYPE FIELD VALUE [DESCRIPTION [MIME [METADATA]]] exports
# one item; METADATA is a JSON object, written as it is.
_ductile_export() {
	_ductile_item="\"type\":\"$1\",\"$2\":$(ductile_json_string "$3")"
	[ -n "${4-}" ] && _ductile_item="$_ductile_item,\"description\":$(ductile_json_string "$4")"
	[ -n "${5-}" ] && _ductile_item="$_ductile_item,\"mime\":$(ductile_json_string "$5")"
	if [ -n "${6-}" ]; then
		case $6 in
		\{*\}) _ductile_item="$_ductile_item,\"metadata\":$6" ;;
		*)
			echo "ductile: metadata must be a JSON object" >&2
			return 2
			;;
		esac
	fi
	_ductile_send "{\"export\":{$_ductile_item}}"
}

# ductile_export_text TEXT [DESCRIPTION [MIME [METADATA]]] exports a text
# item (at most 256 KiB).
ductile_export_text() { _ductile_export text text "$@"; }

# ductile_export_url URL [DESCRIPTION [MIME [METADATA]]] exports a link to
# an output.
ductile_export_url() { _ductile_export url url "$@"; }

# ductile_export_binary_url URL [DESCRIPTION [MIME [METADATA]]] exports a
# link to binary content.
ductile_export_binary_url() { _ductile_export binary_url binary_url "$@"; }

# ductile_respond_ok [RESULT] prints the response {"status":"ok","result":…}.
ductile_respond_ok() {
	if [ $# -ge 1 ]; then
		printf '{"status":"ok","result":%s}\n' "$(ductile_json_string "$1")"
	else
		printf '{"status":"ok"}\n'
	fi
}

# ductile_respond_error MESSAGE [RETRY] prints the response
# {"status":"error","error":…}; RETRY false marks the error permanent.
ductile_respond_error() {
	if [ "${2-}" = false ]; then
		printf '{"status":"error","error":%s,"retry":false}\n' "$(ductile_json_string "$1")"
	else
		printf '{"status":"error","error":%s}\n' "$(ductile_json_string "$1")"
	fi
}
