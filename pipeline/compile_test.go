package pipeline_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pipeline"
)

// load writes doc as config.yaml in a temp dir and loads it.
func load(t *testing.T, doc string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(doc), 0o600))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	return cfg
}

// installed is a check func for plugins echo (handle, poll) and sink (handle).
func installed(plugin, command string) error {
	commands := map[string][]string{"echo": {"handle", "poll"}, "sink": {"handle"}, "my.plugin": {"handle"}}
	cmds, ok := commands[plugin]
	if !ok {
		return fmt.Errorf("no plugin named %q", plugin)
	}
	for _, c := range cmds {
		if c == command {
			return nil
		}
	}
	return fmt.Errorf("plugin %q has no command %q", plugin, command)
}

// compileErrors compiles doc and returns its errors, one per line.
func compileErrors(t *testing.T, doc string) []string {
	t.Helper()
	_, err := pipeline.Compile(load(t, doc), installed)
	require.Error(t, err)
	var ve *config.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	return strings.Split(ve.Error(), "\n")
}

func TestCompileValid(t *testing.T) {
	t.Parallel()
	cfg := load(t, `
pipelines:
  - name: main
    on: echo.done
    execution_mode: synchronous
    timeout: 2m
    max_depth: 5
    steps:
      - id: fetch
        uses: echo
        baggage: {web.url: payload.url}
      - id: sub
        call: shared
        if: {path: context.web.url, op: exists}
      - id: fan
        continue_on_error: true
        split:
          - uses: sink
          - steps:
              - uses: echo.poll
              - uses: my.plugin
  - name: shared
    steps:
      - uses: sink
        with: {u: "{context.web.url}"}
      - uses: echo
  - name: hooked
    on-hook: job.failed
    steps: [{uses: sink}]
`)
	set, err := pipeline.Compile(cfg, installed)
	require.NoError(t, err)
	require.Len(t, set.Pipelines, 3)

	main := set.Pipelines["main"]
	require.Equal(t, "echo.done", main.On)
	require.Equal(t, pipeline.ModeSynchronous, main.ExecutionMode)
	require.Equal(t, 2*time.Minute, main.Timeout)
	require.Equal(t, 5, main.MaxDepth)
	require.Equal(t, "fetch", main.Entry)
	require.Equal(t, "config.yaml", main.File)
	require.Equal(t, 3, main.Line)
	require.True(t, strings.HasPrefix(main.Hash, "blake3:"), main.Hash)

	var ids []string
	for _, n := range main.Order() {
		ids = append(ids, fmt.Sprintf("%s %s %s.%s next=%s", n.ID, n.Kind, n.Plugin, n.Command, n.Next))
	}
	require.Equal(t, []string{
		"fetch uses echo.handle next=sub/step1",
		"sub/step1 uses sink.handle next=sub/step2",
		"sub/step2 uses echo.handle next=fan",
		"fan split . next=",
		"fan.1 uses sink.handle next=",
		"fan.2.1 uses echo.poll next=fan.2.2",
		"fan.2.2 uses my.plugin.handle next=",
	}, ids)
	// The call's if gates its first node and skips past the whole call.
	first := main.Nodes["sub/step1"]
	require.Equal(t, "context.web.url exists", first.If.String())
	require.Equal(t, "fan", first.Skip)
	require.Equal(t, "fan", first.Bypass())
	require.JSONEq(t, `"{context.web.url}"`, string(first.With["u"]))
	require.True(t, main.Nodes["fan"].ContinueOnError)
	require.Equal(t, []string{"fan.1", "fan.2.1"}, main.Nodes["fan"].Branches)
	require.Equal(t, []pipeline.Claim{{Path: "web.url", From: "payload.url"}}, main.Nodes["fetch"].Baggage)

	// Defaults.
	shared := set.Pipelines["shared"]
	require.Equal(t, pipeline.ModeAsync, shared.ExecutionMode)
	require.Equal(t, pipeline.DefaultTimeout, shared.Timeout)
	require.Equal(t, pipeline.DefaultMaxDepth, shared.MaxDepth)
	require.Equal(t, "step1", shared.Entry)

	// Indexes, by name.
	require.Equal(t, []*pipeline.Pipeline{main}, set.Triggered("echo.done"))
	require.Empty(t, set.Triggered("other"))
	require.Equal(t, []*pipeline.Pipeline{set.Pipelines["hooked"]}, set.Hooked(pipeline.HookFailed))
	require.Empty(t, set.Hooked(pipeline.HookCompleted))
	// A Set read back from JSON (the ledger's copy) answers alike.
	b, err := json.Marshal(set)
	require.NoError(t, err)
	var back pipeline.Set
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, "main", back.Triggered("echo.done")[0].Name)
	require.Equal(t, "hooked", back.Hooked(pipeline.HookFailed)[0].Name)

	// No pipelines: an empty set.
	set, err = pipeline.Compile(load(t, "state_dir: x\n"), nil)
	require.NoError(t, err)
	require.Empty(t, set.Pipelines)
	require.Empty(t, set.Triggered("x"))
}

