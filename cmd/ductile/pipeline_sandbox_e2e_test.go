package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// TestPipelineDryRunStepSandboxE2E: pipeline dry-run --step runs the
// step's real plugin, with the state it has in the ledger, against a
// scratch state directory, and prints its response, its events and what
// the run would do next; the real ledger is left as it was (its file
// byte for byte without a daemon, its head with one), and the sandbox's
// scratch directory is gone.
func TestPipelineDryRunStepSandboxE2E(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, validatorPlugins(), validatorConfig)
	tmp := t.TempDir()
	env := cleanEnv(t, "TMPDIR="+tmp)

	// Without a ledger: the plugin starts with {} state.
	report := sandbox(t, w, env, 0)
	require.Empty(t, report.stateSeen)

	// Give checker a state in the real ledger: one real run.
	daemonProc := w.startDaemon()
	w.runPipeline("validate", `{}`, 0)
	w.stopDaemon(daemonProc)

	dbPath := daemon.DBPath(w.state)
	before, head := fileSum(t, dbPath), headSeq(t, dbPath)
	report = sandbox(t, w, env, 0)
	require.JSONEq(t, `{"seen":1}`, report.stateSeen, "the plugin starts with its state in the ledger")
	require.Equal(t, before, fileSum(t, dbPath), "the real ledger file is unchanged")
	require.Equal(t, head, headSeq(t, dbPath))

	// With a daemon running: nothing reaches its ledger either.
	w.startDaemon()
	head = headSeq(t, dbPath)
	sandbox(t, w, env, 0)
	require.Equal(t, head, headSeq(t, dbPath), "the daemon's ledger got no event")

	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries, "the scratch state directory is deleted")

	// A step inside a split's branch: its end ends the branch.
	var branch struct {
		Ran   bool            `json:"ran"`
		Split string          `json:"split"`
		Next  []any           `json:"next"`
		Input json.RawMessage `json:"input"`
	}
	r := ductile(t, env, w.args("pipeline", "dry-run", "validate", "--step", "reject", "--event", "schema.invalid", "--json")...)
	require.Equal(t, 0, r.code, r.String())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &branch), r.String())
	require.True(t, branch.Ran)
	require.Equal(t, "route", branch.Split)
	require.Empty(t, branch.Next)
	// Bypassed by its on: it does not run, and says why.
	r = ductile(t, env, w.args("pipeline", "dry-run", "validate", "--step", "store", "--event", "schema.invalid")...)
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "the step is bypassed: its plugin does not run\n  skipped   store: the event is schema.invalid, not schema.valid (on:)\n")

	// A failing step exits 1, after one attempt (a sandbox does not retry).
	files := len(requestFiles(t, w.scratch))
	r = ductile(t, env, w.args("pipeline", "dry-run", "bad", "--step", "fail")...)
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stdout, "  dead in ")
	require.Contains(t, r.stdout, "upstream down")
	require.Len(t, requestFiles(t, w.scratch), files+1, "one attempt")

	// Bad names are not_found with the steps listed.
	r = w.run("pipeline", "dry-run", "validate", "--step", "chek")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `pipeline validate has no step "chek": did you mean "check"? (its steps that run a plugin: check, store, reject)`)
	r = w.run("pipeline", "dry-run", "validate", "--context", `{}`)
	require.Equal(t, 2, r.code, r.String())
	require.Contains(t, r.stderr, "--context needs --step")
}

// sandboxReport is what a sandbox run printed, and the state its plugin
// received.
type sandboxReport struct {
	stateSeen string
}

// sandbox runs pipeline dry-run validate --step check, checks its report
// and returns the state the plugin received.
func sandbox(t *testing.T, w *pipeWorld, env []string, want int) sandboxReport {
	t.Helper()
	seen := requestFiles(t, w.scratch)
	r := ductile(t, env, w.args("pipeline", "dry-run", "validate", "--step", "check", "--payload", `{"doc":2}`, "--json")...)
	require.Equal(t, want, r.code, r.String())
	var out struct {
		Sandbox bool          `json:"sandbox"`
		Ran     bool          `json:"ran"`
		Status  events.Status `json:"status"`
		Input   struct {
			Event   string          `json:"event"`
			Payload json.RawMessage `json:"payload"`
		} `json:"input"`
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
		State json.RawMessage `json:"state"`
		Next  []struct {
			Node  string `json:"node"`
			Event string `json:"event"`
		} `json:"next"`
		Skipped   []events.SkippedStep `json:"skipped"`
		RunStatus events.RunStatus     `json:"run_status"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.String())
	require.True(t, out.Sandbox && out.Ran, r.stdout)
	require.Equal(t, events.StatusSucceeded, out.Status)
	require.Equal(t, "ductile.pipeline", out.Input.Event)
	require.JSONEq(t, `{"doc":2}`, string(out.Input.Payload))
	require.Len(t, out.Events, 1)
	require.Equal(t, "schema.invalid", out.Events[0].Type)
	require.JSONEq(t, `{"seen":1}`, string(out.State))
	require.Len(t, out.Next, 1)
	require.Equal(t, "reject", out.Next[0].Node)
	require.Equal(t, "schema.invalid", out.Next[0].Event)
	require.Equal(t, []events.SkippedStep{{Node: "store", Event: "schema.invalid", Reason: "the event is schema.invalid, not schema.valid (on:)"}}, out.Skipped)
	require.Equal(t, events.RunRunning, out.RunStatus)

	// The real plugin ran: it saved the request it received.
	var fresh []string
	for _, f := range requestFiles(t, w.scratch) {
		if !slices.Contains(seen, f) {
			fresh = append(fresh, f)
		}
	}
	require.Len(t, fresh, 1, "checker ran once in the sandbox")
	body, err := os.ReadFile(filepath.Join(w.scratch, fresh[0]))
	require.NoError(t, err)
	var req struct {
		State json.RawMessage `json:"state"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	state := string(req.State)
	if state == "{}" {
		state = ""
	}
	return sandboxReport{stateSeen: state}
}

func requestFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			out = append(out, e.Name())
		}
	}
	return out
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(b)
}

func headSeq(t *testing.T, path string) int64 {
	t.Helper()
	l, err := ledger.Open(context.Background(), path, ledger.Options{ReadOnly: true})
	require.NoError(t, err)
	defer l.Close()
	seq, err := l.LastSeq(context.Background())
	require.NoError(t, err)
	return seq
}
