package main_test

// End-to-end proof of the Run protocol (issue 22, spec
// shared/spec/run-protocol.md) on the real binary: POST /runs, GET
// /runs/{id}, cancel, retry, export replay (paged and SSE with
// Last-Event-ID), idempotent creation, a daemon killed between an export
// and the end of its run, a plugin that ignores fd 3. The fixtures are
// testdata/runplugins (reporter: raw fd 3 lines in sh; longpy: the Python
// SDK) and the bundled echo.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// sdkDir is plugins/lib, where the SDKs are; it requires the Python one.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "plugins", "lib"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "ductile.py"))
	require.NoError(t, err, "the Python SDK plugins/lib/ductile.py")
	return dir
}

// TestRunsPythonSDKCancelMidRun: a long Python plugin written with the SDK
// reports progress and three export items, and is canceled while it waits:
// the run shows cancel_requested (reason, time) at once, the plugin sees
// the cancel, the run ends canceled (never failed) with the three items as
// its result_refs, its process group is gone and the items stay listed.
func TestRunsPythonSDKCancelMidRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python SDK's end-to-end test needs it")
	}
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  longpy: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}, timeouts: {handle: 1m}}
`, "PYTHONPATH="+sdkDir(t))
	// Whatever the fixture wrote down is ended, even if the test fails.
	t.Cleanup(func() { killRecordedGroup(filepath.Join(w.scratch, "pids")) })

	c := w.createRun(map[string]any{"plugin_id": "longpy", "entry_id": "work", "args": map[string]any{"n": 1},
		"task_id": "task-py", "trace_id": "trace-py"})
	require.Contains(t, []string{"queued", "running"}, c.Status)
	id := c.RunID
	// An observer of the runs channel, filtered on the server to this run.
	obs := w.openSSE("/runs/stream?run_id="+id, "")

	r := w.waitRun(id, "running with three export items and progress 0.5", func(r runRecord) bool {
		return r.Status == "running" && r.ExportsCount == 3 && r.Progress != nil && *r.Progress == 0.5
	})
	require.Equal(t, "plugin", r.Kind)
	require.Equal(t, "longpy", r.PluginID)
	require.Equal(t, "work", r.EntryID)
	require.Equal(t, "waiting", runsDeref(r.Stage), r.raw)
	require.Equal(t, "task-py", runsDeref(r.TaskID))
	require.Equal(t, "trace-py", runsDeref(r.TraceID))
	require.Equal(t, id, runsDeref(r.RootRunID), "a first run is its own root")
	require.Nil(t, r.ParentRunID)
	require.Equal(t, 1, runsDeref(r.Attempt))
	require.NotNil(t, r.StartedAt)
	require.Nil(t, r.FinishedAt)
	require.False(t, r.CancelRequested)
	require.Empty(t, r.ResultRefs, "result_refs only once terminal: %s", r.raw)

	pids := readPIDs(t, filepath.Join(w.scratch, "pids"), 2)
	leader, child := pids[0], pids[1]
	require.True(t, alive(leader) && alive(child), "the plugin and its child run")
	require.NotEmpty(t, groupMembers(leader), "the plugin leads its process group")

	before := w.allExports(id, 10)
	require.Len(t, before, 3)
	for i, it := range before {
		require.Equal(t, id, it.RunID)
		require.NotEmpty(t, it.ExportItemID)
		require.Positive(t, it.CreatedAt)
		require.Equal(t, "trace-py", it.TraceID, "the run's trace id is on its items (spec §11)")
		require.Equal(t, []string{"text", "url", "binary_url"}[i], it.Type)
	}
	require.Equal(t, "first result", before[0].Text)
	require.Equal(t, "https://example.com/report", before[1].URL)
	require.Equal(t, "https://example.com/blob.bin", before[2].BinaryURL)

	// Cancel: cancel_requested at once, with the reason and when.
	asked := float64(time.Now().UnixNano()) / 1e9
	var cancel struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	code, raw := w.do(http.MethodPost, "/runs/"+id+"/cancel", map[string]any{"reason": "e2e: no longer needed"})
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &cancel), "%s", raw)
	require.Equal(t, id, cancel.RunID)
	require.Equal(t, "cancel_requested", cancel.Status, "a running run asked to cancel: %s", raw)

	// The plugin holds on (until let-go) once it has seen the cancel: the
	// run is cancel_requested meanwhile.
	waitFor(t, waitTimeout, "the plugin to see the cancel (SDK check_cancelled)", func() bool {
		_, err := os.Stat(filepath.Join(w.scratch, "saw-cancel"))
		return err == nil
	})
	r = w.getRun(id)
	require.Equal(t, "cancel_requested", r.Status, r.raw)
	require.True(t, r.CancelRequested)
	require.Equal(t, "e2e: no longer needed", runsDeref(r.CancelReason))
	require.NotNil(t, r.CancelRequestedAt)
	require.InDelta(t, asked, *r.CancelRequestedAt, 5, "cancel_requested_at is when it was asked")
	require.Empty(t, r.ResultRefs, "not terminal yet: %s", r.raw)
	require.Nil(t, r.FinishedAt)

	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "let-go"), nil, 0o644))
	r = w.waitTerminal(id)
	require.Equal(t, "canceled", r.Status, r.raw)
	require.NotNil(t, r.Error, r.raw)
	require.Equal(t, "CANCELED", r.Error.Code, r.raw)
	require.NotNil(t, r.FinishedAt)
	require.True(t, r.CancelRequested)
	require.Equal(t, "e2e: no longer needed", runsDeref(r.CancelReason))
	require.Equal(t, itemIDs(before), r.ResultRefs, "the items made before the cancel are its result set")

	// Its whole process group is gone.
	waitFor(t, waitTimeout, "the plugin's process group to be gone", func() bool {
		return !alive(leader) && !alive(child) && len(groupMembers(leader)) == 0
	}, func() string { return "left: " + mustJSON(groupMembers(leader)) })

	// The items stay listed, unchanged; the ledger went cancel_requested
	// then canceled, never failed.
	require.Equal(t, before, w.allExports(id, 1))
	types := jobEventTypes(t, w.state, id)
	requireTypesInOrder(t, types, events.JobCancelRequested, events.JobCanceled)
	require.NotContains(t, types, events.JobDead)
	require.NotContains(t, types, events.JobFailed)
	require.Equal(t, 3, countOf(types, events.JobExported))

	// The observer saw it go cancel_requested, then canceled, never failed.
	var statuses []string
	for len(statuses) == 0 || statuses[len(statuses)-1] != "canceled" {
		var d runDelta
		ev := obs.next(t, waitTimeout)
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &d), "%s", ev.Data)
		require.Equal(t, id, d.RunID, "the stream is filtered to the run")
		if len(statuses) == 0 || statuses[len(statuses)-1] != d.Status {
			statuses = append(statuses, d.Status)
		}
	}
	requireTypesInOrder(t, statuses, "cancel_requested", "canceled")
	require.NotContains(t, statuses, "failed")

	// Time travel: as of its last stored progress before the cancel, the
	// job was running at 0.5, stage waiting, with its three items.
	var before05 int64
	for _, ev := range jobEvents(t, w.state, id) {
		if ev.Type == events.JobCancelRequested {
			break
		}
		if ev.Type == events.JobProgressed {
			before05 = ev.Seq
		}
	}
	require.Positive(t, before05, "a job.progressed before the cancel")
	then := w.jobAt(id, before05)
	require.Equal(t, "running", then.Status)
	require.NotNil(t, then.Progress)
	require.NotNil(t, then.Progress.Progress)
	require.Equal(t, 0.5, *then.Progress.Progress)
	require.Equal(t, "waiting", then.Progress.Stage)
	require.Equal(t, itemIDs(before), then.Exports)

	// A terminal run is immutable: a second cancel is refused, nothing moves.
	code, raw = w.do(http.MethodPost, "/runs/"+id+"/cancel", map[string]any{"reason": "again"})
	require.GreaterOrEqual(t, code, 400, "%s", raw)
	require.Less(t, code, 500, "%s", raw)
	again := w.getRun(id)
	require.Equal(t, "canceled", again.Status)
	require.Equal(t, "e2e: no longer needed", runsDeref(again.CancelReason))
	require.Equal(t, r.FinishedAt, again.FinishedAt)
}

// TestRunsCancelOfAPluginIgnoringSIGTERM: a plugin that ignores the
// cancel's SIGTERM runs on through the grace period, its run
// cancel_requested; then SIGKILL ends its group and the run ends canceled,
// never failed, its item kept.
func TestRunsCancelOfAPluginIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 2}}
`)
	pidsFile := filepath.Join(w.scratch, "pids")
	t.Cleanup(func() { killRecordedGroup(pidsFile) })
	id := w.createRun(map[string]any{"plugin_id": "reporter", "entry_id": "deaf"}).RunID
	w.waitRun(id, "running with its item", func(r runRecord) bool { return r.Status == "running" && r.ExportsCount == 1 })
	leader := readPIDs(t, pidsFile, 1)[0]

	var cancel struct {
		Status string `json:"status"`
	}
	w.doJSON(http.StatusOK, &cancel, http.MethodPost, "/runs/"+id+"/cancel", map[string]any{"reason": "stop"})
	require.Equal(t, "cancel_requested", cancel.Status)
	asked := time.Now()
	require.True(t, alive(leader), "it ignores SIGTERM")
	r := w.getRun(id)
	require.Equal(t, "cancel_requested", r.Status, "during the grace period: %s", r.raw)

	r = w.waitRunFor(waitTimeout+5*time.Second, id, "terminal", func(r runRecord) bool { return runIsTerminal(r.Status) })
	t.Logf("canceled %v after the request (the grace period, then SIGKILL)", time.Since(asked).Round(time.Millisecond))
	require.Equal(t, "canceled", r.Status, r.raw)
	require.Equal(t, "CANCELED", r.Error.Code, r.raw)
	require.Len(t, r.Attempts, 1, "a canceled run is not retried: %s", r.raw)
	waitFor(t, waitTimeout, "the plugin's group to be gone", func() bool { return len(groupMembers(leader)) == 0 })
	items := w.allExports(id, 10)
	require.Len(t, items, 1)
	require.Equal(t, "deaf "+id, items[0].Text)
	require.Equal(t, itemIDs(items), r.ResultRefs)
}

