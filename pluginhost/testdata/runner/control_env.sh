#!/bin/sh
# Answers with what its environment says of the control channel, and
# whether fd 3 is open for writing.
cat >/dev/null
open=no
if { true >&3; } 2>/dev/null; then open=yes; fi
printf '{"status":"ok","result":"fd=%s run=%s trace=%s open=%s"}\n' "${DUCTILE_CONTROL_FD-unset}" "${DUCTILE_RUN_ID-unset}" "${DUCTILE_TRACE_ID-unset}" "$open"
