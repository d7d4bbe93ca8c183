package main_test

// End-to-end tests of ductile run: the run resource on the command line,
// with and without a daemon.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// runRecordView is the part of a RunRecord the tests read.
type runRecordView struct {
	RunID        string   `json:"run_id"`
	Kind         string   `json:"kind"`
	PluginID     string   `json:"plugin_id"`
	EntryID      string   `json:"entry_id"`
	Status       string   `json:"status"`
	TaskID       *string  `json:"task_id"`
	TraceID      *string  `json:"trace_id"`
	RootRunID    string   `json:"root_run_id"`
	ParentRunID  *string  `json:"parent_run_id"`
	Attempt      int      `json:"attempt"`
	Progress     *float64 `json:"progress"`
	ExportsCount int      `json:"exports_count"`
	CancelReason *string  `json:"cancel_reason"`
}

// runCreatedView is run create --json.
type runCreatedView struct {
	RunID    string         `json:"run_id"`
	Status   string         `json:"status"`
	Existing bool           `json:"existing"`
	RanBy    string         `json:"ran_by"`
	DryRun   bool           `json:"dry_run"`
	Run      *runRecordView `json:"run"`
}

const sinkWorld = `
plugin_roots: ["$PLUGINS"]
plugins:
  sink: {retry: {max_attempts: 1}}
  slow: {retry: {max_attempts: 1}, config: {sleep: "0.1"}}
`

// TestRunCreateWithoutADaemon: ductile run create (and its §11.6 form,
// ductile run PLUGIN [COMMAND]) runs the run here when no daemon holds the
// state directory, and prints it once it ended; get and list read it back
// as the API shows it; --dry-run creates nothing.
func TestRunCreateWithoutADaemon(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, sinkWorld)
	var dry runCreatedView
	w.runJSON(0, &dry, "run", "create", "sink", "--args", `{"a":1}`, "--dry-run", "--json")
	require.True(t, dry.DryRun)
	require.Equal(t, "cli", dry.RanBy)
	require.Empty(t, dry.RunID)

	var created runCreatedView
	w.runJSON(0, &created, "run", "create", "sink", "handle", "--args", `{"a":1}`, "--task-id", "t1", "--trace-id", "tr1", "--json")
	require.Equal(t, "succeeded", created.Status)
	require.Equal(t, "cli", created.RanBy)
	require.False(t, created.Existing)
	require.Equal(t, "t1", *created.Run.TaskID)
	require.Equal(t, "tr1", *created.Run.TraceID)

	// The spec's form: ductile run PLUGIN [COMMAND], flags anywhere.
	var short runCreatedView
	w.runJSON(0, &short, "run", "sink", "--json", "handle", "--task-id", "t1")
	require.Equal(t, "succeeded", short.Status)
	require.NotEqual(t, created.RunID, short.RunID)
	r := w.run("run", "sink")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "(sink handle) succeeded")

	var got runRecordView
	w.runJSON(0, &got, "run", "get", created.RunID[24:], "--json")
	require.Equal(t, created.RunID, got.RunID)
	require.Equal(t, "plugin", got.Kind)
	require.Equal(t, "sink", got.PluginID)
	require.Equal(t, "handle", got.EntryID)
	require.Equal(t, created.RunID, got.RootRunID)
	require.Equal(t, 1, got.Attempt)

	var list struct {
		Kind       string          `json:"kind"`
		Runs       []runRecordView `json:"runs"`
		NextCursor string          `json:"next_cursor"`
	}
	w.runJSON(0, &list, "run", "list", "--task-id", "t1", "--limit", "1", "--json")
	require.Equal(t, "plugin", list.Kind)
	require.Len(t, list.Runs, 1)
	require.Equal(t, short.RunID, list.Runs[0].RunID, "newest first")
	next := list.NextCursor
	require.NotEmpty(t, next)
	list.NextCursor = "" // absent on the last page: Unmarshal would keep it
	w.runJSON(0, &list, "run", "list", "--task-id", "t1", "--limit", "1", "--cursor", next, "--json")
	require.Equal(t, created.RunID, list.Runs[0].RunID)
	require.Empty(t, list.NextCursor, "the last page")
	w.runJSON(0, &list, "run", "list", "--task-id", "t1", "--limit", "2", "--json")
	require.Len(t, list.Runs, 2)
	w.runJSON(0, &list, "run", "list", "--kind", "pipeline", "--json")
	require.Equal(t, "pipeline", list.Kind)
	require.Empty(t, list.Runs)
	r = w.run("run", "list")
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, created.RunID[24:])

	for _, bad := range [][]string{
		{"run", "list", "--status", "dead"}, {"run", "list", "--kind", "other"}, {"run", "list", "--cursor", "x"},
		{"run", "create", "sink", "--mode", "later"}, {"run", "create", "sink", "--timeout", "1s"},
		{"run", "create", "sink", "a", "b"}, {"run", "create"},
	} {
		r := w.run(bad...)
		require.Equal(t, 2, r.code, "%v: %s", bad, r)
	}
	r = w.run("run", "get", "ffffffff")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "no run ffffffff")
	r = w.run("run", "nosuch")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, `no plugin named "nosuch"`)
	require.Zero(t, w.run("run").code, "run alone is its help")
}

