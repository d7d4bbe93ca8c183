package pluginhost_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
)

const mapManifest = `
manifest_spec: ductile.plugin
manifest_version: 1
name: withings
version: 1.0.0
protocol: 2
entrypoint: run.py
description: "Fetch health data from Withings API"
commands:
  poll:
    type: read
    description: "Fetch latest measurements"
  sync:
    type: write
    description: "Push weight data"
  oauth_callback:
    description: "Handle OAuth2 callback (type defaults to write)"
  health:
    type: read
config_keys:
  required: [client_id, client_secret]
  optional: [access_token]
fact_outputs:
  - when: {command: poll}
    from: state_updates
    fact_type: withings.snapshot
    compatibility_view: mirror_object
future_feature: {enabled: true}
`

// listManifest is shaped like the plugins written for the reference Ductile.
const listManifest = `
manifest_spec: ductile.plugin
manifest_version: 1
name: firecrawl
version: 0.1.0
protocol: 2
entrypoint: run.py
description: "Scrapes URLs"
concurrency_safe: false
commands:
  - name: scrape
    type: write
    description: "Submit a URL for scraping"
    idempotent: false
    retry_safe: true
    input_schema:
      url: string
      doc_id: string
    output_schema: {type: object}
    values:
      consume: [url]
      emit:
        - event: firecrawl.done
          values: [doc_id]
    timeout_hint: 30s
  - name: health
    type: read
    idempotent: true
config_keys:
  required: [firecrawl_api_key]
fact_outputs:
  - when: {command: health}
    from: state_updates
    fact_type: firecrawl.health
`

func TestParseManifestMapForm(t *testing.T) {
	t.Parallel()
	m, err := pluginhost.ParseManifest([]byte(mapManifest))
	require.NoError(t, err)

	require.Equal(t, "withings", m.Name)
	require.Equal(t, "1.0.0", m.Version)
	require.Equal(t, 2, m.Protocol)
	require.Equal(t, "run.py", m.Entrypoint)
	require.True(t, m.ConcurrencySafe, "default true")

	names := make([]string, 0, len(m.Commands))
	for _, c := range m.Commands {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"poll", "sync", "oauth_callback", "health"}, names, "YAML order kept")

	poll, ok := m.Command("poll")
	require.True(t, ok)
	require.Equal(t, pluginhost.CommandRead, poll.Type)
	require.Equal(t, "Fetch latest measurements", poll.Description)
	cb, ok := m.Command("oauth_callback")
	require.True(t, ok)
	require.Equal(t, pluginhost.CommandWrite, cb.Type, "paranoid default")
	_, ok = m.Command("nope")
	require.False(t, ok)

	require.Equal(t, pluginhost.ConfigKeys{Required: []string{"client_id", "client_secret"}, Optional: []string{"access_token"}}, m.ConfigKeys)
	require.Equal(t, []pluginhost.FactOutput{{
		When: pluginhost.FactOutputWhen{Command: "poll"}, From: "state_updates",
		FactType: "withings.snapshot", CompatibilityView: pluginhost.MirrorObject,
	}}, m.FactOutputsFor("poll"))
	require.Empty(t, m.FactOutputsFor("sync"))
	require.Equal(t, map[string]any{"future_feature": map[string]any{"enabled": true}}, m.Extra, "unknown keys kept")
}

func TestParseManifestListForm(t *testing.T) {
	t.Parallel()
	m, err := pluginhost.ParseManifest([]byte(listManifest))
	require.NoError(t, err)

	require.False(t, m.ConcurrencySafe)
	require.Len(t, m.Commands, 2)
	scrape, ok := m.Command("scrape")
	require.True(t, ok)
	require.Equal(t, pluginhost.CommandWrite, scrape.Type)
	require.NotNil(t, scrape.Idempotent)
	require.False(t, *scrape.Idempotent)
	require.NotNil(t, scrape.RetrySafe)
	require.True(t, *scrape.RetrySafe)
	require.Equal(t, map[string]any{"url": "string", "doc_id": "string"}, scrape.InputSchema)
	require.Equal(t, map[string]any{"type": "object"}, scrape.OutputSchema)
	require.Equal(t, &pluginhost.CommandValues{
		Consume: []string{"url"},
		Emit:    []pluginhost.EmittedValues{{Event: "firecrawl.done", Values: []string{"doc_id"}}},
	}, scrape.Values)
	require.Equal(t, map[string]any{"timeout_hint": "30s"}, scrape.Extra)

	health, ok := m.Command("health")
	require.True(t, ok)
	require.Equal(t, pluginhost.CommandRead, health.Type)
	require.Equal(t, pluginhost.MirrorObject, m.FactOutputs[0].CompatibilityView, "defaulted")
}

func TestParseManifestBareCommandNames(t *testing.T) {
	t.Parallel()
	m, err := pluginhost.ParseManifest([]byte(manifestWith(t, "commands", "[poll, handle]")))
	require.NoError(t, err)
	require.Equal(t, pluginhost.Commands{
		{Name: "poll", Type: pluginhost.CommandWrite},
		{Name: "handle", Type: pluginhost.CommandWrite},
	}, m.Commands)
}

