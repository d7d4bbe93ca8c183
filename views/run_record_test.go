package views_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// epochOf is the epoch seconds of the test clock's n-th transaction
// (setup: 2030-01-01 plus one second per transaction).
func epochOf(n int) float64 {
	return float64(time.Date(2030, 1, 1, 0, 0, n, 0, time.UTC).Unix())
}

func (b *testBundle) runJob(t *testing.T, plugin string, maxAttempts int, edit ...func(*commands.Enqueue)) string {
	t.Helper()
	cmd := commands.Enqueue{Plugin: plugin, Command: "poll", SubmittedBy: events.ActorAPI, MaxAttempts: maxAttempts,
		BackoffBase: time.Second, DefaultDedupeTTL: time.Hour, Now: now}
	for _, e := range edit {
		e(&cmd)
	}
	res, err := commands.EnqueueJob(b.ctx, b.l, cmd)
	require.NoError(t, err)
	return res.JobID
}

func (b *testBundle) progress(t *testing.T, id string, attempt int, p float64, stage, message string) {
	t.Helper()
	require.NoError(t, commands.RecordProgress(b.ctx, b.l, commands.Progress{JobID: id, Attempt: attempt,
		Progress: events.Progressed{Progress: &p, Stage: stage, Message: message, Lines: 1}}))
}

func (b *testBundle) export(t *testing.T, id string, attempt int, item events.Exported) string {
	t.Helper()
	stored, _, err := commands.RecordExport(b.ctx, b.l, commands.Export{JobID: id, Attempt: attempt, Item: item})
	require.NoError(t, err)
	return stored.ExportItemID
}

var timedOut = commands.Outcome{Kind: events.OutcomeTimeout, Retryable: true, Error: "timed out after 1m", ExitCode: -1}

// TestRunRecord: a run created with task, trace and idempotency key
// reports progress and an item on its first attempt, which times out; its
// second, run by worker gpu-box (named on its attempt), reports another
// item and times out too, so the run ends timeout
// with a TIMEOUT error naming attempt 2, its two attempts listed, and the
// second attempt's item as its result set. As of a seq before its end it
// was running, with the progress and the items made by then and no result
// set.
func TestRunRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.runJob(t, "fetch", 2, func(c *commands.Enqueue) { c.TaskID, c.TraceID, c.IdempotencyKey = "task-1", "trace-1", "key-1" }) // tx 1
	b.start(t, id)                                                                                                                    // 2
	b.progress(t, id, 1, 0.5, "download", "half way")                                                                                 // 3
	first := b.export(t, id, 1, events.Exported{Type: events.ExportText, Text: "partial"})                                            // 4
	mid := b.mark(t)
	b.complete(t, id, 1, timedOut) // 5
	_, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: now.Add(time.Hour),
		Worker: &events.Worker{Name: "gpu-box", PID: 5100}}) // 6
	require.NoError(t, err)
	second := b.export(t, id, 2, events.Exported{Type: events.ExportURL, URL: "https://example.com/r"}) // 7
	b.complete(t, id, 2, timedOut)                                                                      // 8

	r, err := views.ReadRunRecord(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, views.RunRecord{
		RunID: id, Kind: "plugin", PluginID: "fetch", EntryID: "poll", Status: views.RunTimeout,
		CreatedAt: epochOf(1), UpdatedAt: epochOf(8), StartedAt: ptr(epochOf(2)), FinishedAt: ptr(epochOf(8)),
		TaskID: ptr("task-1"), TraceID: ptr("trace-1"), IdempotencyKey: ptr("key-1"), RootRunID: id, Attempt: 1,
		Error: &views.RunError{Code: views.RunErrorTimeout, Message: "attempt 2 of 2 failed: timed out after 1m",
			Details: views.RunErrorDetails{Attempt: 2, ExitCode: ptr(-1), Kind: events.OutcomeTimeout, Retryable: true}},
		ResultRefs: []string{second},
		Attempts: []views.RunAttempt{
			{Attempt: 1, Status: views.AttemptTimeout, StartedAt: epochOf(2), FinishedAt: ptr(epochOf(5)), ExitCode: ptr(-1),
				Error: &views.RunError{Code: views.RunErrorTimeout, Message: "timed out after 1m",
					Details: views.RunErrorDetails{Attempt: 1, ExitCode: ptr(-1), Kind: events.OutcomeTimeout, Retryable: true}}},
			{Attempt: 2, Status: views.AttemptTimeout, StartedAt: epochOf(6), FinishedAt: ptr(epochOf(8)), ExitCode: ptr(-1),
				Worker: &events.Worker{Name: "gpu-box", PID: 5100},
				Error: &views.RunError{Code: views.RunErrorTimeout, Message: "timed out after 1m",
					Details: views.RunErrorDetails{Attempt: 2, ExitCode: ptr(-1), Kind: events.OutcomeTimeout, Retryable: true}}},
		},
		ExportsCount: 2, Seq: r.Seq,
	}, r)
	require.Equal(t, b.mark(t), r.Seq)
	require.Equal(t, []string{"run_id", "kind", "plugin_id", "entry_id", "status", "created_at", "updated_at", "started_at", "finished_at",
		"task_id", "trace_id", "idempotency_key", "root_run_id", "parent_run_id", "attempt", "progress", "stage", "message",
		"cancel_requested", "cancel_reason", "cancel_requested_at", "error", "result_refs", "attempts", "exports_count", "seq"}, jsonKeys(t, r))

	then, err := views.ReadRunRecordAt(b.ctx, b.l, id, mid)
	require.NoError(t, err)
	require.Equal(t, views.RunRunning, then.Status)
	require.Equal(t, 0.5, *then.Progress)
	require.Equal(t, "download", *then.Stage)
	require.Equal(t, "half way", *then.Message)
	require.Equal(t, 1, then.ExportsCount)
	require.Empty(t, then.ResultRefs, "result_refs only once terminal")
	require.Nil(t, then.Error)
	require.Nil(t, then.FinishedAt)
	require.Equal(t, mid, then.Seq)

	b.project(t)
	tree, err := views.ReadJobTreeAt(b.ctx, b.l, id, views.Cut{Seq: mid}, 10)
	require.NoError(t, err)
	require.Equal(t, []string{first}, tree.Jobs[0].Exports)
	require.Equal(t, 0.5, *tree.Jobs[0].Progress.Progress)

	_, err = views.ReadRunRecord(b.ctx, b.l, "no-such-run")
	require.ErrorIs(t, err, views.ErrJobNotFound)
	_, err = views.ReadRunRecordAt(b.ctx, b.l, id, 0)
	require.ErrorIs(t, err, views.ErrJobNotFound, "before it was created")
}