// TestRunIdempotencyKeyOnTheCLI: the same key answers the run it made
// (existing), and with another plugin is refused with code
// idempotency_conflict.
func TestRunIdempotencyKeyOnTheCLI(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, sinkWorld)
	var first, again runCreatedView
	w.runJSON(0, &first, "run", "create", "sink", "--idempotency-key", "k1", "--json")
	w.runJSON(0, &again, "run", "create", "sink", "--idempotency-key", "k1", "--json")
	require.Equal(t, first.RunID, again.RunID)
	require.True(t, again.Existing)
	require.Equal(t, "succeeded", again.Status)

	r := w.run("run", "create", "slow", "--idempotency-key", "k1", "--json")
	require.Equal(t, 1, r.code, "%s", r)
	var failure struct {
		Error struct{ Code, Message, Hint string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &failure), r.stderr)
	require.Equal(t, "idempotency_conflict", failure.Error.Code)
	require.Contains(t, failure.Error.Hint, "ductile run get "+first.RunID)
}

// TestRunCancelRetryExportOnTheCLI: cancel (with --dry-run first), retry
// along a chain, and export pages, on runs this test makes on the ledger.
func TestRunCancelRetryExportOnTheCLI(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, sinkWorld)
	require.Zero(t, w.run("system", "migrate").code)
	l := openLedger(t, w.state)
	ctx := context.Background()
	queued := enqueueSink(t, l)

	var canceled map[string]any
	w.runJSON(0, &canceled, "run", "cancel", queued, "--dry-run", "--json")
	require.Equal(t, "queued", canceled["status_before"])
	require.Equal(t, true, canceled["dry_run"])
	var rec runRecordView
	w.runJSON(0, &rec, "run", "get", queued, "--json")
	require.Equal(t, "queued", rec.Status, "a dry run changes nothing")
	w.runJSON(0, &canceled, "run", "cancel", queued, "--reason", "not needed", "--json")
	require.Equal(t, "canceled", canceled["status"])
	w.runJSON(0, &rec, "run", "get", queued, "--json")
	require.Equal(t, "not needed", *rec.CancelReason)
	var list struct {
		Runs []runRecordView `json:"runs"`
	}
	w.runJSON(0, &list, "run", "list", "--status", "canceled", "--json")
	require.Len(t, list.Runs, 1, "run list shows the cancel at once")
	require.Equal(t, queued, list.Runs[0].RunID)
	r := w.run("run", "cancel", queued)
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "has ended (canceled)")

	var retried map[string]any
	w.runJSON(0, &retried, "run", "retry", queued, "--dry-run", "--json")
	require.Equal(t, "would enqueue", retried["status"])
	w.runJSON(0, &retried, "run", "retry", queued, "--json")
	second := retried["run_id"].(string)
	require.Equal(t, queued, retried["parent_run_id"])
	w.runJSON(0, &rec, "run", "get", second, "--json")
	require.Equal(t, queued, rec.RootRunID)
	require.Equal(t, queued, *rec.ParentRunID)
	require.Equal(t, 2, rec.Attempt)

	// Export items of a run that ran: pages with a cursor.
	id := enqueueSink(t, l)
	st, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, Now: time.Now()})
	require.NoError(t, err)
	var want []string
	for _, text := range []string{"one", "two", "three"} {
		item, _, err := commands.RecordExport(ctx, l, commands.Export{JobID: id, Attempt: st.Attempt, Item: events.Exported{Type: events.ExportText, Text: text}})
		require.NoError(t, err)
		want = append(want, item.ExportItemID)
	}
	_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: st.Attempt, Now: time.Now(),
		Outcome: commands.Outcome{Kind: events.OutcomeOK, Response: json.RawMessage(`{"status":"ok"}`)}})
	require.NoError(t, err)
	type page struct {
		Items []struct {
			ExportItemID string `json:"export_item_id"`
			Text         string `json:"text"`
		} `json:"items"`
		NextAfter *string `json:"next_after"`
	}
	var p page
	w.runJSON(0, &p, "run", "export", id, "--limit", "2", "--json")
	require.Len(t, p.Items, 2)
	require.NotNil(t, p.NextAfter)
	got := []string{p.Items[0].ExportItemID, p.Items[1].ExportItemID}
	w.runJSON(0, &p, "run", "export", id, "--limit", "2", "--after", *p.NextAfter, "--json")
	require.Len(t, p.Items, 1)
	require.Nil(t, p.NextAfter)
	require.Equal(t, want, append(got, p.Items[0].ExportItemID))
	r = w.run("run", "export", id)
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, `"three"`)
	// job inspect shows them too.
	r = w.run("job", "inspect", id)
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "exports (3):")
	require.Contains(t, r.stdout, want[2])
	require.Equal(t, 2, w.run("run", "export", id, "--after", "bogus").code)
}