// manifestWith returns a valid minimal manifest with key replaced by value
// (or removed when value is "-").
func manifestWith(t *testing.T, key, value string) string {
	t.Helper()
	base := [][2]string{
		{"manifest_spec", "ductile.plugin"},
		{"manifest_version", "1"},
		{"name", "demo"},
		{"version", "1.0.0"},
		{"protocol", "2"},
		{"entrypoint", "run.sh"},
		{"commands", "{poll: {type: read}}"},
	}
	var b strings.Builder
	found := false
	for _, kv := range base {
		if kv[0] == key {
			found = true
			if value == "-" {
				continue
			}
			kv[1] = value
		}
		b.WriteString(kv[0] + ": " + kv[1] + "\n")
	}
	if !found {
		b.WriteString(key + ": " + value + "\n")
	}
	return b.String()
}

func TestParseManifestValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, value, problem string
	}{
		{"wrong spec", "manifest_spec", "other.plugin", `manifest_spec must be "ductile.plugin", got "other.plugin"`},
		{"missing spec", "manifest_spec", "-", `manifest_spec must be "ductile.plugin", got ""`},
		{"wrong manifest version", "manifest_version", "2", "manifest_version must be 1, got 2"},
		{"missing name", "name", "-", "name is required"},
		{"bad name", "name", `"my plugin/x"`, `name "my plugin/x" must start with an ASCII letter or digit and contain only ASCII letters, digits, '_', '-' and '.'`},
		// Each of these holds only characters the old message allowed.
		{"name starting with -", "name", `"-x"`, `name "-x" must start with an ASCII letter or digit and contain only`},
		{"name starting with _", "name", `"_x"`, `name "_x" must start with an ASCII letter or digit and contain only`},
		{"name starting with .", "name", `".x"`, `name ".x" must start with an ASCII letter or digit and contain only`},
		{"name with a non-ASCII letter", "name", `"café"`, `name "café" must start with an ASCII letter or digit and contain only ASCII letters`},
		{"missing version", "version", "-", "version is required"},
		{"protocol 1", "protocol", "1", "protocol 1 is not supported (this core speaks protocol 2)"},
		{"missing protocol", "protocol", "-", "protocol 0 is not supported"},
		{"missing entrypoint", "entrypoint", "-", "entrypoint is required"},
		{"absolute entrypoint", "entrypoint", "/usr/bin/env", `entrypoint "/usr/bin/env" must be relative to the plugin directory`},
		{"dotdot entrypoint", "entrypoint", "../other/run.sh", `entrypoint "../other/run.sh" must not contain ".."`},
		{"inner dotdot entrypoint", "entrypoint", "bin/../../run.sh", `must not contain ".."`},
		{"dot entrypoint", "entrypoint", "./", `does not name a file`},
		{"no commands", "commands", "-", "at least one command is required"},
		{"empty commands map", "commands", "{}", "at least one command is required"},
		{"unknown type", "commands", "{poll: {type: execute}}", `command "poll": type "execute" must be "read" or "write"`},
		{"duplicate command", "commands", "[{name: poll}, {name: poll, type: read}]", `command "poll" is declared twice`},
		{"command without name", "commands", "[{type: read}]", "commands[0]: name is required"},
		{"commands scalar", "commands", "poll", "must be a mapping or a list"},
		{"command value scalar", "commands", "{poll: read}", "commands.poll (line 7): must be a mapping"},
		{"empty config key", "config_keys", `{required: [""]}`, "config_keys: empty key"},
		{"fact for unknown command", "fact_outputs", "[{when: {command: sync}, from: state_updates, fact_type: x}]", `when.command "sync" is not a declared command`},
		{"fact without command", "fact_outputs", "[{from: state_updates, fact_type: x}]", "fact_outputs[0]: when.command is required"},
		{"fact from elsewhere", "fact_outputs", "[{when: {command: poll}, from: events, fact_type: x}]", `from must be "state_updates", got "events"`},
		{"fact without type", "fact_outputs", "[{when: {command: poll}, from: state_updates}]", "fact_outputs[0]: fact_type is required"},
		{"fact view", "fact_outputs", "[{when: {command: poll}, from: state_updates, fact_type: x, compatibility_view: merge}]", `compatibility_view "merge" is not supported`},
		{"yaml type error", "concurrency_safe", "maybe", "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pluginhost.ParseManifest([]byte(manifestWith(t, tc.key, tc.value)))
			require.Error(t, err)
			require.ErrorIs(t, err, pluginhost.ErrInvalidManifest)
			require.Contains(t, err.Error(), tc.problem)
		})
	}
}

func TestParseManifestReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := pluginhost.ParseManifest([]byte("manifest_spec: x\nprotocol: 3\nentrypoint: ../a\ncommands: {poll: {type: nope}}\n"))
	var me *pluginhost.ManifestError
	require.True(t, errors.As(err, &me))
	require.Len(t, me.Problems, 7, "%q", me.Problems)
}

func TestParseManifestInvalidYAML(t *testing.T) {
	t.Parallel()
	_, err := pluginhost.ParseManifest([]byte("name: [unclosed\n"))
	require.ErrorIs(t, err, pluginhost.ErrInvalidManifest)
	require.Contains(t, err.Error(), "yaml")
}
