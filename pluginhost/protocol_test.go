package pluginhost_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
)

func TestRequestMarshalJSON(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("X", 3600))
	req := pluginhost.Request{
		JobID:      "j-1",
		Command:    "handle",
		Config:     json.RawMessage("{\n  \"url\": \"https://x/?a=1&b=<2>\",\n  \"n\": 1.0e3\n}"),
		State:      nil,
		Context:    json.RawMessage(`null`),
		Event:      json.RawMessage(` {"type":"a.b","payload":{"z":1,"a":2}} `),
		DeadlineAt: deadline,
	}
	got, err := req.MarshalJSON()
	require.NoError(t, err)
	// Values pass through byte for byte (no HTML escaping, no key
	// reordering, numbers untouched); only whitespace is removed.
	require.Equal(t,
		`{"protocol":2,"job_id":"j-1","command":"handle","config":{"url":"https://x/?a=1&b=<2>","n":1.0e3},"state":{},"context":{},"event":{"type":"a.b","payload":{"z":1,"a":2}},"deadline_at":"2026-03-04T04:06:07.00000089Z"}`,
		string(got))

	var back pluginhost.Request
	require.NoError(t, json.Unmarshal(got, &back))
	require.True(t, back.DeadlineAt.Equal(deadline))
	require.Equal(t, "handle", back.Command)
}

func TestRequestMarshalJSONOmitsEventAndZeroDeadline(t *testing.T) {
	t.Parallel()
	got, err := pluginhost.Request{Protocol: 2, JobID: "j", Command: "poll", Event: json.RawMessage("null")}.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `{"protocol":2,"job_id":"j","command":"poll","config":{},"state":{},"context":{}}`, string(got))
}

func TestRequestMarshalJSONRejects(t *testing.T) {
	t.Parallel()
	for name, req := range map[string]pluginhost.Request{
		"config array":  {Config: json.RawMessage(`[]`)},
		"state string":  {State: json.RawMessage(`"x"`)},
		"broken json":   {Context: json.RawMessage(`{"a":`)},
		"event scalar":  {Event: json.RawMessage(`42`)},
		"trailing data": {Config: json.RawMessage(`{} {}`)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := req.MarshalJSON()
			require.Error(t, err)
		})
	}
}

func TestParseResponse(t *testing.T) {
	t.Parallel()
	t.Run("full", func(t *testing.T) {
		t.Parallel()
		r, err := pluginhost.ParseResponse([]byte(`
			{"status":"error","error":"nope","retry":false,"result":"r",
			 "events":[{"type":"a","payload":[1]}],"state_updates":null,"logs":[{"level":"warn","message":"m"}],"extra":1}
		`))
		require.NoError(t, err)
		require.Equal(t, "error", r.Status)
		require.Equal(t, "nope", r.Error)
		require.NotNil(t, r.Retry)
		require.False(t, *r.Retry)
		require.Equal(t, "r", r.Result)
		require.Equal(t, []pluginhost.Event{{Type: "a", Payload: json.RawMessage(`[1]`)}}, r.Events)
		require.Nil(t, r.StateUpdates)
		require.Equal(t, []pluginhost.Log{{Level: "warn", Message: "m"}}, r.Logs)
	})
	t.Run("non-string result kept as JSON text", func(t *testing.T) {
		t.Parallel()
		r, err := pluginhost.ParseResponse([]byte(`{"status":"ok","result":{"count":3}}`))
		require.NoError(t, err)
		require.Equal(t, `{"count":3}`, r.Result)
		require.Nil(t, r.Retry)
	})
	for name, stdout := range map[string]string{
		"empty":                "  \n",
		"array":                `[{"status":"ok"}]`,
		"text":                 "hello",
		"two objects":          `{"status":"ok"}{"status":"ok"}`,
		"truncated":            `{"status":"ok"`,
		"no status":            `{"result":"x"}`,
		"unknown status":       `{"status":"done"}`,
		"event without type":   `{"status":"ok","events":[{"payload":{}}]}`,
		"state_updates array":  `{"status":"ok","state_updates":[1]}`,
		"wrong type for retry": `{"status":"error","retry":"no"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := pluginhost.ParseResponse([]byte(stdout))
			require.Error(t, err)
		})
	}
}

// A response the ledger cannot store as given used to pass: nested past
// SQLite's JSON depth limit, the completion was refused by the events
// table's json_valid CHECK (and retried for ever); invalid UTF-8 was stored
// and broke strict JSON readers. Both are protocol errors now.
func TestParseResponseRefusesWhatTheLedgerCannotStore(t *testing.T) {
	t.Parallel()
	nested := func(depth int) string { // an event payload nested depth levels below the response
		return strings.Repeat("[", depth) + strings.Repeat("]", depth)
	}
	// The response itself is one level, events a second, the event a third.
	for _, tc := range []struct {
		name, stdout, err string
	}{
		{"payload at the limit", `{"status":"ok","events":[{"type":"t","payload":` + nested(pluginhost.MaxResponseDepth-3) + `}]}`, ""},
		{"payload over the limit", `{"status":"ok","events":[{"type":"t","payload":` + nested(pluginhost.MaxResponseDepth-2) + `}]}`, "more than 512 levels deep"},
		{"payload 1000 deep", `{"status":"ok","events":[{"type":"t","payload":` + nested(1000) + `}]}`, "more than 512 levels deep"},
		{"state_updates 1000 deep", `{"status":"ok","state_updates":{"k":` + nested(999) + `}}`, "more than 512 levels deep"},
		{"brackets in strings do not count", `{"status":"ok","result":"` + nested(1000) + `\"[{"}`, ""},
		{"invalid UTF-8", "{\"status\":\"ok\",\"result\":\"caf\xe9\"}", "stdout is not valid UTF-8 (byte 28 of the response is 0xe9)"},
		{"truncated UTF-8", "{\"status\":\"ok\",\"result\":\"\xe2\x82\"}", "byte 25 of the response is 0xe2"},
		{"valid UTF-8", `{"status":"ok","result":"café ✓ 𝄞"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := pluginhost.ParseResponse([]byte(tc.stdout))
			if tc.err == "" {
				require.NoError(t, err)
				require.Equal(t, "ok", r.Status)
				return
			}
			require.ErrorContains(t, err, tc.err)
			require.Less(t, len(err.Error()), 300, "the error does not quote the response")
		})
	}
}