// enqueueSink queues a sink handle job on l from this process.
func enqueueSink(t *testing.T, l *ledger.Ledger) string {
	t.Helper()
	res, err := commands.EnqueueJob(context.Background(), l, commands.Enqueue{Plugin: "sink", Command: "handle", SubmittedBy: events.ActorCLI,
		MaxAttempts: 1, BackoffBase: time.Second, Now: time.Now()})
	require.NoError(t, err)
	return res.JobID
}

// TestRunWatch: run watch follows a run from the ledger until it ends,
// one JSON line per change with --json (exit 0 for a success), a line per
// change when piped, and exit 1 for a run that failed.
func TestRunWatch(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, sinkWorld)
	require.Zero(t, w.run("system", "migrate").code)
	l := openLedger(t, w.state)
	ctx := context.Background()

	for _, tc := range []struct {
		args    []string
		outcome events.Outcome
		code    int
	}{
		{[]string{"--json"}, events.OutcomeOK, 0},
		{nil, events.OutcomeError, 1},
	} {
		id := enqueueSink(t, l)
		p := start(t, nil, w.args(append([]string{"run", "watch", id}, tc.args...)...)...)
		p.waitLine(t, 0, func(string) bool { return true }) // it shows the run as it is: queued
		st, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, Now: time.Now()})
		require.NoError(t, err)
		for _, pr := range []float64{0.25, 0.75} {
			require.NoError(t, commands.RecordProgress(ctx, l, commands.Progress{JobID: id, Attempt: st.Attempt,
				Progress: events.Progressed{Attempt: st.Attempt, Progress: &pr, Stage: "work", Message: "step"}}))
		}
		out := commands.Outcome{Kind: tc.outcome, Response: json.RawMessage(`{"status":"ok"}`)}
		if tc.outcome != events.OutcomeOK {
			out = commands.Outcome{Kind: tc.outcome, Error: "boom", ExitCode: 1}
		}
		_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: st.Attempt, Now: time.Now(), Outcome: out})
		require.NoError(t, err)
		require.Equal(t, tc.code, p.wait(t))
		lines, _ := p.snapshot()
		if tc.args != nil { // --json: every change, as GET /runs/stream sends it
			var statuses []string
			var progress []any
			for _, line := range lines {
				var d map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &d), line)
				require.Equal(t, id, d["run_id"])
				statuses = append(statuses, d["status"].(string))
				progress = append(progress, d["progress"])
			}
			require.Equal(t, []string{"queued", "running", "running", "running", "succeeded"}, statuses)
			require.Equal(t, []any{nil, nil, 0.25, 0.75, 0.75}, progress)
			continue
		}
		text := strings.Join(lines, "\n")
		require.Contains(t, text, "75% [work] step")
		require.Contains(t, text, "run "+id+" failed: PLUGIN_ERROR")
	}
}

