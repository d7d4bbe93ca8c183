package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// treeView is what job tree --json prints.
type treeView struct {
	JobID string `json:"job_id"`
	Root  string `json:"root_job_id"`
	AtSeq int64  `json:"at_seq"`
	At    string `json:"at"`
	Jobs  []struct {
		jobView
		ReplayOf string          `json:"replay_of"`
		Context  json.RawMessage `json:"context"`
	} `json:"jobs"`
}

// statuses is each plugin's job status in the tree (one job per plugin).
func (v treeView) statuses() map[string]string {
	out := map[string]string{}
	for _, j := range v.Jobs {
		out[j.Plugin] = j.Status
	}
	return out
}

// slowStep writes a plugin that sleeps a second and emits an event of type
// emit (none if empty).
func slowStep(t *testing.T, root, name, emit string) {
	t.Helper()
	dir := filepath.Join(root, name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(`manifest_spec: ductile.plugin
manifest_version: 1
name: `+name+`
version: 0.1.0
protocol: 2
entrypoint: run.sh
commands: {handle: {type: write}}
`), 0o644))
	out := `{"status":"ok","result":"done"}`
	if emit != "" {
		out = `{"status":"ok","result":"done","events":[{"type":"` + emit + `","payload":{"from":"` + name + `"}}]}`
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\nsleep 1\nprintf '%s\\n' '"+out+"'\n"), 0o755))
}

