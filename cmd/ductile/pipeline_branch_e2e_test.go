package main_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// validatorConfig is the validator pattern: check emits schema.valid or
// schema.invalid, and the run branches on the type it emitted.
const validatorConfig = `
plugin_roots: ["$ROOT"]
pipelines:
  - name: validate
    steps:
      - {id: check, uses: checker}
      - id: route
        split:
          - {id: store, on: schema.valid, uses: store}
          - {id: reject, on: schema.invalid, uses: reject}
  - name: bad
    steps: [{id: fail, uses: broken}]
`

// validatorPlugins: checker finds the payload invalid and counts what it
// saw in its state; broken fails (a retryable error).
func validatorPlugins() []stepPlugin {
	return []stepPlugin{
		{name: "checker", response: `{"status":"ok","result":"invalid","events":[{"type":"schema.invalid","payload":{"why":"bad"}}],"state_updates":{"seen":1}}`},
		{name: "store"}, {name: "reject"},
		{name: "broken", response: `{"status":"error","error":"upstream down"}`},
	}
}

// runStatusView is what pipeline status --json prints.
type runStatusView struct {
	Status string `json:"status"`
	Steps  []struct {
		Node    string `json:"node"`
		Outcome string `json:"outcome"`
		Event   string `json:"event"`
		Reason  string `json:"reason"`
	} `json:"steps"`
}

// TestPipelineBranchOnEmittedTypeE2E: a step's on: makes the run branch on
// the event type its predecessor emitted (routing spec §8.2); the skip is
// recorded with why, so pipeline status shows it, on the ledger and on a
// copy of it as of the run's end (ledger replay --until).
func TestPipelineBranchOnEmittedTypeE2E(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, validatorPlugins(), validatorConfig)
	w.startDaemon()
	out := w.runPipeline("validate", `{"doc":1}`, 0)
	require.Equal(t, events.RunSucceeded, out.Status)
	require.Len(t, out.Results, 1)
	require.Equal(t, "reject", out.Results[0].Node)
	requireEvent(t, w.mustRequest(out.Results[0].JobID), "schema.invalid", `{"why":"bad"}`)

	var st runStatusView
	w.runJSON(0, &st, "pipeline", "status", out.RunID, "--json")
	steps := map[string]string{}
	for _, s := range st.Steps {
		steps[s.Node] = s.Outcome + " " + s.Event + " " + s.Reason
	}
	require.Equal(t, map[string]string{
		"check":  "enqueued ductile.pipeline ",
		"reject": "enqueued schema.invalid ",
		"store":  "skipped schema.invalid the event is schema.invalid, not schema.valid (on:)",
	}, steps)
	r := w.run("pipeline", "status", out.RunID)
	require.Contains(t, r.stdout, "step store: skipped: the event is schema.invalid, not schema.valid (on:)")

	// Time travel: a copy of the ledger as of the run's last event says the same.
	l, err := ledger.Open(context.Background(), daemon.DBPath(w.state), ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	runs, _ := w.facts(l)
	require.NoError(t, l.Close())
	copyDir := t.TempDir()
	r = w.run("ledger", "replay", "--until", strconv.FormatInt(runs[out.RunID].FinishedSeq, 10), "--out", filepath.Join(copyDir, "ductile.db"))
	require.Equal(t, 0, r.code, r.String())
	var past runStatusView
	r = ductile(t, nil, "--config", w.config, "--state-dir", copyDir, "pipeline", "status", out.RunID, "--json")
	require.Equal(t, 0, r.code, r.String())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &past))
	require.Equal(t, st, past)
}