// TestRunCreateWithADaemon: with a daemon on the state directory, run
// create enqueues for it and answers at once (async, status queued), or
// once the run ended (--mode sync); run watch then follows it to its end.
func TestRunCreateWithADaemon(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, sinkWorld)
	w.startDaemon()
	var sync runCreatedView
	w.runJSON(0, &sync, "run", "create", "slow", "--mode", "sync", "--timeout", "15s", "--json")
	require.Equal(t, "daemon", sync.RanBy)
	require.Equal(t, "succeeded", sync.Status)

	var async runCreatedView
	w.runJSON(0, &async, "run", "slow", "poll", "--task-id", "later", "--json")
	require.Equal(t, "daemon", async.RanBy)
	require.Contains(t, []string{"queued", "running"}, async.Status)
	r := w.run("run", "watch", async.RunID)
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "run "+async.RunID+" succeeded")
	var rec runRecordView
	w.runJSON(0, &rec, "run", "get", async.RunID, "--json")
	require.Equal(t, "succeeded", rec.Status)
	require.Equal(t, "later", *rec.TaskID)
}

// TestRunGetAPipelineRun: a pipeline run is a run of kind pipeline: run get
// shows it with its steps' plugin runs, and run list --kind pipeline (or
// --pipeline) lists it.
func TestRunGetAPipelineRun(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, sinkWorld+"pipelines:\n  - name: relay\n    steps:\n      - uses: sink.handle\n")
	w.startDaemon()
	var started struct {
		RunID string `json:"run_id"`
	}
	w.runJSON(0, &started, "pipeline", "run", "relay", "--wait", "--timeout", "1m", "--json")
	var run struct {
		Kind        string   `json:"kind"`
		RunID       string   `json:"run_id"`
		Pipeline    string   `json:"pipeline"`
		Status      string   `json:"status"`
		ChildRunIDs []string `json:"child_run_ids"`
	}
	w.runJSON(0, &run, "run", "get", started.RunID, "--json")
	require.Equal(t, "pipeline", run.Kind)
	require.Equal(t, "relay", run.Pipeline)
	require.Equal(t, "succeeded", run.Status)
	require.Len(t, run.ChildRunIDs, 1)
	var step runRecordView
	w.runJSON(0, &step, "run", "get", run.ChildRunIDs[0], "--json")
	require.Equal(t, "plugin", step.Kind)
	require.Equal(t, "sink", step.PluginID)
	r := w.run("run", "get", started.RunID)
	require.Equal(t, 0, r.code, "%s", r)
	require.Contains(t, r.stdout, "(pipeline relay)")

	var list struct {
		Kind string `json:"kind"`
		Runs []struct {
			RunID string `json:"run_id"`
			Kind  string `json:"kind"`
		} `json:"runs"`
	}
	w.runJSON(0, &list, "run", "list", "--pipeline", "relay", "--json")
	require.Equal(t, "pipeline", list.Kind)
	require.Len(t, list.Runs, 1)
	require.Equal(t, started.RunID, list.Runs[0].RunID)
	require.Equal(t, "pipeline", list.Runs[0].Kind)
	require.Equal(t, 2, w.run("run", "list", "--kind", "pipeline", "--task-id", "x").code)
}
