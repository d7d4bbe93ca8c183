package pipeline_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pipeline"
)

// bigPayload is a payload of about 1 MB: a few fields a condition reads
// and a large body it does not.
func bigPayload(tb testing.TB) json.RawMessage {
	tb.Helper()
	items := make([]string, 0, 10000)
	for i := range 10000 {
		items = append(items, fmt.Sprintf(`{"i":%d,"text":%q}`, i, strings.Repeat("x", 80)))
	}
	body := `{"size":42,"kind":"video","url":"https://example.com/v/1","tags":["a","b"],"meta":{"lang":"en"},"items":[` + strings.Join(items, ",") + `]}`
	require.Greater(tb, len(body), 1<<20-100000)
	return json.RawMessage(body)
}

// fiveConditions is an all of 5 conditions, read back from JSON as a
// pipeline recorded in the ledger is.
func fiveConditions(tb testing.TB) *pipeline.Condition {
	tb.Helper()
	c := &pipeline.Condition{}
	require.NoError(tb, json.Unmarshal([]byte(`{"op":"all","of":[
		{"op":"gt","path":"payload.size","value":10},
		{"op":"eq","path":"payload.kind","value":"video"},
		{"op":"regex","path":"payload.url","value":"^https://example\\.com/v/[0-9]+$"},
		{"op":"contains","path":"payload.tags","value":"b"},
		{"op":"exists","path":"payload.meta.lang"}]}`), c))
	return c
}

func BenchmarkConditionAllOfFiveOn1MB(b *testing.B) {
	payload := bigPayload(b)
	c := fiveConditions(b)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		ok, err := c.Eval(pipeline.Scope{Payload: payload})
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// TestConditionReadBackFromJSONHolds: the benchmark's condition holds, its
// payload is decoded once, and the regex of a condition read back from JSON is compiled once, when it
// is decoded (a bad pattern still fails at Eval).
func TestConditionReadBackFromJSONHolds(t *testing.T) {
	payload := bigPayload(t)
	all := fiveConditions(t)
	ok, err := all.Eval(pipeline.Scope{Payload: payload})
	require.NoError(t, err)
	require.True(t, ok)

	// The payload is decoded once per Scope, not once per path read.
	one := &pipeline.Condition{Op: "exists", Path: "payload.size"}
	allocsOne := testing.AllocsPerRun(3, func() { _, _ = one.Eval(pipeline.Scope{Payload: payload}) })
	allocsAll := testing.AllocsPerRun(3, func() { _, _ = all.Eval(pipeline.Scope{Payload: payload}) })
	require.Less(t, allocsAll, 1.5*allocsOne, "all of 5 decodes the payload once")
	scope := pipeline.NewScope(payload, nil, nil)
	_, _ = one.Eval(scope)
	require.Less(t, testing.AllocsPerRun(3, func() { _, _ = all.Eval(scope) }), 100.0, "a Scope made by NewScope decodes once for all its uses")

	c := &pipeline.Condition{}
	require.NoError(t, json.Unmarshal([]byte(`{"op":"regex","path":"payload.url","value":"^a"}`), c))
	allocs := testing.AllocsPerRun(100, func() {
		ok, err := c.Eval(pipeline.Scope{Payload: json.RawMessage(`{"url":"abc"}`)})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
	})
	require.Less(t, allocs, 30.0, "the regex is not compiled per evaluation (44 allocations when it was)")

	bad := &pipeline.Condition{}
	require.NoError(t, json.Unmarshal([]byte(`{"op":"regex","path":"payload.url","value":"a("}`), bad))
	_, err = bad.Eval(pipeline.Scope{Payload: json.RawMessage(`{"url":"abc"}`)})
	require.ErrorContains(t, err, "regex")
}
