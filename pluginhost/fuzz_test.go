package pluginhost_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// FuzzParseManifest: a failure is always ErrInvalidManifest; a manifest
// that parses is valid, and written back as YAML it parses again, validates,
// and writes the same YAML, with the same name, version, entrypoint,
// commands, config keys and fact outputs. The corpus is in
// testdata/fuzz/FuzzParseManifest.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(mapManifest))
	f.Add([]byte(listManifest))
	f.Add([]byte("commands: [a, {name: b}]"))
	const head = "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: p\nversion: '1'\nprotocol: 2\nentrypoint: run.sh\n"
	for _, rest := range []string{
		"commands: [poll, {name: ' handle ', type: read}]\n",
		"commands: {poll: ~, handle: {type: read, values: {consume: [a], emit: [{event: e, values: [b]}]}}}\n",
		"commands: [poll]\nwhen: 2001-12-14\nratio: .nan\nbig: 18446744073709551616\nodd: {1: one, 2.5: [y, ~]}\nbin: !!binary aGk=\n",
		"commands: &c [poll]\nx-copy: *c\nconfig_keys: {required: [a, b], optional: [c]}\n",
		"commands: [poll]\nfact_outputs: [{when: {command: poll}, from: state_updates, fact_type: t}]\n",
		"commands:\n  - name: \"pöll\\u2028\"\n    description: |\n      two\n      lines\n",
	} {
		f.Add([]byte(head + rest))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := pluginhost.ParseManifest(data)
		if err != nil {
			require.ErrorIs(t, err, pluginhost.ErrInvalidManifest)
			return
		}
		require.NoError(t, m.Validate())

		written, err := yaml.Marshal(m)
		require.NoError(t, err)
		back, err := pluginhost.ParseManifest(written)
		require.NoError(t, err, "the manifest written back does not parse:\n%s", written)
		again, err := yaml.Marshal(back)
		require.NoError(t, err)
		require.Equal(t, string(written), string(again), "written, parsed and written again")
		require.Equal(t, essentials(m), essentials(back))
	})
}

// manifestEssentials is what the core reads from a manifest.
type manifestEssentials struct {
	Name, Version, Entrypoint, Description string
	Protocol                               int
	ConcurrencySafe                        bool
	Commands                               [][3]string // name, type, description
	ConfigKeys                             pluginhost.ConfigKeys
	FactOutputs                            []pluginhost.FactOutput
}

func essentials(m *pluginhost.Manifest) manifestEssentials {
	e := manifestEssentials{
		Name: m.Name, Version: m.Version, Entrypoint: m.Entrypoint, Description: m.Description,
		Protocol: m.Protocol, ConcurrencySafe: m.ConcurrencySafe, ConfigKeys: m.ConfigKeys, FactOutputs: m.FactOutputs,
	}
	for _, c := range m.Commands {
		e.Commands = append(e.Commands, [3]string{c.Name, string(c.Type), c.Description})
	}
	// A list written empty reads back empty, not absent: the same to the core.
	e.ConfigKeys.Required = append([]string(nil), e.ConfigKeys.Required...)
	e.ConfigKeys.Optional = append([]string(nil), e.ConfigKeys.Optional...)
	e.FactOutputs = append([]pluginhost.FactOutput(nil), e.FactOutputs...)
	return e
}

// FuzzParseResponse: a response that parses has status ok or error, typed
// events and an object (or no) state_updates; and a valid one (UTF-8 text)
// encoded as JSON parses again to the same response, which encodes the
// same. The corpus is in testdata/fuzz/FuzzParseResponse.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"status":"ok","result":"x","events":[{"type":"a"}],"state_updates":{}}`))
	f.Add([]byte(`{"status":"error","retry":false}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"status":"ok","result":{"n": 1.50},"events":[{"type":"a","payload":{"s":"<&>"},"dedupe_key":"k"}],"logs":[{"level":"info","message":"m"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := pluginhost.ParseResponse(data)
		if err != nil {
			return
		}
		require.Contains(t, []string{pluginhost.StatusOK, pluginhost.StatusError}, r.Status)
		for i, e := range r.Events {
			require.NotEmpty(t, e.Type, "events[%d]", i)
		}
		if r.StateUpdates != nil {
			require.Equal(t, byte('{'), bytes.TrimSpace(r.StateUpdates)[0], "state_updates is an object")
		}
		// What the parser accepts, the ledger can store exactly.
		require.True(t, utf8.Valid(data), "accepted a response that is not valid UTF-8")
		require.LessOrEqual(t, events.JSONDepth(data), pluginhost.MaxResponseDepth, "accepted a response nested past the limit")

		encoded, err := json.Marshal(r)
		require.NoError(t, err)
		back, err := pluginhost.ParseResponse(encoded)
		require.NoError(t, err, "the response encoded does not parse: %s", encoded)
		again, err := json.Marshal(back)
		require.NoError(t, err)
		require.Equal(t, string(encoded), string(again), "encoded, parsed and encoded again")
		require.Equal(t, r.Status, back.Status)
		require.Equal(t, r.Result, back.Result)
		require.Equal(t, r.Error, back.Error)
		require.Equal(t, r.Retry, back.Retry)
		require.Equal(t, append([]pluginhost.Log(nil), r.Logs...), append([]pluginhost.Log(nil), back.Logs...)) // [] and none are the same
		require.Len(t, back.Events, len(r.Events))
		for i, e := range r.Events {
			require.Equal(t, e.Type, back.Events[i].Type)
			require.Equal(t, e.DedupeKey, back.Events[i].DedupeKey)
			requireSameJSON(t, e.Payload, back.Events[i].Payload)
		}
		requireSameJSON(t, r.StateUpdates, back.StateUpdates)
	})
}

// requireSameJSON requires a and b to hold the same JSON value (numbers
// compared as written), or both to be empty.
func requireSameJSON(t *testing.T, a, b json.RawMessage) {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		require.Equal(t, len(a) == 0, len(b) == 0, "%s vs %s", a, b)
		return
	}
	decode := func(raw json.RawMessage) any {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		require.NoError(t, d.Decode(&v))
		return v
	}
	require.Equal(t, decode(a), decode(b))
}