// TestRunsTimeout: a plugin that outlives its timeout ends timeout (its
// own terminal status, not failed) with error code TIMEOUT.
func TestRunsTimeout(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$PLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  echo: {config: {mode: hang}, timeouts: {poll: 1s}, retry: {max_attempts: 1}}
`)
	id := w.createRun(map[string]any{"plugin_id": "echo", "entry_id": "poll"}).RunID
	w.waitRun(id, "running", func(r runRecord) bool { return r.Status == "running" || runIsTerminal(r.Status) })
	r := w.waitTerminal(id)
	require.Equal(t, "timeout", r.Status, r.raw)
	require.NotNil(t, r.Error, r.raw)
	require.Equal(t, "TIMEOUT", r.Error.Code, r.raw)
	require.Equal(t, 1, r.Error.Details.Attempt, r.raw)
	require.NotNil(t, r.FinishedAt)
	require.NotNil(t, r.StartedAt)
	require.GreaterOrEqual(t, *r.FinishedAt-*r.StartedAt, 0.9, "it ran for its timeout")
	require.False(t, r.CancelRequested)
	require.NotNil(t, r.ResultRefs, "result_refs is a list once terminal: %s", r.raw)
	require.Empty(t, r.ResultRefs)
	require.Len(t, r.Attempts, 1, r.raw)
	require.Equal(t, "timeout", r.Attempts[0].Status, r.raw)

	// Listed under its status.
	var list struct {
		Runs []runRecord `json:"runs"`
	}
	w.doJSON(http.StatusOK, &list, http.MethodGet, "/runs?plugin_id=echo&status=timeout", nil)
	require.Len(t, list.Runs, 1)
	require.Equal(t, id, list.Runs[0].RunID)
	w.doJSON(http.StatusOK, &list, http.MethodGet, "/runs?plugin_id=echo&status=failed", nil)
	require.Empty(t, list.Runs, "a timeout is not a failure")
}

// TestRunsPythonSDKTimeoutIsNotACancel: the SDK answers "canceled" to the
// SIGTERM of a timeout as to a cancel's; the run still ends timeout, with
// error code TIMEOUT, and the items it made are its result set.
func TestRunsPythonSDKTimeoutIsNotACancel(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the Python SDK's end-to-end test needs it")
	}
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  longpy: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}, timeouts: {handle: 2s}}
`, "PYTHONPATH="+sdkDir(t))
	t.Cleanup(func() { killRecordedGroup(filepath.Join(w.scratch, "pids")) })
	id := w.createRun(map[string]any{"plugin_id": "longpy", "entry_id": "work", "args": map[string]any{"linger": false}}).RunID
	r := w.waitTerminal(id)
	require.Equal(t, "timeout", r.Status, r.raw)
	require.Equal(t, "TIMEOUT", r.Error.Code, r.raw)
	require.False(t, r.CancelRequested, "nobody asked to cancel: %s", r.raw)
	_, err := os.Stat(filepath.Join(w.scratch, "saw-cancel"))
	require.NoError(t, err, "the SDK turned the timeout's SIGTERM into RunCancelled")
	items := w.allExports(id, 10)
	require.Len(t, items, 3)
	require.Equal(t, itemIDs(items), r.ResultRefs)
	types := jobEventTypes(t, w.state, id)
	require.NotContains(t, types, events.JobCanceled)
	require.NotContains(t, types, events.JobCancelRequested)
}