func ptr[T any](v T) *T { return &v }

// TestRunStatuses: every way a run ends, and the two-phase cancel, as the
// record shows them: status, error code, cancel fields, result_refs.
func TestRunStatuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	read := func(id string) views.RunRecord {
		r, err := views.ReadRunRecord(b.ctx, b.l, id)
		require.NoError(t, err)
		return r
	}

	queued := b.runJob(t, "echo", 1)
	require.Equal(t, views.RunQueued, read(queued).Status)
	require.Nil(t, read(queued).StartedAt)
	b.cancel(t, queued, "not needed")
	r := read(queued)
	require.Equal(t, views.RunCanceled, r.Status)
	require.True(t, r.CancelRequested)
	require.Equal(t, "not needed", *r.CancelReason)
	require.Equal(t, views.RunErrorCanceled, r.Error.Code)
	require.NotNil(t, r.FinishedAt)

	succeeded := b.runJob(t, "echo", 1)
	b.start(t, succeeded)
	require.Equal(t, views.RunRunning, read(succeeded).Status)
	item := b.export(t, succeeded, 1, events.Exported{Type: events.ExportText, Text: "answer"})
	require.Empty(t, read(succeeded).ResultRefs)
	b.complete(t, succeeded, 1, ok)
	r = read(succeeded)
	require.Equal(t, views.RunSucceeded, r.Status)
	require.Nil(t, r.Error)
	require.Equal(t, []string{item}, r.ResultRefs)
	require.Equal(t, views.AttemptSucceeded, r.Attempts[0].Status)

	failedRun := b.runJob(t, "echo", 1)
	b.start(t, failedRun)
	b.complete(t, failedRun, 1, commands.Outcome{Kind: events.OutcomeError, Error: "bad input", ExitCode: 2})
	r = read(failedRun)
	require.Equal(t, views.RunFailed, r.Status)
	require.Equal(t, views.RunErrorPlugin, r.Error.Code)
	require.Equal(t, views.RunErrorDetails{Attempt: 1, ExitCode: ptr(2), Kind: events.OutcomeError}, r.Error.Details)

	protocol := b.runJob(t, "echo", 1)
	b.start(t, protocol)
	b.complete(t, protocol, 1, commands.Outcome{Kind: events.OutcomeProtocolError, Error: "stdout is not JSON"})
	require.Equal(t, views.RunErrorProtocol, read(protocol).Error.Code)

	canceling := b.runJob(t, "echo", 1)
	b.start(t, canceling)
	b.cancel(t, canceling, "user asked")
	r = read(canceling)
	require.Equal(t, views.RunCancelRequested, r.Status)
	require.True(t, r.CancelRequested)
	require.Equal(t, "user asked", *r.CancelReason)
	require.NotNil(t, r.CancelRequestedAt)
	require.Nil(t, r.FinishedAt)
	b.complete(t, canceling, 1, commands.Outcome{Kind: events.OutcomeError, Error: "exit 143", ExitCode: 143, Retryable: true})
	r = read(canceling)
	require.Equal(t, views.RunCanceled, r.Status, "a plugin that exits after a cancel request ends canceled, never failed")
	require.Equal(t, views.RunErrorCanceled, r.Error.Code)

	lost := b.runJob(t, "echo", 1)
	b.start(t, lost)
	_, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: lost, Now: now})
	require.NoError(t, err)
	r = read(lost)
	require.Equal(t, views.RunFailed, r.Status)
	require.Equal(t, views.RunErrorLost, r.Error.Code)
	require.Equal(t, views.AttemptLost, r.Attempts[0].Status)
}

