package pluginhost_test

import (
	"encoding/json"
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

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"status":"ok","result":"x","events":[{"type":"a"}],"state_updates":{}}`))
	f.Add([]byte(`{"status":"error","retry":false}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := pluginhost.ParseResponse(data)
		if err == nil && r.Status != pluginhost.StatusOK && r.Status != pluginhost.StatusError {
			t.Fatalf("accepted status %q", r.Status)
		}
	})
}