// TestRunsRetryChainOfThree: POST /runs/{id}/retry twice makes a chain of
// three runs sharing a root, each the parent of the next, attempts 1, 2, 3.
func TestRunsRetryChainOfThree(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$PLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  breakable: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
`)
	broken := filepath.Join(w.scratch, "broken")
	require.NoError(t, os.WriteFile(broken, nil, 0o644))

	first := w.createRun(map[string]any{"plugin_id": "breakable", "entry_id": "poll", "task_id": "chain"}).RunID
	r1 := w.waitTerminal(first)
	require.Equal(t, "failed", r1.Status, r1.raw)
	require.Equal(t, "PLUGIN_ERROR", r1.Error.Code, r1.raw)
	require.Equal(t, first, runsDeref(r1.RootRunID))
	require.Nil(t, r1.ParentRunID)
	require.Equal(t, 1, runsDeref(r1.Attempt))

	retry := func(id string) string {
		t.Helper()
		var out struct {
			RunID       string `json:"run_id"`
			Status      string `json:"status"`
			ParentRunID string `json:"parent_run_id"`
		}
		code, raw := w.do(http.MethodPost, "/runs/"+id+"/retry", nil)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated, http.StatusAccepted}, code, "%s", raw)
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
		require.NotEmpty(t, out.RunID)
		require.NotEqual(t, id, out.RunID, "a retry is a new run")
		require.Equal(t, id, out.ParentRunID)
		return out.RunID
	}

	second := retry(first)
	r2 := w.waitTerminal(second)
	require.Equal(t, "failed", r2.Status, r2.raw)
	require.Equal(t, first, runsDeref(r2.RootRunID), r2.raw)
	require.Equal(t, first, runsDeref(r2.ParentRunID), r2.raw)
	require.Equal(t, 2, runsDeref(r2.Attempt), r2.raw)
	require.Equal(t, "chain", runsDeref(r2.TaskID), "a retry keeps the task")

	require.NoError(t, os.Remove(broken))
	third := retry(second)
	r3 := w.waitTerminal(third)
	require.Equal(t, "succeeded", r3.Status, r3.raw)
	require.Nil(t, r3.Error)
	require.Equal(t, first, runsDeref(r3.RootRunID), r3.raw)
	require.Equal(t, second, runsDeref(r3.ParentRunID), r3.raw)
	require.Equal(t, 3, runsDeref(r3.Attempt), r3.raw)

	// The earlier runs are unchanged (terminal states are immutable).
	require.Equal(t, "failed", w.getRun(first).Status)
	require.Equal(t, "failed", w.getRun(second).Status)

	// The three are listed by their task.
	var list struct {
		Runs []runRecord `json:"runs"`
	}
	w.doJSON(http.StatusOK, &list, http.MethodGet, "/runs?task_id=chain", nil)
	var ids []string
	for _, r := range list.Runs {
		ids = append(ids, r.RunID)
	}
	require.ElementsMatch(t, []string{first, second, third}, ids)
}

// TestRunsExportReplayWithCursor: a run's export items read back a page of
// one at a time with next_after, and through the SSE export stream cut
// after its first item and resumed with Last-Event-ID after more items
// came: every item once, in order, no gap, no double.
func TestRunsExportReplayWithCursor(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
`)
	// An observer of the runs channel, by task, from before the run exists.
	runs := w.openSSE("/runs/stream?task_id=replay", "")
	id := w.createRun(map[string]any{"plugin_id": "reporter", "entry_id": "gated", "task_id": "replay"}).RunID
	w.waitRun(id, "running with two export items", func(r runRecord) bool { return r.Status == "running" && r.ExportsCount == 2 })

	// It saw the run added; cut it there.
	added := runs.next(t, waitTimeout)
	var d runDelta
	require.NoError(t, json.Unmarshal([]byte(added.Data), &d), "%s", added.Data)
	require.Equal(t, runDelta{Op: "add", RunID: id, Status: "queued", UpdatedAt: d.UpdatedAt}, d)
	require.NotEmpty(t, added.ID)
	runs.close()

	// A live export stream, from the start, kept open.
	live := w.openSSE("/runs/"+id+"/export/stream", "")
	for i := 1; i <= 2; i++ {
		require.Equal(t, fmt.Sprintf("item %d", i), decodeItem(t, live.next(t, waitTimeout)).Text)
	}

	// The stream replays from the ledger; cut it after the first item.
	s := w.openSSE("/runs/"+id+"/export/stream", "")
	ev := s.next(t, waitTimeout)
	first := decodeItem(t, ev)
	require.Equal(t, "item 1", first.Text)
	require.Equal(t, id, first.RunID)
	require.NotEmpty(t, ev.ID, "an export event has an id to resume from")
	s.close()

	// Three more items come while nobody listens.
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate1"), nil, 0o644))
	w.waitRun(id, "running with five export items", func(r runRecord) bool { return r.ExportsCount == 5 })

	// The live stream got them as they came.
	for i := 3; i <= 5; i++ {
		require.Equal(t, fmt.Sprintf("item %d", i), decodeItem(t, live.next(t, waitTimeout)).Text)
	}

	// Resumed: items 2 to 5, each once, in order.
	s = w.openSSE("/runs/"+id+"/export/stream", ev.ID)
	var resumed []string
	lastID := ev.ID
	for i := 2; i <= 5; i++ {
		e := s.next(t, waitTimeout)
		require.NotEqual(t, lastID, e.ID)
		lastID = e.ID
		resumed = append(resumed, decodeItem(t, e).Text)
	}
	require.Equal(t, []string{"item 2", "item 3", "item 4", "item 5"}, resumed)

	// The run ends; the live stream says nothing more of the items (no
	// double), whether it ends or stays open.
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate2"), nil, 0o644))
	r := w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	select {
	case e, ok := <-s.events:
		if ok && e.Data != "" {
			var it exportItem
			if json.Unmarshal([]byte(e.Data), &it) == nil && it.ExportItemID != "" {
				t.Fatalf("a resumed stream sent an item twice or out of place: %s", e.Data)
			}
		}
	case <-time.After(300 * time.Millisecond):
	}
	s.close()

	// The runs channel resumed after the add: the run's changes that
	// followed, each once, in order, to its end.
	runs = w.openSSE("/runs/stream?task_id=replay", added.ID)
	var statuses []string
	seen := map[string]bool{added.ID: true}
	for len(statuses) == 0 || statuses[len(statuses)-1] != "succeeded" {
		ev := runs.next(t, waitTimeout)
		require.False(t, seen[ev.ID], "delta %s sent twice", ev.ID)
		seen[ev.ID] = true
		var d runDelta
		require.NoError(t, json.Unmarshal([]byte(ev.Data), &d), "%s", ev.Data)
		require.Equal(t, id, d.RunID)
		require.Equal(t, "change", d.Op, "%s", ev.Data)
		if len(statuses) == 0 || statuses[len(statuses)-1] != d.Status {
			statuses = append(statuses, d.Status)
		}
	}
	require.Equal(t, []string{"running", "succeeded"}, statuses)

	// Paged, one at a time: the same five, in order, then next_after null.
	all := w.allExports(id, 1)
	var texts []string
	for _, it := range all {
		texts = append(texts, it.Text)
		require.Equal(t, "text", it.Type)
		require.Equal(t, "text/plain", it.MIME)
	}
	require.Equal(t, []string{"item 1", "item 2", "item 3", "item 4", "item 5"}, texts)
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(itemIDs(all)))), 5, "five distinct ids")
	require.Equal(t, first.ExportItemID, all[0].ExportItemID, "the stream and the list name an item alike")
	require.Equal(t, itemIDs(all), r.ResultRefs, "result_refs: the ending attempt's items, in order")

	// A cursor from a page, given again, starts after it.
	p := w.exports(id, "", 2)
	require.NotNil(t, p.NextAfter)
	rest := w.exports(id, *p.NextAfter, 10)
	require.Equal(t, itemIDs(all[2:]), itemIDs(rest.Items))
	require.True(t, rest.NextAfter == nil || *rest.NextAfter == "", "the last page has no next_after")

	// Time travel: as of its second item, the job was running with two.
	var second int64
	for _, ev := range jobEvents(t, w.state, id) {
		if ev.Type == events.JobExported {
			var d events.Exported
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			if d.ExportItemID == all[1].ExportItemID {
				second = ev.Seq
			}
		}
	}
	require.Positive(t, second)
	then := w.jobAt(id, second)
	require.Equal(t, "running", then.Status)
	require.Equal(t, itemIDs(all[:2]), then.Exports)

	// A fresh stream after the end replays all five, once.
	s = w.openSSE("/runs/"+id+"/export/stream", "")
	var replayed []string
	for range 5 {
		replayed = append(replayed, decodeItem(t, s.next(t, waitTimeout)).ExportItemID)
	}
	require.Equal(t, itemIDs(all), replayed)
}

