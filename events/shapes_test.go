package events_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// The stored shapes of events are pinned: a renamed or retyped field would
// leave the events already on users' disks unread.
func TestAttemptEndedShape(t *testing.T) {
	b, err := json.Marshal(events.AttemptEnded{
		Attempt: 2, Error: "stdout exceeded 10485760 bytes; plugin killed", Kind: events.OutcomeProtocolError, Retryable: true,
		ExitCode: -1, DurationMS: 40, Stdout: "o\n[ductile: 9 bytes left out here; 11 bytes in all]\no", StdoutBytes: 11,
		Stderr: "e\n[ductile: 1 bytes left out here; 3 bytes in all]\ne", StderrTruncated: true, StderrBytes: 3,
	})
	require.NoError(t, err)
	require.Equal(t, `{"attempt":2,"error":"stdout exceeded 10485760 bytes; plugin killed","kind":"protocol_error","retryable":true,"exit_code":-1,"duration_ms":40,`+
		`"stdout":"o\n[ductile: 9 bytes left out here; 11 bytes in all]\no","stdout_bytes":11,`+
		`"stderr":"e\n[ductile: 1 bytes left out here; 3 bytes in all]\ne","stderr_truncated":true,"stderr_bytes":3}`, string(b))

	// An ordinary attempt's end is unchanged by the excerpt fields.
	b, err = json.Marshal(events.AttemptEnded{Attempt: 1, Kind: events.OutcomeOK, DurationMS: 3, Response: json.RawMessage(`{"status":"ok"}`), Stderr: "hi\n"})
	require.NoError(t, err)
	require.Equal(t, `{"attempt":1,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":3,"response":{"status":"ok"},"stderr":"hi\n"}`, string(b))
}

func TestStartedShape(t *testing.T) {
	b, err := json.Marshal(events.Started{Attempt: 2, DeadlineAt: "2026-11-28T12:00:00Z", PID: 4100,
		Plugin: &events.PluginProcess{PGID: 4242, StartTicks: 987654, BootID: "0e1f6c2a-5b8e-4f51-9d37-2f1b0c9a7e11"}})
	require.NoError(t, err)
	require.Equal(t, `{"attempt":2,"deadline_at":"2026-11-28T12:00:00Z","pid":4100,"plugin":{"pgid":4242,"start_ticks":987654,"boot_id":"0e1f6c2a-5b8e-4f51-9d37-2f1b0c9a7e11"}}`, string(b))
	// Without a plugin process (an in-process step; events before it), as before.
	b, err = json.Marshal(events.Started{Attempt: 1, DeadlineAt: "2026-11-28T12:00:00Z", PID: 4100})
	require.NoError(t, err)
	require.Equal(t, `{"attempt":1,"deadline_at":"2026-11-28T12:00:00Z","pid":4100}`, string(b))
}
