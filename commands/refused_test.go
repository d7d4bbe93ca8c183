package commands_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Given a running job on its first of four attempts, when its completion
// is replaced by Refused, then the attempt fails, not retryably, with the
// ledger's reason and none of the plugin's output, and the job is dead: a
// completion the ledger refuses must end the job, not keep it running.
func TestRefusedCompletionEndsTheJobWithoutTheOutput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("j1", withKey("k")).started(1).events()...)
	mark := b.mark(t)
	out := outOK
	out.Response = raw(`{"status":"ok","events":[{"type":"x","payload":[[[]]]}]}`)
	out.Stderr, out.StateUpdates = "some stderr", raw(`{"k":1}`)
	cmd := commands.Complete{JobID: "j1", Attempt: 1, Outcome: out, Now: now,
		Facts: []commands.FactRule{{FactType: "f", View: "mirror_object"}}, Children: []commands.Enqueue{child("greet")}}

	refusal := fmt.Errorf("append event 0 (job/j1 job.succeeded): %w", errors.New("CHECK constraint failed: json_valid(data)"))
	res, err := commands.CompleteJob(b.ctx, b.l, cmd.Refused(refusal))
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, res.Status)
	require.Equal(t, events.OutcomeRefused, res.Kind)
	reason := "the ledger refused to record the attempt's outcome (ok): append event 0 (job/j1 job.succeeded): CHECK constraint failed: json_valid(data); it is recorded without the plugin's output"
	require.Equal(t, reason, res.Error)
	requireEvents(t, []want{
		{Stream: "job/j1", Version: 3, Type: events.JobFailed, Data: `{"attempt":1,"error":` + quote(reason) + `,"kind":"refused","retryable":false,"exit_code":0,"duration_ms":2000}`},
		{Stream: "job/j1", Version: 4, Type: events.JobDead, Data: `{"attempt":1,"reason":` + quote("not retryable: "+reason) + `}`},
		{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased, Data: `{"job_id":"j1","status":"dead","completed_at":"` + at(0) + `"}`},
	}, b.since(t, mark))
}

// Which refusals end a job: the ledger refusing the content does; the
// ledger unable to write for now (closed, no longer durable; SQLite's busy
// is dispatch's TestCompletionIsRetriedWhileTheLedgerIsBusy) or a job that
// moved on does not.
func TestContentRefused(t *testing.T) {
	t.Parallel()
	require.True(t, commands.ContentRefused(errors.New("CHECK constraint failed: json_valid(data)")))
	require.True(t, commands.ContentRefused(fmt.Errorf("route to x poll: %w", commands.ErrInvalidCommand)))
	require.True(t, commands.ContentRefused(fmt.Errorf("append: %w", ledger.ErrInvalidEvent)))
	require.False(t, commands.ContentRefused(nil))
	require.False(t, commands.ContentRefused(fmt.Errorf("complete job: %w", ledger.ErrClosed)))
	require.False(t, commands.ContentRefused(fmt.Errorf("complete job: %w", ledger.ErrNotDurable)))
	require.False(t, commands.ContentRefused(&commands.TransitionError{JobID: "j", Status: "dead", Action: "complete an attempt"}))

}

func quote(s string) string { return fmt.Sprintf("%q", s) }