// TestRunsExportSurvivesDaemonSIGKILL: the daemon is killed (SIGKILL)
// after a plugin exported an item and before its run ended; after the
// restart the item is still listed, the run is recovered and runs to its
// end, and its result set is the items of the attempt that ended it.
func TestRunsExportSurvivesDaemonSIGKILL(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 2}}
  echo: {retry: {max_attempts: 2}}
`)
	pidsFile := filepath.Join(w.scratch, "pids")
	t.Cleanup(func() { killRecordedGroup(pidsFile) })
	id := w.createRun(map[string]any{"plugin_id": "reporter", "entry_id": "crashgap"}).RunID
	w.waitRun(id, "running with its export item", func(r runRecord) bool { return r.Status == "running" && r.ExportsCount == 1 })
	before := w.allExports(id, 10)
	require.Len(t, before, 1)
	require.Equal(t, "before "+id, before[0].Text)
	leader := readPIDs(t, pidsFile, 1)[0]
	require.NoError(t, os.Remove(pidsFile))
	t.Cleanup(func() { _ = syscall.Kill(-leader, syscall.SIGKILL) })

	// A run is durable once POST /runs answered: killed right after, the
	// daemon still has it when it comes back.
	accepted := w.createRun(map[string]any{"plugin_id": "echo", "entry_id": "poll", "task_id": "accepted"}).RunID
	require.NoError(t, w.daemon.cmd.Process.Signal(syscall.SIGKILL))
	require.Equal(t, -1, w.daemon.wait(t), "killed")

	w.boot()
	// The recovery ended the old plugin; the run runs again (attempt 2 of
	// its job), exports again and waits for the gate.
	r := w.waitRun(id, "running again with a second item", func(r runRecord) bool {
		return r.Status == "running" && r.ExportsCount == 2
	})
	require.False(t, alive(leader), "the killed daemon's plugin was ended by the recovery")
	require.Empty(t, r.ResultRefs)
	items := w.allExports(id, 1)
	require.Len(t, items, 2)
	require.Equal(t, before[0], items[0], "the item exported before the SIGKILL is kept as it was")
	require.Equal(t, 1, items[0].Attempt)
	require.Equal(t, 2, items[1].Attempt)

	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate"), nil, 0o644))
	r = w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	require.Equal(t, []string{items[1].ExportItemID}, r.ResultRefs, "the result set: the ending attempt's items")
	require.Equal(t, items, w.allExports(id, 10))
	require.NotEmpty(t, r.Attempts, r.raw)
	require.Equal(t, "lost", r.Attempts[0].Status, "the attempt the SIGKILL cut: %s", r.raw)
	require.NotNil(t, r.Attempts[0].Error, r.raw)
	require.Equal(t, "LOST", r.Attempts[0].Error.Code, r.raw)
	types := jobEventTypes(t, w.state, id)
	require.Equal(t, 2, countOf(types, events.JobExported), "%v", types)
	require.Equal(t, "succeeded", w.waitTerminal(accepted).Status, "the run accepted before the SIGKILL")
}

// TestRunsIdempotentCreation: 50 concurrent identical POST /runs with one
// idempotency_key make one run; the key with another plugin or another
// entry is a 409 idempotency_conflict, and makes nothing.
func TestRunsIdempotentCreation(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$PLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  echo: {}
  sink: {}
`)
	body := map[string]any{"plugin_id": "echo", "entry_id": "poll", "args": map[string]any{"k": 1}, "idempotency_key": "idem-e2e-1"}
	const n = 50
	type answer struct {
		code int
		raw  []byte
		err  error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			a := &answers[i]
			a.code, a.raw, a.err = w.call(http.MethodPost, "/runs", body)
		}()
	}
	close(gate)
	wg.Wait()
	ids := map[string]int{}
	fresh := 0
	for _, a := range answers {
		require.NoError(t, a.err)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated, http.StatusAccepted}, a.code, "%s", a.raw)
		var c runCreated
		require.NoError(t, json.Unmarshal(a.raw, &c), "%s", a.raw)
		ids[c.RunID]++
		if !c.Existing {
			fresh++
		}
	}
	require.Len(t, ids, 1, "one run for one key: %v", ids)
	require.Equal(t, 1, fresh, "one answer made it, the others name it as existing")
	var id string
	for k := range ids {
		id = k
	}
	r := w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	require.Equal(t, "idem-e2e-1", runsDeref(r.IdempotencyKey))

	// Another plugin, or another entry, with the same key: 409.
	for _, other := range []map[string]any{
		{"plugin_id": "sink", "entry_id": "handle", "idempotency_key": "idem-e2e-1"},
		{"plugin_id": "echo", "entry_id": "health", "idempotency_key": "idem-e2e-1"},
	} {
		code, raw := w.do(http.MethodPost, "/runs", other)
		require.Equal(t, http.StatusConflict, code, "%v: %s", other, raw)
		var e apiError
		require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
		require.Equal(t, "idempotency_conflict", e.Code, "%s", raw)
		require.NotEmpty(t, e.Message)
	}

	// Exactly one job was ever enqueued.
	var list struct {
		Runs []runRecord `json:"runs"`
	}
	w.doJSON(http.StatusOK, &list, http.MethodGet, "/runs?plugin_id=echo", nil)
	require.Len(t, list.Runs, 1)
	w.doJSON(http.StatusOK, &list, http.MethodGet, "/runs?plugin_id=sink", nil)
	require.Empty(t, list.Runs)
	require.Len(t, w.jobList(), 1)

	// The key holds across a restart: it is in the ledger.
	w.stopDaemon(w.daemon)
	w.boot()
	again := w.createRun(body)
	require.Equal(t, id, again.RunID, "the same key after a restart answers the same run")
	require.True(t, again.Existing)
	require.Len(t, w.jobList(), 1)
}

