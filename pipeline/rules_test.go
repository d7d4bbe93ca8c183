package pipeline_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pipeline"
)

// compileOne compiles a one-pipeline document named p.
func compileOne(t *testing.T, doc string) *pipeline.Pipeline {
	t.Helper()
	set, err := pipeline.Compile(load(t, doc), nil)
	require.NoError(t, err)
	return set.Pipelines["p"]
}

func TestConditionOperators(t *testing.T) {
	t.Parallel()
	scope := pipeline.Scope{
		Payload: json.RawMessage(`{"size": 12, "name": "report.pdf", "tags": ["a", "b"], "meta": {"lang": "en"}, "none": null, "big": 1e3}`),
		Context: json.RawMessage(`{"web": {"url": "https://x.org/a"}}`),
		Config:  json.RawMessage(`{"threshold": 10, "mode": "fast"}`),
	}
	for _, tc := range []struct {
		cond string
		want bool
	}{
		{`{path: payload.size, op: exists}`, true},
		{`{path: payload.missing, op: exists}`, false},
		{`{path: payload.none, op: exists}`, false},
		{`{path: payload.meta.lang, op: exists}`, true},
		{`{path: payload.size, op: eq, value: 12}`, true},
		{`{path: payload.size, op: eq, value: 12.0}`, true},
		{`{path: payload.size, op: eq, value: "12"}`, false},
		{`{path: payload.big, op: eq, value: 1000}`, true},
		{`{path: payload.meta, op: eq, value: {lang: en}}`, true},
		{`{path: payload.size, op: neq, value: 12}`, false},
		{`{path: payload.missing, op: neq, value: 12}`, true},
		{`{path: payload.meta.lang, op: in, value: [de, en]}`, true},
		{`{path: payload.meta.lang, op: in, value: [de, fr]}`, false},
		{`{path: payload.size, op: gt, value: 10}`, true},
		{`{path: payload.size, op: gt, value: 12}`, false},
		{`{path: payload.size, op: gte, value: 12}`, true},
		{`{path: payload.size, op: lt, value: 100}`, true},
		{`{path: payload.size, op: lte, value: 11.5}`, false},
		{`{path: payload.name, op: gt, value: 10}`, false},
		{`{path: payload.missing, op: lt, value: 10}`, false},
		{`{path: payload.name, op: contains, value: port}`, true},
		{`{path: payload.tags, op: contains, value: b}`, true},
		{`{path: payload.tags, op: contains, value: c}`, false},
		{`{path: payload.name, op: startswith, value: rep}`, true},
		{`{path: payload.name, op: endswith, value: .pdf}`, true},
		{`{path: payload.name, op: endswith, value: .doc}`, false},
		{`{path: payload.name, op: regex, value: "^r.*\\.pdf$"}`, true},
		{`{path: payload.size, op: regex, value: "1"}`, false},
		{`{path: context.web.url, op: startswith, value: "https://"}`, true},
		{`{path: config.mode, op: eq, value: fast}`, true},
		{`{all: [{path: payload.size, op: gt, value: 10}, {path: config.mode, op: eq, value: fast}]}`, true},
		{`{all: [{path: payload.size, op: gt, value: 10}, {path: config.mode, op: eq, value: slow}]}`, false},
		{`{any: [{path: payload.size, op: gt, value: 100}, {path: config.mode, op: eq, value: fast}]}`, true},
		{`{any: [{path: payload.size, op: gt, value: 100}, {path: config.mode, op: eq, value: slow}]}`, false},
		{`{not: {path: payload.size, op: gt, value: 100}}`, true},
	} {
		t.Run(tc.cond, func(t *testing.T) {
			t.Parallel()
			p := compileOne(t, "pipelines:\n  - name: p\n    steps:\n      - uses: echo\n        if: "+tc.cond+"\n")
			cond := p.Nodes[p.Entry].If
			got, err := cond.Eval(scope)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)

			// The compiled form read back (the ledger's copy) evaluates alike.
			b, err := json.Marshal(cond)
			require.NoError(t, err)
			var back pipeline.Condition
			require.NoError(t, json.Unmarshal(b, &back))
			got, err = back.Eval(scope)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	// Empty scope documents read as {}.
	p := compileOne(t, "pipelines:\n  - name: p\n    steps:\n      - uses: echo\n        if: {path: payload.x, op: exists}\n")
	got, err := p.Nodes[p.Entry].If.Eval(pipeline.Scope{})
	require.NoError(t, err)
	require.False(t, got)
}

func TestInputTemplates(t *testing.T) {
	t.Parallel()
	p := compileOne(t, `
pipelines:
  - name: p
    steps:
      - uses: echo
        with:
          url: "{payload.url}"
          meta: "{payload.meta}"
          count: "{payload.count}"
          gone: "{payload.gone}"
          line: "fetch {payload.url} ({payload.count} tries, lang {payload.meta.lang}, {payload.gone}!)"
          obj: "{payload.meta}/x"
          from_context: "{context.web.url}"
          from_config: "{config.mode}"
          literal: 42
          braces: "{not a template}"
          nested: {list: ["{payload.count}", "n={payload.count}"]}
`)
	n := p.Nodes[p.Entry]
	got, err := n.Input(pipeline.Scope{
		Payload: json.RawMessage(`{"url": "https://x", "meta": {"lang": "en"}, "count": 3}`),
		Context: json.RawMessage(`{"web": {"url": "https://ctx"}}`),
		Config:  json.RawMessage(`{"mode": "fast"}`),
	})
	require.NoError(t, err)
	require.JSONEq(t, `{
		"url": "https://x",
		"meta": {"lang": "en"},
		"count": 3,
		"gone": null,
		"line": "fetch https://x (3 tries, lang en, !)",
		"obj": "{\"lang\":\"en\"}/x",
		"from_context": "https://ctx",
		"from_config": "fast",
		"literal": 42,
		"braces": "{not a template}",
		"nested": {"list": [3, "n=3"]}
	}`, string(got))

	// Without with:, the input is the incoming payload as is.
	plain := compileOne(t, "pipelines:\n  - name: p\n    steps: [{uses: echo}]\n")
	in := json.RawMessage(`{"a": 1}`)
	got, err = plain.Nodes[plain.Entry].Input(pipeline.Scope{Payload: in})
	require.NoError(t, err)
	require.Equal(t, in, got)
}

func TestAccrete(t *testing.T) {
	t.Parallel()
	p := compileOne(t, `
pipelines:
  - name: p
    steps:
      - id: claim
        uses: echo
        baggage: {web.url: payload.url, web.status: payload.status, copied: context.origin}
      - id: bulk
        uses: echo
        baggage: {from: payload.metadata, namespace: whisper}
      - id: none
        uses: echo
`)
	claim, bulk := p.Nodes["claim"], p.Nodes["bulk"]
	payload := json.RawMessage(`{"url": "https://x", "status": 200, "metadata": {"lang": "en", "words": 10}}`)

	// A new path is added; a missing source claims nothing.
	got, err := claim.Accrete(pipeline.Scope{Payload: payload, Context: json.RawMessage(`{"origin": "discord"}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"origin": "discord", "copied": "discord", "web": {"url": "https://x", "status": 200}}`, string(got))

	// The same value again is fine.
	again, err := claim.Accrete(pipeline.Scope{Payload: payload, Context: got})
	require.NoError(t, err)
	require.JSONEq(t, string(got), string(again))

	// A different value for an inherited path is a BaggageError.
	_, err = claim.Accrete(pipeline.Scope{Payload: json.RawMessage(`{"url": "https://y"}`), Context: got})
	var be *pipeline.BaggageError
	require.True(t, errors.As(err, &be), "%v", err)
	require.Equal(t, "claim", be.Node)
	require.Equal(t, "web.url", be.Path)
	require.JSONEq(t, `"https://x"`, string(be.Old))
	require.JSONEq(t, `"https://y"`, string(be.New))
	require.EqualError(t, err, `step claim: baggage claim would change context.web.url from "https://x" to "https://y": inherited baggage is immutable (claim a new path instead)`)

	// A path under an inherited scalar cannot be made.
	_, err = claim.Accrete(pipeline.Scope{Payload: payload, Context: json.RawMessage(`{"web": "flat"}`)})
	require.True(t, errors.As(err, &be), "%v", err)
	require.Equal(t, "web", be.Path)

	// Bulk import under a namespace merges into what is there.
	got, err = bulk.Accrete(pipeline.Scope{Payload: payload, Context: json.RawMessage(`{"whisper": {"lang": "en", "model": "base"}}`)})
	require.NoError(t, err)
	require.JSONEq(t, `{"whisper": {"lang": "en", "model": "base", "words": 10}}`, string(got))
	_, err = bulk.Accrete(pipeline.Scope{Payload: payload, Context: json.RawMessage(`{"whisper": {"lang": "de"}}`)})
	require.True(t, errors.As(err, &be), "%v", err)
	require.Equal(t, "whisper.lang", be.Path)

	// Without claims the context is returned as is.
	ctx := json.RawMessage(`{"a": 1}`)
	got, err = p.Nodes["none"].Accrete(pipeline.Scope{Payload: payload, Context: ctx})
	require.NoError(t, err)
	require.Equal(t, ctx, got)
}

func TestMergeContexts(t *testing.T) {
	t.Parallel()
	got, err := pipeline.MergeContexts("join", json.RawMessage(`{"a": 1}`), json.RawMessage(`{"a": 1, "b": {"x": 1}}`), json.RawMessage(`{"b": {"y": 2}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"a": 1, "b": {"x": 1, "y": 2}}`, string(got))
	_, err = pipeline.MergeContexts("join", nil, json.RawMessage(`{"b": 1}`), json.RawMessage(`{"b": 2}`))
	var be *pipeline.BaggageError
	require.True(t, errors.As(err, &be), "%v", err)
	require.Equal(t, "b", be.Path)
}
