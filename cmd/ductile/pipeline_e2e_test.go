package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pipelinesConfig is a config with two pipelines: one calls the other and
// splits; the plugins are not looked up by the pipeline commands.
const pipelinesConfig = `
plugins:
  fabric: {config: {mode: slow}}
pipelines:
  - name: wisdom
    on: discord.link
    execution_mode: synchronous
    steps:
      - id: download
        uses: ytdlp
        baggage: {web.url: payload.url}
        if: {path: payload.url, op: startswith, value: "https://"}
      - id: processing
        call: audio
      - id: delivery
        split:
          - uses: discord.notify
          - steps: [{uses: s3}, {uses: db.index, with: {key: "{context.web.url}"}}]
  - name: audio
    steps:
      - uses: whisper.transcribe
      - uses: fabric
        if: {path: config.mode, op: eq, value: fast}
`

// TestPipelineCommands: list, show, graph and dry-run read the config's
// compiled pipelines; an unknown name is not_found, a pipeline that does
// not compile invalid_config.
func TestPipelineCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(pipelinesConfig), 0o600))
	run := func(args ...string) result {
		return ductile(t, nil, append(args, "--config", cfg, "--state-dir", filepath.Join(dir, "state"))...)
	}
	ok := func(args ...string) string {
		r := run(args...)
		require.Equal(t, 0, r.code, "%s", r)
		return r.stdout
	}

	var list struct {
		Pipelines []struct {
			Name, On, ExecutionMode, Hash string
			Steps                         int
		} `json:"pipelines"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok("pipeline", "list", "--json")), &list))
	require.Len(t, list.Pipelines, 2)
	require.Equal(t, "audio", list.Pipelines[0].Name)
	require.Equal(t, "wisdom", list.Pipelines[1].Name)
	require.Equal(t, "discord.link", list.Pipelines[1].On)
	require.Equal(t, 7, list.Pipelines[1].Steps)
	require.True(t, strings.HasPrefix(list.Pipelines[1].Hash, "blake3:"))
	text := ok("pipeline", "list")
	require.Contains(t, text, "NAME")
	require.Contains(t, text, "on: discord.link")

	var shown struct {
		Name, Entry, Hash string
		Nodes             []struct{ ID, Kind, Plugin, Command, Next string }
	}
	require.NoError(t, json.Unmarshal([]byte(ok("pipeline", "show", "wisdom", "--json")), &shown))
	require.Equal(t, "download", shown.Entry)
	require.Equal(t, list.Pipelines[1].Hash, shown.Hash)
	var ids []string
	for _, n := range shown.Nodes {
		ids = append(ids, n.ID)
	}
	require.Equal(t, []string{"download", "processing/step1", "processing/step2", "delivery", "delivery.1", "delivery.2.1", "delivery.2.2"}, ids)
	text = ok("pipeline", "show", "wisdom")
	require.Contains(t, text, "  processing/step2: fabric.handle -> delivery\n      if config.mode eq \"fast\" (false: delivery)\n")

	graph := ok("pipeline", "graph", "wisdom")
	require.True(t, strings.HasPrefix(graph, "flowchart TD\n"), graph)
	require.Contains(t, graph, "n4 -->|branch 2| n6\n")
	require.Contains(t, graph, `j4(("join delivery"))`)

	// dry-run: --payload as JSON, and from a file.
	var dry struct {
		Steps []struct {
			Node, Outcome, Reason string
			Input                 json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal([]byte(ok("pipeline", "dry-run", "wisdom", "--payload", `{"url": "https://v"}`, "--json")), &dry))
	require.Len(t, dry.Steps, 7)
	require.Equal(t, "runs", dry.Steps[0].Outcome)
	require.JSONEq(t, `{"url": "https://v"}`, string(dry.Steps[0].Input))
	require.Equal(t, "skipped", dry.Steps[2].Outcome, "fabric's config.mode is slow")
	payloadFile := filepath.Join(dir, "payload.json")
	require.NoError(t, os.WriteFile(payloadFile, []byte(`{"url": "ftp://v"}`), 0o600))
	text = ok("pipeline", "dry-run", "wisdom", "--payload", "@"+payloadFile)
	require.Contains(t, text, "  download (ytdlp.handle): skipped: its if is false")
	require.Contains(t, text, "  processing/step1 (whisper.transcribe): runs\n    input   {\"url\":\"ftp://v\"}\n")

	// Errors, with stable codes.
	r := run("pipeline", "show", "wisdon", "--json")
	require.Equal(t, 1, r.code, "%s", r)
	require.JSONEq(t, `{"error": {"code": "not_found", "message": "no pipeline named \"wisdon\" in the config: did you mean wisdom?", "hint": "see: ductile pipeline list"}}`, r.stderr)
	r = run("pipeline", "dry-run", "wisdom", "--payload", "{nope")
	require.Equal(t, 2, r.code, "%s", r)
	require.Contains(t, r.stderr, "--payload is not valid JSON")
	for _, payload := range []string{"[1]", `"x"`, "null"} { // as pipeline run refuses them
		r = run("pipeline", "dry-run", "wisdom", "--payload", payload)
		require.Equal(t, 2, r.code, "%s: %s", payload, r)
		require.Contains(t, r.stderr, "--payload must be a JSON object")
	}

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("pipelines:\n  - name: loop\n    steps: [{call: loop}]\n"), 0o600))
	r = ductile(t, nil, "pipeline", "list", "--config", bad, "--state-dir", filepath.Join(dir, "state"), "--json")
	require.Equal(t, 1, r.code, "%s", r)
	var e struct {
		Error struct{ Code, Message, Hint string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &e), r.stderr)
	require.Equal(t, "invalid_config", e.Error.Code)
	require.Equal(t, "bad.yaml:3: pipelines[loop].steps[step1].call: call cycle loop -> loop: a pipeline cannot call itself, directly or through others: remove one of these calls", e.Error.Message)
}