// TestRunsPluginIgnoringControlChannel: the bundled echo, which knows
// nothing of fd 3, runs unchanged through POST /runs and POST
// /plugin/{plugin}/{command}, both runs of the one resource.
func TestRunsPluginIgnoringControlChannel(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$PLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  echo: {}
`)
	id := w.createRun(map[string]any{"plugin_id": "echo", "entry_id": "poll", "args": map[string]any{"x": "y"}}).RunID
	r := w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	require.Nil(t, r.Error)
	require.Nil(t, r.Progress, "no progress reported: null (spec §8.3)")
	require.Equal(t, 0, r.ExportsCount)
	require.NotNil(t, r.ResultRefs, r.raw)
	require.Empty(t, r.ResultRefs)
	p := w.exports(id, "", 10)
	require.Empty(t, p.Items)
	require.True(t, p.NextAfter == nil || *p.NextAfter == "")

	// The job behind it answered as ever.
	in := w.inspect(id)
	require.Equal(t, "succeeded", in.Job.Status)
	require.NotEmpty(t, in.Attempts)
	require.JSONEq(t, `"echo poll"`, string(mustField(t, in.Attempts[0].Response, "result")))

	// The older route makes the same thing.
	var job struct {
		JobID string `json:"job_id"`
	}
	code, raw := w.do(http.MethodPost, "/plugin/echo/poll", map[string]any{})
	require.Contains(t, []int{http.StatusOK, http.StatusCreated, http.StatusAccepted}, code, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &job), "%s", raw)
	require.NotEmpty(t, job.JobID, "%s", raw)
	r = w.waitTerminal(job.JobID)
	require.Equal(t, "succeeded", r.Status)
	require.Equal(t, "echo", r.PluginID)
	require.Equal(t, "plugin", r.Kind)
}

func mustField(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
	require.Contains(t, m, key)
	return m[key]
}

// killRecordedGroup kills the process group led by the first pid in file,
// if a fixture wrote one there.
func killRecordedGroup(file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	var leader int
	if _, err := fmt.Sscan(string(b), &leader); err == nil && leader > 1 {
		_ = syscall.Kill(-leader, syscall.SIGKILL)
	}
}

// decodeItem decodes an export stream event's item.
func decodeItem(t *testing.T, ev sseEvent) exportItem {
	t.Helper()
	var it exportItem
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &it), "%s", ev.Data)
	require.NotEmpty(t, it.ExportItemID, "%s", ev.Data)
	return it
}

func runsDeref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func countOf(list []string, v string) int {
	n := 0
	for _, s := range list {
		if s == v {
			n++
		}
	}
	return n
}

// requireTypesInOrder requires a then b in list, each present.
func requireTypesInOrder(t *testing.T, list []string, a, b string) {
	t.Helper()
	i, j := slices.Index(list, a), slices.Index(list, b)
	require.True(t, i >= 0 && j > i, "%s then %s in %v", a, b, list)
}

// TestRunsCLIMirrorsTheAPI: ductile run create|watch|get|export|list|
// cancel|retry against a running daemon answer what the HTTP API answers,
// and ductile run PLUGIN COMMAND (the main spec's form) creates a run too.
func TestRunsCLIMirrorsTheAPI(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
  echo: {config: {mode: error}, retry: {max_attempts: 1}}
`)
	var created runCreated
	w.runJSON(0, &created, "run", "create", "reporter", "gated", "--task-id", "cli-task", "--trace-id", "cli-trace", "--json")
	id := created.RunID
	require.NotEmpty(t, id)

	// watch follows it to its end: one JSON delta per line, exit 0.
	watch := start(t, nil, w.args("run", "watch", id, "--json")...)
	w.waitRun(id, "running with two export items", func(r runRecord) bool { return r.ExportsCount == 2 })
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate1"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate2"), nil, 0o644))
	r := w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	require.Equal(t, 0, watch.wait(t), "watch exits 0 once the run succeeded: %s", watch.stderr.String())
	lines, _ := watch.snapshot()
	require.NotEmpty(t, lines)
	var last runDelta
	for _, l := range lines {
		require.NoError(t, json.Unmarshal([]byte(l), &last), "watch --json prints JSON lines: %q", l)
		require.Equal(t, id, last.RunID)
	}
	require.Equal(t, "succeeded", last.Status)

	// get and export print what GET answers.
	got := w.run("run", "get", id, "--json")
	require.Equal(t, 0, got.code, "%s", got)
	require.JSONEq(t, w.getRun(id).raw, got.stdout)
	_, apiExports := w.do(http.MethodGet, "/runs/"+id+"/export?limit=2", nil)
	cliExports := w.run("run", "export", id, "--limit", "2", "--json")
	require.Equal(t, 0, cliExports.code, "%s", cliExports)
	require.JSONEq(t, string(apiExports), cliExports.stdout)

	// list by task.
	var list struct {
		Runs []runRecord `json:"runs"`
	}
	w.runJSON(0, &list, "run", "list", "--task-id", "cli-task", "--json")
	require.Len(t, list.Runs, 1)
	require.Equal(t, id, list.Runs[0].RunID)
	require.Equal(t, "cli-trace", runsDeref(list.Runs[0].TraceID))

	// A terminal run cannot be canceled.
	refused := w.run("run", "cancel", id)
	require.NotEqual(t, 0, refused.code, "%s", refused)
	require.Equal(t, "succeeded", w.getRun(id).Status)

	// ductile run PLUGIN COMMAND creates a run; a failed one is retried as
	// a new run of the chain.
	var failed runCreated
	w.runJSON(0, &failed, "run", "echo", "poll", "--json")
	f := w.waitTerminal(failed.RunID)
	require.Equal(t, "failed", f.Status, f.raw)
	require.Equal(t, "PLUGIN_ERROR", f.Error.Code, f.raw)
	var retried struct {
		RunID       string `json:"run_id"`
		ParentRunID string `json:"parent_run_id"`
	}
	w.runJSON(0, &retried, "run", "retry", failed.RunID, "--json")
	require.Equal(t, failed.RunID, retried.ParentRunID)
	r2 := w.waitTerminal(retried.RunID)
	require.Equal(t, failed.RunID, runsDeref(r2.RootRunID))
	require.Equal(t, 2, runsDeref(r2.Attempt))
}

