package pipeline_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pipeline"
)

// wisdom is the spec's example pipeline, with an if, a call and a split.
const wisdom = `
pipelines:
  - name: p
    on: discord.video_link_received
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
          - steps:
              - uses: s3
              - uses: db.index
                with: {key: "{context.web.url}", n: "{payload.n}"}
  - name: audio
    steps:
      - uses: whisper.transcribe
        baggage: {whisper.text: payload.text}
      - uses: fabric
        if: {all: [{path: payload.size, op: gt, value: 10}, {path: config.mode, op: eq, value: fast}]}
`

func TestMermaid(t *testing.T) {
	t.Parallel()
	p := compileOne(t, wisdom)
	require.Equal(t, `flowchart TD
  start(["on: discord.video_link_received"])
  start --> c1
  c1{"if payload.url startswith #quot;https://#quot;"}
  c1 -->|true| n1
  c1 -->|false| n2
  n1["download<br/>ytdlp.handle"]
  n1 --> n2
  n2["processing/step1<br/>whisper.transcribe"]
  n2 --> c3
  c3{"if all(payload.size gt 10, config.mode eq #quot;fast#quot;)"}
  c3 -->|true| n3
  c3 -->|false| n4
  n3["processing/step2<br/>fabric.handle"]
  n3 --> n4
  n4{{"delivery: split"}}
  n4 -->|branch 1| n5
  n4 -->|branch 2| n6
  n5["delivery.1<br/>discord.notify"]
  n5 --> j4
  n6["delivery.2.1<br/>s3.handle"]
  n6 --> n7
  n7["delivery.2.2<br/>db.index"]
  n7 --> j4
  j4(("join delivery"))
  j4 --> done
  done([end])
`, p.Mermaid())

	// A gated group skips past itself: its false edge leaves the group,
	// here the end of the split's branch, i.e. the join.
	gated := compileOne(t, `
pipelines:
  - name: p
    steps:
      - split:
          - uses: a
          - steps: [{uses: b}, {uses: c}]
            if: {path: payload.go, op: eq, value: true}
      - uses: d
`)
	m := gated.Mermaid()
	require.Contains(t, m, `start(["run (API or CLI only)"])`)
	require.Contains(t, m, "c3 -->|false| j1\n")
	require.Contains(t, m, "n4 --> j1\n")
	require.Contains(t, m, "j1 --> n5\n")
	require.Contains(t, m, "n5 --> done\n")
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	p := compileOne(t, wisdom)
	config := func(plugin string) json.RawMessage {
		if plugin == "fabric" {
			return json.RawMessage(`{"mode": "slow"}`)
		}
		return nil
	}
	steps, err := p.DryRun("", json.RawMessage(`{"url": "https://v/1", "n": 7}`), config)
	require.NoError(t, err)
	var lines []string
	for _, s := range steps {
		line := strings.Repeat("  ", s.Depth) + s.Node + " " + s.Outcome
		if s.Reason != "" {
			line += ": " + s.Reason
		}
		if s.Input != nil {
			line += " input=" + string(s.Input)
		}
		if s.InputFrom != "" {
			line += " input from " + s.InputFrom
		}
		line += " context=" + string(s.Context)
		if len(s.Pending) > 0 {
			line += " pending=" + strings.Join(s.Pending, ",")
		}
		lines = append(lines, line)
	}
	require.Equal(t, []string{
		`download runs input={"url": "https://v/1", "n": 7} context={"web":{"url":"https://v/1"}}`,
		`processing/step1 runs input from download's output context={"web":{"url":"https://v/1"}} pending=whisper.text (depends on download's output)`,
		// config.mode is slow: the all is false whatever the output says.
		`processing/step2 skipped: its if is false: the step is bypassed with the same input context={"web":{"url":"https://v/1"}} pending=whisper.text (depends on download's output)`,
		`delivery runs input from processing/step1's output context={"web":{"url":"https://v/1"}} pending=whisper.text (depends on download's output)`,
		`  delivery.1 runs input from processing/step1's output context={"web":{"url":"https://v/1"}} pending=whisper.text (depends on download's output)`,
		`  delivery.2.1 runs input from processing/step1's output context={"web":{"url":"https://v/1"}} pending=whisper.text (depends on download's output)`,
		`  delivery.2.2 runs input from delivery.2.1's output context={"web":{"url":"https://v/1"}} pending=whisper.text (depends on download's output)`,
	}, lines)
	require.Equal(t, "payload.url startswith \"https://\"", steps[0].If)

	// The first step's if is evaluated against the payload given.
	steps, err = p.DryRun("", json.RawMessage(`{"url": "ftp://v/1"}`), config)
	require.NoError(t, err)
	require.Equal(t, pipeline.DrySkipped, steps[0].Outcome)
	require.Equal(t, "processing/step1", steps[1].Node)
	require.JSONEq(t, `{"url": "ftp://v/1"}`, string(steps[1].Input), "a skipped step passes its input on")

	// With config.mode fast, the all depends on the output before it.
	steps, err = p.DryRun("", json.RawMessage(`{"url": "https://v/1"}`), func(string) json.RawMessage { return json.RawMessage(`{"mode": "fast"}`) })
	require.NoError(t, err)
	require.Equal(t, pipeline.DryDepends, steps[2].Outcome)
	require.Equal(t, "its if depends on processing/step1's output", steps[2].Reason)

	// A with that reads only context is computed after the first step;
	// a claim against inherited context fails the step.
	q := compileOne(t, `
pipelines:
  - name: p
    steps:
      - uses: a
        baggage: {origin: payload.origin, other: payload.other}
      - uses: b
        with: {who: "{context.origin}"}
      - uses: c
        baggage: {origin: context.other}
        if: {path: context.origin, op: eq, value: discord}
      - uses: d
`)
	steps, err = q.DryRun("", json.RawMessage(`{"origin": "discord", "other": "slack"}`), nil)
	require.NoError(t, err)
	require.Len(t, steps, 3, "nothing runs after a step that fails")
	require.JSONEq(t, `{"who": "discord"}`, string(steps[1].Input))
	require.Equal(t, pipeline.DryRuns, steps[1].Outcome)
	require.Equal(t, pipeline.DryFails, steps[2].Outcome, "context is known: the if holds, and the claim would rewrite origin")
	require.Equal(t, `step step3: baggage claim would change context.origin from "discord" to "slack": inherited baggage is immutable (claim a new path instead)`, steps[2].Reason)

	_, err = q.DryRun("", json.RawMessage(`{not json`), nil)
	require.Error(t, err)
}

