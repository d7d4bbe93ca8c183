package auth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
)

// loadTokens writes a config whose tokens file holds one token per
// name → scopes with key "key-<name>", and loads it.
func loadTokens(t *testing.T, tokens map[string]string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	file := "tokens:\n"
	for name, scopes := range tokens {
		scopesJSON := `{"scopes": ` + scopes + `}`
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), []byte(scopesJSON), 0o600))
		file += "  - name: " + name + "\n    key_hash: " + config.HashBytes([]byte("key-"+name)) +
			"\n    scopes_file: " + name + ".json\n    scopes_hash: " + config.HashBytes([]byte(scopesJSON)) + "\n"
	}
	file += "secrets:\n  github: s3cret\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(file), 0o600))
	// As a user does before starting the daemon: ductile config lock.
	_, _, err := config.Lock(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	cfg, err := config.Load(filepath.Join(dir, "config.yaml"))
	require.NoError(t, err)
	return cfg
}

func TestRegistryCheck(t *testing.T) {
	t.Parallel()
	r := auth.New(loadTokens(t, map[string]string{
		"reader": `["jobs:ro"]`,
		"writer": `["plugin:rw", "events:ro"]`,
		"admin":  `["*"]`,
	}))
	require.Equal(t, 3, r.Len())
	for _, tc := range []struct {
		name, header string
		need         auth.Scope
		token        string
		err          error
	}{
		{"no header", "", auth.JobsRO, "", auth.ErrUnauthorized},
		{"basic scheme", "Basic a2V5LXJlYWRlcg==", auth.JobsRO, "", auth.ErrUnauthorized},
		{"scheme only", "Bearer", auth.JobsRO, "", auth.ErrUnauthorized},
		{"empty key", "Bearer ", auth.JobsRO, "", auth.ErrUnauthorized},
		{"two words", "Bearer key-reader extra", auth.JobsRO, "", auth.ErrUnauthorized},
		{"key without scheme", "key-reader", auth.JobsRO, "", auth.ErrUnauthorized},
		{"unknown key", "Bearer key-nobody", auth.JobsRO, "", auth.ErrUnauthorized},
		{"key hash as key", "Bearer " + config.HashBytes([]byte("key-reader")), auth.JobsRO, "", auth.ErrUnauthorized},
		{"prefix of a key", "Bearer key-read", auth.JobsRO, "", auth.ErrUnauthorized},
		{"in scope", "Bearer key-reader", auth.JobsRO, "reader", nil},
		{"scheme case", "bearer key-reader", auth.JobsRO, "reader", nil},
		{"out of scope", "Bearer key-reader", auth.JobsRW, "reader", auth.ErrForbidden},
		{"other area", "Bearer key-reader", auth.PluginRO, "reader", auth.ErrForbidden},
		{"write implies read", "Bearer key-writer", auth.PluginRO, "writer", nil},
		{"write", "Bearer key-writer", auth.PluginRW, "writer", nil},
		{"read does not imply write", "Bearer key-writer", auth.EventsRW, "writer", auth.ErrForbidden},
		{"all", "Bearer key-admin", auth.EventsRW, "admin", nil},
		{"all jobs", "Bearer key-admin", auth.JobsRW, "admin", nil},
	} {
		token, err := r.Check(tc.header, tc.need)
		require.ErrorIs(t, err, tc.err, tc.name)
		if tc.err == nil {
			require.NoError(t, err, tc.name)
		}
		require.Equal(t, tc.token, token, tc.name)
	}
}

func TestRegistryEmpty(t *testing.T) {
	t.Parallel()
	for _, r := range []*auth.Registry{auth.New(nil), auth.New(config.Default())} {
		require.Zero(t, r.Len())
		_, err := r.Check("Bearer anything", auth.JobsRO)
		require.ErrorIs(t, err, auth.ErrUnauthorized)
		_, ok := r.Secret("github")
		require.False(t, ok)
	}
}

func TestRegistrySecrets(t *testing.T) {
	t.Parallel()
	r := auth.New(loadTokens(t, map[string]string{"reader": `["jobs:ro"]`}))
	v, ok := r.Secret("github")
	require.True(t, ok)
	require.Equal(t, []byte("s3cret"), v)
	v[0] = 'X' // a caller's change does not reach the registry
	v, _ = r.Secret("github")
	require.Equal(t, []byte("s3cret"), v)
	_, ok = r.Secret("gitlab")
	require.False(t, ok)
	require.Equal(t, []auth.TokenInfo{{Name: "reader", Scopes: []auth.Scope{auth.JobsRO}}}, r.Tokens())
}

// The comparison runs over every token whatever matches: a benchmark, not
// a timing assertion, shows the cost of a check per token count.
func BenchmarkCheck(b *testing.B) {
	cfg := config.Default()
	for i := range 32 {
		name := "t" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		cfg.Tokens = append(cfg.Tokens, config.Token{Name: name, KeyHash: config.HashBytes([]byte("key-" + name)), Scopes: []string{"*"}})
	}
	r := auth.New(cfg)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Check("Bearer key-taa", auth.JobsRO); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWorkerPluginScopes: a token whose scopes file lists
// worker:plugin=NAME passes the worker routes' check and is limited to
// those plugins; worker or * is not limited; a malformed plugin scope does
// not load.
func TestWorkerPluginScopes(t *testing.T) {
	t.Parallel()
	r := auth.New(loadTokens(t, map[string]string{
		"gpu":    `["worker:plugin=render", "worker:plugin=transcode"]`,
		"any":    `["worker", "worker:plugin=render"]`,
		"reader": `["jobs:ro"]`,
	}))
	token, err := r.Check("Bearer key-gpu", auth.Worker)
	require.NoError(t, err)
	require.Equal(t, "gpu", token)
	_, err = r.Check("Bearer key-gpu", auth.JobsRO)
	require.ErrorIs(t, err, auth.ErrForbidden, "a plugin's worker scope grants nothing else")

	plugins, limited := r.WorkerPlugins("Bearer key-gpu")
	require.True(t, limited)
	require.Equal(t, []string{"render", "transcode"}, plugins)
	_, limited = r.WorkerPlugins("Bearer key-any")
	require.False(t, limited, "worker grants every plugin")
	_, limited = r.WorkerPlugins("Bearer key-reader")
	require.False(t, limited)

	dir := t.TempDir()
	scopes := `{"scopes": ["worker:plugin=../x"]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte(scopes), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("tokens:\n  - name: bad\n    key_hash: "+config.HashBytes([]byte("k"))+
		"\n    scopes_file: bad.json\n    scopes_hash: "+config.HashBytes([]byte(scopes))+"\n"), 0o600))
	_, _, err = config.Lock(filepath.Join(dir, "config.yaml"))
	if err == nil {
		_, err = config.Load(filepath.Join(dir, "config.yaml"))
	}
	require.ErrorContains(t, err, `unknown scope "worker:plugin=../x"`)
	require.ErrorContains(t, err, "worker:plugin=NAME")
}