// TestRunsControlLinesRefusedNeverWedge: lines on fd 3 that are not JSON,
// over a cap (an inline binary over 64 KiB), out of range (progress 1.5)
// or of no known type are refused, each with a log line naming the run;
// the good lines around them count and the run ends as its plugin answered.
func TestRunsControlLinesRefusedNeverWedge(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
`)
	id := w.createRun(map[string]any{"plugin_id": "reporter", "entry_id": "refusals"}).RunID
	r := w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	require.Equal(t, 1, r.ExportsCount, r.raw)
	items := w.allExports(id, 10)
	require.Len(t, items, 1)
	require.Equal(t, "the one good item", items[0].Text)
	require.Equal(t, []string{items[0].ExportItemID}, r.ResultRefs)
	require.NotNil(t, r.Progress)
	require.Equal(t, 0.75, *r.Progress, r.raw)
	require.Equal(t, "after refusals", runsDeref(r.Stage), r.raw)

	// Each refusal is logged on the run (its job id in the line), and a
	// summary when it ends.
	refused, summary := 0, 0
	waitFor(t, waitTimeout, "four refusals and their summary in the daemon's log", func() bool {
		lines, _ := w.daemon.snapshot()
		refused, summary = 0, 0
		for _, l := range lines {
			if !strings.Contains(l, id) {
				continue
			}
			switch {
			case messageIs("plugin control line refused")(l), messageIs("plugin export item not recorded")(l):
				refused++
			case messageIs("plugin control lines refused")(l):
				summary++
			}
		}
		return refused == 4 && summary == 1
	}, func() string { return fmt.Sprintf("%d refusals and %d summaries logged", refused, summary) })
}

// TestRunsExportBurstLosesNothing: 100 export items written at once (well
// under the 1,000 per attempt) are all recorded, in order, and are the
// run's result set: an item the plugin sent is never dropped because the
// ledger writes more slowly than a pipe fills.
func TestRunsExportBurstLosesNothing(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
`)
	id := w.createRun(map[string]any{"plugin_id": "reporter", "entry_id": "burst"}).RunID
	r := w.waitTerminal(id)
	require.Equal(t, "succeeded", r.Status, r.raw)
	items := w.allExports(id, 1000)
	var texts []string
	for _, it := range items {
		texts = append(texts, it.Text)
	}
	var want []string
	for i := 1; i <= 100; i++ {
		want = append(want, fmt.Sprintf("burst %d", i))
	}
	require.Equal(t, want, texts, "every item the plugin exported, in order")
	require.Equal(t, itemIDs(items), r.ResultRefs)
}