// TestCompileHash: the hash is of the compiled form: the same pipeline
// written elsewhere in its file hashes alike; a change in a step does not.
func TestCompileHash(t *testing.T) {
	t.Parallel()
	hash := func(doc string) string {
		set, err := pipeline.Compile(load(t, doc), nil)
		require.NoError(t, err)
		return set.Pipelines["p"].Hash
	}
	base := hash("pipelines:\n  - name: p\n    steps: [{uses: echo}]\n")
	require.Equal(t, base, hash("\n\n# moved down\npipelines:\n  - {name: p, steps: [{uses: echo.handle}]}\n"))
	require.NotEqual(t, base, hash("pipelines:\n  - name: p\n    steps: [{uses: echo.poll}]\n"))
	require.NotEqual(t, base, hash("pipelines:\n  - name: p\n    timeout: 1m\n    steps: [{uses: echo}]\n"))
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		doc  string
		want []string
	}{
		{"call cycle", `
pipelines:
  - name: a
    steps:
      - id: x
        call: b
  - name: b
    steps:
      - call: a
  - name: self
    steps: [{uses: echo}, {call: self}]
`, []string{
			`config.yaml:6: pipelines[a].steps[x].call: call cycle a -> b -> a: a pipeline cannot call itself, directly or through others: remove one of these calls`,
			`config.yaml:9: pipelines[b].steps[step1].call: call cycle b -> a -> b: a pipeline cannot call itself, directly or through others: remove one of these calls`,
			`config.yaml:11: pipelines[self].steps[step2].call: call cycle self -> self: a pipeline cannot call itself, directly or through others: remove one of these calls`,
		}},
		{"bad regex", `
pipelines:
  - name: p
    steps:
      - id: s
        uses: echo
        if: {path: payload.name, op: regex, value: "a(b"}
`, []string{
			"config.yaml:7: pipelines[p].steps[s].if.value: invalid regex \"a(b\": missing closing ): `a(b`: fix the pattern (Go RE2 syntax, see https://pkg.go.dev/regexp/syntax)",
		}},
		{"bulk without namespace", `
pipelines:
  - name: p
    steps:
      - id: s
        uses: echo
        baggage: {from: payload.metadata}
`, []string{
			`config.yaml:7: pipelines[p].steps[s].baggage.namespace: missing: bulk baggage imports an object under a namespace you name: add namespace: <name> (it becomes context.<name>)`,
		}},
		{"on and on-hook", `
pipelines:
  - name: p
    on: echo.done
    on-hook: job.completed
    steps: [{uses: echo}]
  - name: q
    on-hook: job.done
    steps: [{uses: echo}]
`, []string{
			`config.yaml:5: pipelines[p].on-hook: a pipeline has on: or on-hook:, not both: keep the one that should start it (run it from the CLI or API with neither)`,
			`config.yaml:8: pipelines[q].on-hook: unknown hook signal "job.done": use one of job.completed, job.failed, job.timed_out`,
		}},
		{"unknown keys", `
pipelines:
  - name: p
    trigger: x
    steps:
      - id: s
        use: echo
      - uses: echo
        wiht: {a: 1}
`, []string{
			`config.yaml:4: pipelines[p].trigger: unknown key (valid keys: execution_mode, max_depth, name, on, on-hook, steps, timeout); a pipeline takes name, on or on-hook, execution_mode, timeout, max_depth and steps`,
			`config.yaml:6: pipelines[p].steps[s]: a step has exactly one of uses:, call:, split: or steps:, this one has none: add one, e.g. uses: myplugin`,
			`config.yaml:7: pipelines[p].steps[s].use: unknown key: did you mean uses? (valid keys: baggage, call, continue_on_error, id, if, on, split, steps, uses, with); a step takes id, one of uses/call/split/steps, and on, if, with, baggage (continue_on_error on a split)`,
			`config.yaml:9: pipelines[p].steps[step2].wiht: unknown key: did you mean with? (valid keys: baggage, call, continue_on_error, id, if, on, split, steps, uses, with); a step takes id, one of uses/call/split/steps, and on, if, with, baggage (continue_on_error on a split)`,
		}},
		{"duplicate ids and names", `
pipelines:
  - name: p
    steps:
      - id: s
        uses: echo
      - split:
          - id: s
            uses: sink
          - id: step1
            uses: sink
      - uses: echo
  - name: p
    steps: [{uses: echo}]
`, []string{
			`config.yaml:8: pipelines[p].steps[s].id: duplicate step id "s" (first at config.yaml:5): ids are unique in a pipeline, rename one`,
			`config.yaml:13: pipelines[p].name: duplicate pipeline name "p" (first at config.yaml:3): rename one of them`,
		}},
		{"unknown plugin, command and pipeline", `
pipelines:
  - name: p
    steps:
      - uses: ecoh
      - uses: echo.pol
      - call: shraed
  - name: shared
    steps: [{uses: sink}]
`, []string{
			`config.yaml:5: pipelines[p].steps[step1].uses: no plugin named "ecoh": write uses: plugin (runs handle) or plugin.command, naming one that is installed (see: ductile plugin list)`,
			`config.yaml:6: pipelines[p].steps[step2].uses: plugin "echo" has no command "pol": write uses: plugin (runs handle) or plugin.command, naming one that is installed (see: ductile plugin list)`,
			`config.yaml:7: pipelines[p].steps[step3].call: no pipeline named "shraed": did you mean shared?: call the name of a pipeline in pipelines:`,
		}},
		{"step kinds", `
pipelines:
  - name: p
    steps:
      - id: none
        if: {path: payload.x, op: exists}
      - id: two
        uses: echo
        call: shared
      - id: coe
        uses: echo
        continue_on_error: true
      - id: empty
        split: []
  - name: shared
    steps: [{uses: sink}]
  - name: nosteps
`, []string{
			`config.yaml:5: pipelines[p].steps[none]: a step has exactly one of uses:, call:, split: or steps:, this one has none: add one, e.g. uses: myplugin`,
			`config.yaml:7: pipelines[p].steps[two]: a step has exactly one of uses:, call:, split: or steps:, this one has uses and call: make them separate steps`,
			`config.yaml:12: pipelines[p].steps[coe].continue_on_error: only a split takes continue_on_error (it lets the join run when a branch failed): remove it, or move it to the split`,
			`config.yaml:14: pipelines[p].steps[empty].split: must be a non-empty list of branches, each a step or {steps: [...]}`,
			`config.yaml:17: pipelines[nosteps].steps: missing: give the steps to run, e.g. steps: [{uses: myplugin}]`,
		}},
		{"conditions", `
pipelines:
  - name: p
    steps:
      - uses: echo
        if: {path: payload.x, op: between, value: 1}
      - uses: echo
        if: {path: x, op: eq, value: 1}
      - uses: echo
        if: {path: payload.x, op: exists, value: 1}
      - uses: echo
        if: {path: payload.x, op: in, value: 1}
      - uses: echo
        if: {path: payload.x, op: gt}
      - uses: echo
        if: {all: [], any: []}
`, []string{
			`config.yaml:6: pipelines[p].steps[step1].if.op: unknown operator "between": use one of exists, eq, neq, in, gt, gte, lt, lte, contains, startswith, endswith, regex (or all, any, not as keys)`,
			`config.yaml:8: pipelines[p].steps[step2].if.path: invalid path "x": start it with payload., context. or config. and separate keys with dots, e.g. payload.size`,
			`config.yaml:10: pipelines[p].steps[step3].if.value: exists takes no value: remove value:`,
			`config.yaml:12: pipelines[p].steps[step4].if.value: in takes a list: write value: [a, b, c]`,
			`config.yaml:14: pipelines[p].steps[step5].if.value: missing: gt compares the path with a value: give value:`,
			`config.yaml:16: pipelines[p].steps[step6].if: all: takes no other key beside it: nest the other conditions inside it`,
		}},
		{"with and baggage", `
pipelines:
  - name: p
    steps:
      - uses: echo
        with: {a: "{paylod.url}"}
      - uses: echo
        baggage: {web.url: result.url}
      - uses: echo
        baggage: {context.web.url: payload.url}
  - name: q
    execution_mode: sync
    timeout: soon
    max_depth: 0
    steps: [{uses: echo}]
`, []string{
			`config.yaml:6: pipelines[p].steps[step1].with.a: template {paylod.url} reads nothing: a template is {payload.x}, {context.x} or {config.x}`,
			`config.yaml:8: pipelines[p].steps[step2].baggage.web.url: invalid source "result.url": claim a value of payload.* (the incoming event) or context.* (the inherited baggage), e.g. payload.url`,
			`config.yaml:10: pipelines[p].steps[step3].baggage.context.web.url: invalid context path "context.web.url": name the path under context without the prefix, e.g. web.url: payload.url`,
			`config.yaml:12: pipelines[q].execution_mode: unknown execution mode "sync": use async (the default) or synchronous`,
			`config.yaml:13: pipelines[q].timeout: invalid duration "soon": use a duration like 30s, 3m or 1h`,
			`config.yaml:14: pipelines[q].max_depth: must be a whole number of steps of 1 or more, got "0" (default 20)`,
		}},
		{"group if on a gated first step, and a bad id", `
pipelines:
  - name: p
    steps:
      - id: g
        if: {path: payload.a, op: exists}
        steps:
          - uses: echo
            if: {path: payload.b, op: exists}
      - id: "a/b"
        uses: echo
`, []string{
			`config.yaml:5: pipelines[p].steps[g].if: its first step "g.1" has an if of its own, and a group's if gates the group at its first step: put the group's if on its steps one by one, or, if the first step should run only when both hold, combine them in the group's if with all: [...]`,
			`config.yaml:10: pipelines[p].steps[step2].id: invalid step id "a/b": use letters, digits, _, - and . (starting with a letter or digit)`,
		}},
		{"a called pipeline that does not compile", `
pipelines:
  - name: p
    steps: [{call: broken}]
  - name: broken
    steps: [{uses: nosuch}]
`, []string{
			`config.yaml:4: pipelines[p].steps[step1].call: calls "broken", which does not compile: fix the errors reported for it`,
			`config.yaml:6: pipelines[broken].steps[step1].uses: no plugin named "nosuch": write uses: plugin (runs handle) or plugin.command, naming one that is installed (see: ductile plugin list)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, compileErrors(t, tc.doc))
		})
	}
}
