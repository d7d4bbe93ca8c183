package pipeline_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pipeline"
)

// TestCompileStepOn: a step's on: (one event type or a list) gates it on
// the type of the event it is entered with, as an if would: on a steps:
// group or a call it gates the group, which it skips whole.
func TestCompileStepOn(t *testing.T) {
	t.Parallel()
	set, err := pipeline.Compile(load(t, `
pipelines:
  - name: validate
    steps:
      - id: check
        uses: echo
      - id: route
        split:
          - {id: store, on: schema.valid, uses: sink}
          - id: fix
            on: [schema.invalid, schema.partial]
            steps:
              - uses: echo
              - uses: sink
      - uses: echo
`), installed)
	require.NoError(t, err)
	p := set.Pipelines["validate"]
	require.Equal(t, []string{"schema.valid"}, p.Nodes["store"].On)
	require.Equal(t, "", p.Nodes["store"].Skip)
	first := p.Nodes["fix.1"]
	require.Equal(t, []string{"schema.invalid", "schema.partial"}, first.On)
	require.Nil(t, p.Nodes["fix.2"].On)
	require.Equal(t, pipeline.SkipToEnd, first.Skip, "the group is skipped whole: to the end of its branch")
	require.Equal(t, "on schema.invalid, schema.partial", first.Gate())
	require.Contains(t, p.Mermaid(), `{"on schema.invalid, schema.partial"}`)
	require.Equal(t, "route", p.SplitOf("fix.2"))
	require.Equal(t, "", p.SplitOf("check"))

	// A pipeline without on: compiles to the form it had before on:
	// existed, so its hash (recorded in ledgers) is unchanged.
	plain, err := pipeline.Compile(load(t, "pipelines:\n  - name: p\n    steps: [{uses: echo}, {uses: sink}]\n"), installed)
	require.NoError(t, err)
	body, err := json.Marshal(plain.Pipelines["p"])
	require.NoError(t, err)
	require.NotContains(t, string(body), `"on"`)
	require.Equal(t, "blake3:d7b500d6c40106ceeeb8fb9956128f583809af8e366fcf631aca4f0415850ba0", plain.Pipelines["p"].Hash)
}

func TestCompileStepOnErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"bad forms", `
pipelines:
  - name: p
    steps:
      - uses: echo
      - {uses: sink, on: []}
      - {uses: sink, on: [a, a]}
      - {uses: sink, on: {type: a}}
      - {uses: sink, on: "a b"}
`, []string{
			`config.yaml:6: pipelines[p].steps[step2].on: must be an event type (on: schema.valid) or a list of them (on: [schema.valid, schema.fixed]): an empty list matches no event (remove the step, or list its event types)`,
			`config.yaml:7: pipelines[p].steps[step3].on: event type "a" is listed twice: list it once`,
			`config.yaml:8: pipelines[p].steps[step4].on: must be an event type (on: schema.valid) or a list of them (on: [schema.valid, schema.fixed])`,
			`config.yaml:9: pipelines[p].steps[step5].on: invalid event type "a b": an event type is a name like schema.valid, matched exactly`,
		}},
		{"a group's gate on a gated first step", `
pipelines:
  - name: p
    steps:
      - uses: echo
      - on: a
        steps:
          - {uses: echo, if: {path: payload.x, op: exists}}
`, []string{
			`config.yaml:6: pipelines[p].steps[step2].on: its first step "step2.1" has an on or if of its own, and a group's on and if gate the group at its first step: write both on the group, or both on the step`,
		}},
		{"steps that can never run, whatever the plugins emit", `
pipelines:
  - name: p
    on: video.found
    steps:
      - {uses: echo, on: video.fuond}
      - split: [{uses: echo}, {uses: sink}]
      - {uses: sink, on: schema.valid}
  - name: called
    steps:
      - {uses: sink, on: schema.valid}
  - name: caller
    steps:
      - uses: echo
      - call: called
`, []string{
			`config.yaml:6: pipelines[p].steps[step1].on: the step runs on video.fuond, but it can only be entered with ductile.pipeline (how a run from the API or CLI starts), video.found (the trigger, on: video.found), so it never runs: list one of those event types in on: (did you mean video.found?)`,
			`config.yaml:8: pipelines[p].steps[step3].on: the step runs on schema.valid, but it can only be entered with ductile.join (the join of split step2), so it never runs: list one of those event types in on:`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, compileErrors(t, tc.doc))
		})
	}
}

// TestOnWarnings: config check warns of a step whose on: lists no event
// type the steps before it declare emitting (their manifests' values.emit),
// as it warns of a route's; a plugin that declares none may emit anything.
func TestOnWarnings(t *testing.T) {
	t.Parallel()
	set, err := pipeline.Compile(load(t, `
pipelines:
  - name: p
    steps:
      - uses: echo
      - split:
          - {uses: sink, on: schema.vaild}
          - {uses: sink, on: ductile.step.succeeded}
      - uses: sink
      - {uses: echo, on: anything}
`), installed)
	require.NoError(t, err)
	emits := func(plugin, command string) ([]string, bool) {
		if plugin == "echo" {
			return []string{"schema.valid", "schema.invalid"}, true
		}
		return nil, false
	}
	require.Equal(t, []config.FieldError{{File: "config.yaml", Line: 7, Path: "pipelines[p].steps[step2.1].on",
		Msg: "the step runs on schema.vaild, but it can only be entered with ductile.step.succeeded (step step1 when it emits no event), " +
			"schema.invalid (step step1: echo declares emitting it), schema.valid (step step1: echo declares emitting it), " +
			"so it never runs: list one of those event types in on: (did you mean schema.valid?)"}}, pipeline.OnWarnings(set, emits))
	require.Empty(t, pipeline.OnWarnings(set, func(string, string) ([]string, bool) { return nil, false }))
}

// TestDryRunOn: the walk matches a step's on: against the event type it
// knows (the first step's, or a join's) and says a later step's depends
// on the output before it.
func TestDryRunOn(t *testing.T) {
	t.Parallel()
	set, err := pipeline.Compile(load(t, `
pipelines:
  - name: p
    on: video.found
    steps:
      - {id: a, uses: echo, on: video.found}
      - {id: b, uses: sink, on: schema.valid}
      - {id: c, uses: sink, on: schema.valid, if: {path: context.x, op: exists}}
`), installed)
	require.NoError(t, err)
	p := set.Pipelines["p"]
	steps, err := p.DryRun("", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	require.Equal(t, pipeline.DrySkipped, steps[0].Outcome)
	require.Equal(t, "the event is ductile.pipeline, not video.found (on:): the step is bypassed with the same input", steps[0].Reason)
	require.Equal(t, pipeline.DrySkipped, steps[1].Outcome, "b is entered with the same event")

	steps, err = p.DryRun("video.found", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	require.Equal(t, pipeline.DryRuns, steps[0].Outcome)
	require.Equal(t, pipeline.DryDepends, steps[1].Outcome)
	require.Equal(t, "its on depends on the type of a's output", steps[1].Reason)
	require.Equal(t, pipeline.DrySkipped, steps[2].Outcome, "a false if bypasses the step whatever its on")
	require.Equal(t, "context.x exists", steps[2].If)
}