// readLedger reads every event of the world's ledger (no daemon may run).
func (w *jobWorld) readLedger() []ledger.Event {
	w.t.Helper()
	l, err := ledger.Open(context.Background(), daemon.DBPath(w.state), ledger.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(w.t, err)
	defer func() { require.NoError(w.t, l.Close()) }()
	return readAll(w.t, l)
}

// TestJobTreeAtThreeMoments runs a routed chain of three plugins that each
// take a second (fetch → transcribe → notify), then shows its tree at
// three seqs taken from the ledger (fetch running; fetch done and
// transcribe running; all done) and at a time, each with exactly the
// statuses its events give at that seq. It then replays the middle step:
// --dry-run writes nothing; the replay runs the same event as a new job in
// the same tree, linked by replay_of.
func TestJobTreeAtThreeMoments(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	slowStep(t, root, "fetch", "fetched")
	slowStep(t, root, "transcribe", "transcribed")
	slowStep(t, root, "notify", "")
	w := newJobWorld(t, `
plugin_roots: ["`+root+`"]
routes:
  - {from: fetch, event_type: fetched, to: transcribe}
  - {from: transcribe, event_type: transcribed, to: notify}
`)
	d := w.startDaemon()
	var run runView
	w.runJSON(0, &run, "plugin", "run", "fetch", "--command", "handle", "--payload", `{"url":"u"}`, "--json")
	var tree treeView
	waitFor(t, 3*waitTimeout, "the chain to finish", func() bool {
		w.runJSON(0, &tree, "job", "tree", run.JobID, "--json")
		return len(tree.Jobs) == 3 && tree.statuses()["notify"] == "succeeded"
	})
	w.stopDaemon(d)

	// The moments, from the ledger: each job's job.started and the last job.succeeded.
	plugins := map[string]string{} // job id → plugin
	seqOf := map[string]int64{}    // "plugin event" → seq
	var recorded []ledger.Event
	for _, ev := range w.readLedger() {
		id := events.JobIDFromStream(ev.Stream)
		if id == "" {
			continue
		}
		if ev.Type == events.JobEnqueued {
			var d events.Enqueued
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			plugins[id] = d.Plugin
		}
		seqOf[plugins[id]+" "+ev.Type] = ev.Seq
		recorded = append(recorded, ev)
	}
	moments := []struct {
		seq  int64
		want map[string]string
	}{
		{seqOf["fetch job.started"], map[string]string{"fetch": "running"}},
		{seqOf["transcribe job.started"], map[string]string{"fetch": "succeeded", "transcribe": "running"}},
		{seqOf["notify job.succeeded"], map[string]string{"fetch": "succeeded", "transcribe": "succeeded", "notify": "succeeded"}},
	}
	for _, m := range moments {
		var at treeView
		w.runJSON(0, &at, "job", "tree", run.JobID, "--at", strconv.FormatInt(m.seq, 10), "--json")
		require.Equal(t, m.seq, at.AtSeq)
		require.Equal(t, m.want, at.statuses(), "at seq %d", m.seq)
	}
	// A time: the moment transcribe started, half a second on (it sleeps a second).
	var started time.Time
	for _, ev := range recorded {
		if ev.Seq == moments[1].seq {
			started = ev.RecordedAt
		}
	}
	var at treeView
	w.runJSON(0, &at, "job", "tree", run.JobID, "--at", started.Add(500*time.Millisecond).Format(time.RFC3339Nano), "--json")
	require.GreaterOrEqual(t, at.AtSeq, moments[1].seq)
	require.Equal(t, moments[1].want, at.statuses())

	text := w.run("job", "tree", run.JobID, "--at", strconv.FormatInt(moments[1].seq, 10))
	require.Equal(t, 0, text.code, "%s", text)
	require.Contains(t, text.stdout, fmt.Sprintf("tree of job %s at seq %d", run.JobID, moments[1].seq))
	require.Regexp(t, `\*`+run.JobID[24:]+`  fetch handle  succeeded \(attempt 1/\d+\)\n   \S+  transcribe handle  running`, text.stdout)

	bad := w.run("job", "tree", run.JobID, "--at", "yesterday")
	require.Equal(t, 2, bad.code, "%s", bad)
	require.Contains(t, bad.stderr, "neither a seq")
	early := w.run("job", "tree", run.JobID, "--at", "1", "--json")
	require.Equal(t, 1, early.code, "%s", early)
	require.Contains(t, early.stderr, `"not_found"`)
	require.Contains(t, early.stderr, "did not exist yet at seq 1")

	// Replay the middle step.
	var transcribe string
	for id, p := range plugins {
		if p == "transcribe" {
			transcribe = id
		}
	}
	head := len(w.readLedger())
	var dry struct {
		Status string `json:"status"`
		DryRun bool   `json:"dry_run"`
	}
	w.runJSON(0, &dry, "job", "replay", transcribe, "--dry-run", "--json")
	require.Equal(t, "would enqueue", dry.Status)
	require.Len(t, w.readLedger(), head, "--dry-run writes nothing")

	d = w.startDaemon()
	var replay struct {
		JobID    string `json:"job_id"`
		ReplayOf string `json:"replay_of"`
		Status   string `json:"status"`
	}
	w.runJSON(0, &replay, "job", "replay", transcribe, "--json")
	require.Equal(t, transcribe, replay.ReplayOf)
	done := w.waitSettled(replay.JobID)
	require.Equal(t, "succeeded", done.Job.Status)
	original := w.inspect(transcribe)
	require.Equal(t, *original.Job.ParentJobID, *done.Job.ParentJobID, "in the original's tree: the same parent")
	require.JSONEq(t, eventOf(t, original.Events[0].Data), eventOf(t, done.Events[0].Data), "the same event")
	var links struct {
		ReplayOf   string   `json:"replay_of"`
		ReplayedAs []string `json:"replayed_as"`
	}
	w.runJSON(0, &links, "job", "inspect", replay.JobID, "--json")
	require.Equal(t, transcribe, links.ReplayOf)
	w.runJSON(0, &links, "job", "inspect", transcribe, "--json")
	require.Equal(t, []string{replay.JobID}, links.ReplayedAs)
	require.Contains(t, w.run("job", "inspect", replay.JobID).stdout, "replay of  "+transcribe+"\n")

	// A replay is one step: what it emits is recorded, not routed, so the
	// tree holds the first three jobs and the replay, nothing more.
	w.runJSON(0, &tree, "job", "tree", run.JobID, "--json")
	require.Len(t, tree.Jobs, 4, "the replay routed nothing")
	w.stopDaemon(d)
	var withReplay treeView
	w.runJSON(0, &withReplay, "job", "tree", run.JobID, "--at", strconv.FormatInt(int64(len(w.readLedger())), 10), "--json")
	replayOf := map[string]string{}
	for _, j := range withReplay.Jobs {
		replayOf[j.ID] = j.ReplayOf
	}
	require.Equal(t, transcribe, replayOf[replay.JobID], "the tree shows replay_of")
	w.replayAndVerify()
}

// eventOf is the event envelope of a job.enqueued's data.
func eventOf(t *testing.T, data json.RawMessage) string {
	t.Helper()
	var d events.Enqueued
	require.NoError(t, json.Unmarshal(data, &d))
	require.NotEmpty(t, d.Event)
	return string(d.Event)
}

// TestJobInspectVerboseShowsBaggage: job inspect -v shows a step's
// context, its parent's, and the dotted paths the step added.
func TestJobInspectVerboseShowsBaggage(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugin_roots: []\n")
	l, err := ledger.Open(context.Background(), daemon.DBPath(w.state), ledger.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	enqueue := func(parent, baggage string) string {
		res, err := commands.EnqueueJob(context.Background(), l, commands.Enqueue{Plugin: "p", Command: "handle", SubmittedBy: events.ActorRoute,
			MaxAttempts: 1, ParentJobID: parent, Context: json.RawMessage(baggage), Now: time.Now()})
		require.NoError(t, err)
		return res.JobID
	}
	parent := enqueue("", `{"web":{"url":"u"}}`)
	step := enqueue(parent, `{"web":{"url":"u","lang":"en"},"whisper":{"model":"small"}}`)
	require.NoError(t, l.Close())

	var v struct {
		Job struct {
			ID string `json:"job_id"`
		} `json:"job"`
		Context       json.RawMessage `json:"context"`
		ParentContext json.RawMessage `json:"parent_context"`
		AddedPaths    []string        `json:"added_paths"`
	}
	w.runJSON(0, &v, "job", "inspect", step, "-v", "--json")
	require.Equal(t, step, v.Job.ID)
	require.JSONEq(t, `{"web":{"url":"u","lang":"en"},"whisper":{"model":"small"}}`, string(v.Context))
	require.JSONEq(t, `{"web":{"url":"u"}}`, string(v.ParentContext))
	require.Equal(t, []string{"web.lang", "whisper.model"}, v.AddedPaths)

	text := w.run("job", "inspect", step, "--verbose")
	require.Equal(t, 0, text.code, "%s", text)
	require.Contains(t, text.stdout, "  added           web.lang, whisper.model\n")
	require.Contains(t, text.stdout, `  parent context  {"web":{"url":"u"}}`+"\n")
	require.NotContains(t, w.run("job", "inspect", step).stdout, "baggage:", "only with -v")
	plain := w.run("job", "inspect", step, "--json")
	require.False(t, strings.Contains(plain.stdout, "added_paths"), "only with -v")
}