// TestRunChain: a retry of a run is a new run whose parent is the run and
// whose root is the chain's first; attempt counts along the chain.
func TestRunChain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	chain := []string{b.runJob(t, "echo", 1)}
	for range 2 {
		last := chain[len(chain)-1]
		b.start(t, last)
		b.complete(t, last, 1, commands.Outcome{Kind: events.OutcomeError, Error: "boom", ExitCode: 1})
		res, err := commands.RetryJob(b.ctx, b.l, commands.Retry{JobID: last, MaxAttempts: 1, Now: now})
		require.NoError(t, err)
		chain = append(chain, res.JobID)
	}
	for i, id := range chain {
		r, err := views.ReadRunRecord(b.ctx, b.l, id)
		require.NoError(t, err)
		require.Equal(t, chain[0], r.RootRunID)
		require.Equal(t, i+1, r.Attempt)
		if i == 0 {
			require.Nil(t, r.ParentRunID)
		} else {
			require.Equal(t, chain[i-1], *r.ParentRunID)
		}
	}
}

// TestRunExports pages through a run's items with a cursor (the item
// number): next_after is the last item's number while more follow, "" at
// the end; each item says its run and when it was made; a bad cursor is
// ErrBadCursor, an unknown run ErrJobNotFound.
func TestRunExports(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.runJob(t, "echo", 1)
	b.start(t, id)
	for i := range 4 {
		b.export(t, id, 1, events.Exported{Type: events.ExportText, Text: fmt.Sprint("item ", i+1)})
	}
	b.export(t, id, 1, events.Exported{Type: events.ExportBinary, Binary: []byte{0, 1, 2}, MIME: "application/octet-stream", Metadata: json.RawMessage(`{"k":1}`)})

	var got []string
	after := ""
	for page := 0; ; page++ {
		items, next, err := views.RunExports(b.ctx, b.l, id, after, 2)
		require.NoError(t, err)
		for _, it := range items {
			require.Equal(t, id, it.RunID)
			require.NotZero(t, it.CreatedAt)
			got = append(got, it.ExportItemID)
		}
		if next == "" {
			require.Equal(t, 2, page)
			break
		}
		require.Equal(t, fmt.Sprint(events.ExportItemNumber(items[len(items)-1].ExportItemID)), next)
		after = next
	}
	require.Equal(t, []string{id + ":1", id + ":2", id + ":3", id + ":4", id + ":5"}, got)

	items, next, err := views.RunExports(b.ctx, b.l, id, id+":4", 0)
	require.NoError(t, err, "an export item id is a cursor too")
	require.Empty(t, next)
	require.Len(t, items, 1)
	js, err := json.Marshal(items[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"export_item_id":"`+id+`:5","run_id":"`+id+`","type":"binary","created_at":`+fmt.Sprint(items[0].CreatedAt)+
		`,"attempt":1,"binary":"AAEC","mime":"application/octet-stream","metadata":{"k":1},"seq":`+fmt.Sprint(items[0].Seq)+`}`, string(js))

	items, next, err = views.RunExports(b.ctx, b.l, id, "5", 10)
	require.NoError(t, err)
	require.Empty(t, items)
	require.Empty(t, next)

	_, _, err = views.RunExports(b.ctx, b.l, id, "x", 10)
	require.ErrorIs(t, err, views.ErrBadCursor)
	_, _, err = views.RunExports(b.ctx, b.l, "nope", "", 10)
	require.ErrorIs(t, err, views.ErrJobNotFound)
}

// TestListRuns: runs of two plugins and two tasks, in every status, are
// listed newest first through the runs projection, filtered by task,
// plugin and status (timeout and failed apart), a page at a time with a
// cursor; each listed record is the one ReadRunRecord reads.
func TestListRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	task := func(id string) func(*commands.Enqueue) { return func(c *commands.Enqueue) { c.TaskID = id } }
	var all []string // oldest first
	mk := func(plugin string, edit ...func(*commands.Enqueue)) string {
		id := b.runJob(t, plugin, 1, edit...)
		all = append(all, id)
		return id
	}
	queued := mk("echo", task("t1"))
	running := mk("fetch", task("t1"))
	b.start(t, running)
	b.progress(t, running, 1, 0.3, "", "")
	timeout := mk("echo", task("t2"))
	b.start(t, timeout)
	b.complete(t, timeout, 1, timedOut)
	failedRun := mk("echo")
	b.start(t, failedRun)
	b.complete(t, failedRun, 1, commands.Outcome{Kind: events.OutcomeError, Error: "boom", ExitCode: 1})
	done := mk("fetch", task("t1"))
	b.start(t, done)
	b.export(t, done, 1, events.Exported{Type: events.ExportText, Text: "x"})
	b.complete(t, done, 1, ok)
	b.project(t)

	ids := func(f views.RunFilter) []string {
		t.Helper()
		page, err := views.ListRuns(b.ctx, b.l, f)
		require.NoError(t, err)
		var out []string
		for _, r := range page.Runs {
			want, err := views.ReadRunRecord(b.ctx, b.l, r.RunID)
			require.NoError(t, err)
			require.Equal(t, want, r)
			out = append(out, r.RunID)
		}
		return out
	}
	require.Equal(t, []string{done, failedRun, timeout, running, queued}, ids(views.RunFilter{}))
	require.Equal(t, []string{done, running, queued}, ids(views.RunFilter{TaskID: "t1"}))
	require.Equal(t, []string{done, running}, ids(views.RunFilter{TaskID: "t1", PluginID: "fetch"}))
	require.Equal(t, []string{running}, ids(views.RunFilter{TaskID: "t1", Status: views.RunRunning}))
	require.Equal(t, []string{done, running}, ids(views.RunFilter{PluginID: "fetch"}))
	require.Equal(t, []string{timeout}, ids(views.RunFilter{Status: views.RunTimeout}))
	require.Equal(t, []string{failedRun}, ids(views.RunFilter{Status: views.RunFailed}))
	require.Equal(t, []string{failedRun}, ids(views.RunFilter{Status: views.RunFailed, PluginID: "echo"}))
	require.Empty(t, ids(views.RunFilter{Status: views.RunFailed, PluginID: "fetch"}))
	require.Equal(t, []string{queued}, ids(views.RunFilter{Status: views.RunQueued}))

	var paged []string
	f := views.RunFilter{Limit: 2}
	for {
		page, err := views.ListRuns(b.ctx, b.l, f)
		require.NoError(t, err)
		for _, r := range page.Runs {
			paged = append(paged, r.RunID)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	require.Equal(t, []string{done, failedRun, timeout, running, queued}, paged)

	_, err := views.ListRuns(b.ctx, b.l, views.RunFilter{After: "soon"})
	require.ErrorIs(t, err, views.ErrBadCursor)
	_, err = views.ListRuns(b.ctx, b.l, views.RunFilter{Status: "dead"})
	require.ErrorIs(t, err, views.ErrUnknownRunStatus, "dead is a job's status, not a run's")
}

// Inspect shows what a job reported as a run: its last progress, its
// export items in order and, once it ended, its result set.
func TestInspectShowsProgressAndExports(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.runJob(t, "echo", 1)
	b.start(t, id)
	b.progress(t, id, 1, 0.2, "one", "")
	b.progress(t, id, 1, 0.9, "two", "nearly")
	a := b.export(t, id, 1, events.Exported{Type: events.ExportText, Text: "a"})
	c := b.export(t, id, 1, events.Exported{Type: events.ExportURL, URL: "https://example.com"})
	b.project(t)
	in, err := views.Inspect(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, &events.Progressed{Attempt: 1, Progress: ptr(0.9), Stage: "two", Message: "nearly", Lines: 1}, in.Progress)
	require.Len(t, in.Exports, 2)
	require.Equal(t, a, in.Exports[0].ExportItemID)
	require.Equal(t, "https://example.com", in.Exports[1].URL)
	require.Empty(t, in.ResultRefs)
	b.complete(t, id, 1, ok)
	in, err = views.Inspect(b.ctx, b.l, id)
	require.NoError(t, err)
	require.Equal(t, []string{a, c}, in.ResultRefs)
}
