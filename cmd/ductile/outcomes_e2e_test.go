package main_test

// End-to-end tests of outcomes the ledger cannot take as a plugin gave
// them: the job must end, with the real cause, and the ledger stay intact.

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// strictInspect runs job inspect --json and requires strictly valid JSON:
// valid UTF-8 (Go's decoder would quietly replace bad bytes, a strict one
// refuses them) and valid syntax.
func (w *jobWorld) strictInspect(id string) inspectView {
	w.t.Helper()
	r := w.run("job", "inspect", id, "--json")
	require.Equal(w.t, 0, r.code, "job inspect:\n%s", r)
	require.True(w.t, utf8.ValidString(r.stdout), "job inspect --json printed invalid UTF-8")
	require.True(w.t, json.Valid([]byte(r.stdout)))
	var in inspectView
	require.NoError(w.t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
	return in
}

// A plugin whose response nested ~1000 levels deep (in an event payload or
// in state_updates) passed Go's decoder and was refused by the events
// table's json_valid CHECK: the daemon retried the completion every 30 s
// for ever, the job stayed running and --wait never returned. Invalid
// UTF-8 was stored and broke strict readers of job inspect --json. Each is
// now a protocol error, the job ends dead with the reason, and the ledger
// verifies.
func TestPluginOutputTheLedgerCannotStoreEndsTheJob(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  unruly: {retry: {max_attempts: 1}}
`)
	d := w.startDaemon()
	for _, tc := range []struct{ mode, err string }{
		{"deepevent", "protocol error: the response nests objects and arrays more than 512 levels deep: flatten it"},
		{"deepstate", "protocol error: the response nests objects and arrays more than 512 levels deep: flatten it"},
		{"badutf8", "protocol error: stdout is not valid UTF-8 (byte 28 of the response is 0xe9): JSON text must be UTF-8; encode binary data, e.g. as base64"},
	} {
		var run runView
		w.runJSON(1, &run, "plugin", "run", "unruly", "--payload", `{"mode":"`+tc.mode+`"}`, "--wait", "--timeout", "10s", "--json")
		require.Equal(t, "dead", run.Status, tc.mode)
		require.Equal(t, tc.err, run.Error, tc.mode)

		in := w.waitSettled(run.JobID)
		in = w.strictInspect(run.JobID)
		require.Equal(t, []string{"job.enqueued", "job.started", "job.failed", "job.dead"}, in.eventTypes(), tc.mode)
		var dead struct{ Reason string }
		in.event(t, "job.dead", &dead)
		require.Equal(t, "attempt 1 of 1 failed: "+tc.err, dead.Reason)
		require.Len(t, in.Attempts, 1)
		require.Equal(t, "protocol_error", *in.Attempts[0].Kind)
		require.Nil(t, in.Attempts[0].Response, "no response was accepted")
		require.NotNil(t, in.Attempts[0].Stdout, "stdout is kept for debugging, as text")
		require.True(t, utf8.ValidString(*in.Attempts[0].Stdout))
	}
	w.stopDaemon(d)
	w.replayAndVerify()
}

// Any completion the ledger refuses for what it holds (here a trigger
// installed by the test refuses every job.succeeded, as the json_valid
// CHECK refused deep output) used to be retried every 30 s for ever, the
// job left running. Now the attempt is recorded as failed without the
// plugin's output, and the job is dead with the ledger's reason.
func TestCompletionTheLedgerRefusesEndsTheJob(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  unruly: {retry: {max_attempts: 3, backoff_base: 50ms}}
`)
	d := w.startDaemon()
	_, err := execSQL(t, w.state, `CREATE TRIGGER test_refuses_success BEFORE INSERT ON events WHEN NEW.type = 'job.succeeded'
BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END;`, nil)
	require.NoError(t, err)

	var run runView
	w.runJSON(1, &run, "plugin", "run", "unruly", "--payload", `{"mode":"fine"}`, "--wait", "--timeout", "10s", "--json")
	require.Equal(t, "dead", run.Status)
	require.Contains(t, run.Error, "the ledger refused to record the attempt's outcome (ok): ")
	require.Contains(t, run.Error, "refused by a test trigger")
	require.NotContains(t, run.Error, "version conflict", "the trigger's refusal is the cause, not a stale version")

	in := w.waitSettled(run.JobID)
	require.Equal(t, []string{"job.enqueued", "job.started", "job.failed", "job.dead"}, in.eventTypes())
	require.Equal(t, 1, in.Job.Attempt, "refused content is not retried: it would be refused again")
	a := in.Attempts[0]
	require.Equal(t, "refused", *a.Kind)
	require.Nil(t, a.Response, "the refused output is not kept")
	var dead struct{ Reason string }
	in.event(t, "job.dead", &dead)
	require.Equal(t, "not retryable: "+run.Error, dead.Reason)
	line, _ := d.waitLine(t, 0, messageIs("the ledger refused the job's outcome; recording the attempt as failed without the plugin's output"))
	require.Contains(t, line, "refused by a test trigger")

	_, err = execSQL(t, w.state, `DROP TRIGGER test_refuses_success;`, nil)
	require.NoError(t, err)
	w.stopDaemon(d)
	w.replayAndVerify()
}

// The "job is dead" log line of a job whose state update was over the
// limit used to say "error":"": the dispatcher logged the plugin's outcome
// (ok), not the one the completion recorded (state_too_large).
func TestDeadJobLogLineCarriesTheRecordedError(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  unruly: {retry: {max_attempts: 1}}
`)
	d := w.startDaemon()
	var run runView
	w.runJSON(1, &run, "plugin", "run", "unruly", "--payload", `{"mode":"bigstate"}`, "--wait", "--timeout", "10s", "--json")
	require.Equal(t, "dead", run.Status)
	require.Equal(t, "state update exceeds the 1048576 byte limit", run.Error)

	line, _ := d.waitLine(t, 0, messageIs("job is dead"))
	var dead struct {
		JobID string `json:"job_id"`
		Kind  string `json:"kind"`
		Error string `json:"error"`
	}
	require.NoError(t, json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&dead))
	require.Equal(t, run.JobID, dead.JobID)
	require.Equal(t, "state_too_large", dead.Kind)
	require.Equal(t, "state update exceeds the 1048576 byte limit", dead.Error)
	w.stopDaemon(d)
}