func TestGraph(t *testing.T) {
	t.Parallel()
	p := compileOne(t, `
pipelines:
  - name: p
    steps:
      - id: fetch
        uses: web.get
        if: {path: payload.url, op: exists}
      - id: fan
        continue_on_error: true
        split:
          - uses: a
          - uses: b.run
      - id: last
        uses: c
`)
	g := p.Graph()
	require.Equal(t, []pipeline.Vertex{
		{ID: "start", Kind: pipeline.VertexStart, Label: "run (API or CLI only)"},
		{ID: "c1", Kind: pipeline.VertexGate, Node: "fetch", Label: "if payload.url exists"},
		{ID: "n1", Kind: pipeline.VertexStep, Node: "fetch", Label: "fetch", Plugin: "web", Command: "get"},
		{ID: "n2", Kind: pipeline.VertexSplit, Node: "fan", Label: "fan: split (continue_on_error)"},
		{ID: "n3", Kind: pipeline.VertexStep, Node: "fan.1", Label: "fan.1", Plugin: "a", Command: "handle"},
		{ID: "n4", Kind: pipeline.VertexStep, Node: "fan.2", Label: "fan.2", Plugin: "b", Command: "run"},
		{ID: "j2", Kind: pipeline.VertexJoin, Node: "fan", Label: "join fan"},
		{ID: "n5", Kind: pipeline.VertexStep, Node: "last", Label: "last", Plugin: "c", Command: "handle"},
		{ID: "done", Kind: pipeline.VertexEnd, Label: "end"},
	}, g.Vertices)
	require.Equal(t, []pipeline.Edge{
		{From: "start", To: "c1"},
		{From: "c1", To: "n1", Label: "true"},
		{From: "c1", To: "n2", Label: "false"},
		{From: "n1", To: "n2"},
		{From: "n2", To: "n3", Label: "branch 1"},
		{From: "n2", To: "n4", Label: "branch 2"},
		{From: "n3", To: "j2"},
		{From: "n4", To: "j2"},
		{From: "j2", To: "n5"},
		{From: "n5", To: "done"},
	}, g.Edges)

	// Every edge's ends are vertices, on the spec's example too.
	for _, q := range []*pipeline.Pipeline{p, compileOne(t, wisdom)} {
		ids := map[string]bool{}
		for _, v := range q.Graph().Vertices {
			require.False(t, ids[v.ID], "vertex %s twice", v.ID)
			ids[v.ID] = true
		}
		for _, e := range q.Graph().Edges {
			require.True(t, ids[e.From] && ids[e.To], "edge %s -> %s", e.From, e.To)
		}
	}
	b, err := json.Marshal(g.Vertices[0])
	require.NoError(t, err)
	require.JSONEq(t, `{"id": "start", "kind": "start", "label": "run (API or CLI only)"}`, string(b))
}