// TestRunsQueuedCancelSyncAndUnknown: a queued run canceled ends canceled
// at once, without ever starting; POST /runs in mode sync answers the
// ended run; an unknown run is a 404 not_found.
func TestRunsQueuedCancelSyncAndUnknown(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
service: {max_workers: 1}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
  echo: {}
`)
	busy := w.createRun(map[string]any{"plugin_id": "reporter", "entry_id": "gated"}).RunID
	w.waitRun(busy, "running", func(r runRecord) bool { return r.Status == "running" })
	queued := w.createRun(map[string]any{"plugin_id": "echo", "entry_id": "poll"})
	require.Equal(t, "queued", queued.Status)
	require.Equal(t, "queued", w.getRun(queued.RunID).Status, "the one worker is busy")

	var cancel struct {
		Status string `json:"status"`
	}
	code, raw := w.do(http.MethodPost, "/runs/"+queued.RunID+"/cancel", map[string]any{"reason": "not now"})
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted}, code, "%s", raw)
	require.NoError(t, json.Unmarshal(raw, &cancel))
	require.Equal(t, "canceled", cancel.Status, "a queued run is canceled at once: %s", raw)
	r := w.getRun(queued.RunID)
	require.Equal(t, "canceled", r.Status, r.raw)
	require.Nil(t, r.StartedAt, "it never started")
	require.NotNil(t, r.FinishedAt)
	require.Equal(t, "not now", runsDeref(r.CancelReason))
	require.Equal(t, "CANCELED", r.Error.Code)
	require.NotNil(t, r.ResultRefs)
	require.Empty(t, r.ResultRefs)

	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate1"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(w.scratch, "gate2"), nil, 0o644))
	require.Equal(t, "succeeded", w.waitTerminal(busy).Status)
	require.Equal(t, "canceled", w.getRun(queued.RunID).Status, "terminal stays terminal")

	// Sync: answered once the run ended, with it.
	var sync struct {
		RunID  string     `json:"run_id"`
		Status string     `json:"status"`
		Run    *runRecord `json:"run"`
	}
	w.doJSON(http.StatusOK, &sync, http.MethodPost, "/runs", map[string]any{"plugin_id": "echo", "entry_id": "poll", "mode": "sync"})
	require.Equal(t, "succeeded", sync.Status)
	require.NotNil(t, sync.Run)
	require.Equal(t, sync.RunID, sync.Run.RunID)
	require.Equal(t, "succeeded", sync.Run.Status)

	// Unknown: 404 not_found, on every run route.
	for _, route := range []struct{ method, path string }{
		{http.MethodGet, "/runs/01a1fea5-702c-7dc3-96a5-3a1e80ffba81"},
		{http.MethodGet, "/runs/01a1fea5-702c-7dc3-96a5-3a1e80ffba81/export"},
		{http.MethodPost, "/runs/01a1fea5-702c-7dc3-96a5-3a1e80ffba81/cancel"},
		{http.MethodPost, "/runs/01a1fea5-702c-7dc3-96a5-3a1e80ffba81/retry"},
	} {
		code, raw := w.do(route.method, route.path, nil)
		require.Equal(t, http.StatusNotFound, code, "%s %s: %s", route.method, route.path, raw)
		var e apiError
		require.NoError(t, json.Unmarshal(raw, &e))
		require.Equal(t, "not_found", e.Code, "%s", raw)
	}
}

// TestRunsOneResourceForPipelineAndPluginRuns: GET /runs/{id} answers a
// pipeline run (kind pipeline, its steps' runs as child_run_ids) and the
// plugin run of its step (kind plugin); GET /runs lists plugin runs by
// default and pipeline runs with kind=pipeline; no id means two things.
func TestRunsOneResourceForPipelineAndPluginRuns(t *testing.T) {
	t.Parallel()
	w := newRunsWorld(t, `
plugin_roots: ["$PLUGINS"]
api: {listen: 127.0.0.1:0}
plugins:
  sink: {}
pipelines:
  - name: quick
    execution_mode: synchronous
    timeout: 1m
    steps:
      - uses: sink.handle
`)
	var p struct {
		RunID  string `json:"run_id"`
		JobID  string `json:"job_id"`
		Status string `json:"status"`
	}
	w.doJSON(http.StatusOK, &p, http.MethodPost, "/pipeline/quick", map[string]any{"n": 1})
	require.NotEmpty(t, p.RunID)
	require.NotEmpty(t, p.JobID)
	require.NotEqual(t, p.RunID, p.JobID)

	var pipe struct {
		Kind        string   `json:"kind"`
		RunID       string   `json:"run_id"`
		Pipeline    string   `json:"pipeline"`
		Status      string   `json:"status"`
		ChildRunIDs []string `json:"child_run_ids"`
	}
	w.doJSON(http.StatusOK, &pipe, http.MethodGet, "/runs/"+p.RunID, nil)
	require.Equal(t, "pipeline", pipe.Kind)
	require.Equal(t, p.RunID, pipe.RunID)
	require.Equal(t, "quick", pipe.Pipeline)
	require.Equal(t, []string{p.JobID}, pipe.ChildRunIDs, "a pipeline run's steps are its child runs")

	step := w.getRun(p.JobID)
	require.Equal(t, "plugin", step.Kind)
	require.Equal(t, "sink", step.PluginID)
	require.Equal(t, "handle", step.EntryID)
	require.Equal(t, "succeeded", step.Status)

	var plugins, pipelines struct {
		Kind string            `json:"kind"`
		Runs []json.RawMessage `json:"runs"`
	}
	w.doJSON(http.StatusOK, &plugins, http.MethodGet, "/runs", nil)
	require.Equal(t, "plugin", plugins.Kind)
	require.Len(t, plugins.Runs, 1)
	require.Contains(t, string(plugins.Runs[0]), p.JobID)
	w.doJSON(http.StatusOK, &pipelines, http.MethodGet, "/runs?kind=pipeline", nil)
	require.Equal(t, "pipeline", pipelines.Kind)
	require.Len(t, pipelines.Runs, 1)
	require.Contains(t, string(pipelines.Runs[0]), p.RunID)
}
