package config_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

// writeFiles writes name → content under dir (making directories) and
// returns dir/config.yaml.
func writeFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	return filepath.Join(dir, "config.yaml")
}

const (
	ciScopes    = `{"scopes": ["jobs:rw", "plugin:ro"]}`
	ciKeyHashOf = "dtk_example-key"
)

func TestTokens(t *testing.T) {
	t.Setenv("DUCTILE_TEST_ADMIN_KEY", "admin-key-from-env")
	t.Setenv("DUCTILE_TEST_HOOK_SECRET", "hook-secret-from-env")
	dir := t.TempDir()
	scopesHash := config.HashBytes([]byte(ciScopes))
	keyHash := config.HashBytes([]byte(ciKeyHashOf))
	path := writeFiles(t, dir, map[string]string{
		"config.yaml": "include: [tokens.yaml]\n",
		"tokens.yaml": `tokens:
  - name: ci
    key_hash: ` + keyHash + `
    scopes_file: scopes/ci.json
    scopes_hash: ` + scopesHash + `
  - name: admin
    key: ${DUCTILE_TEST_ADMIN_KEY}
    scopes_file: scopes/admin.json
    scopes_hash: ` + config.HashBytes([]byte(`{"scopes":["*"]}`)) + `
secrets:
  github: ${DUCTILE_TEST_HOOK_SECRET}
`,
		"scopes/ci.json":    ciScopes,
		"scopes/admin.json": `{"scopes":["*"]}`,
	})
	cfg, err := lockAndLoad(t, path)
	require.NoError(t, err)
	require.Len(t, cfg.Tokens, 2)
	require.Equal(t, config.Token{
		Name: "ci", KeyHash: keyHash, Scopes: []string{"jobs:rw", "plugin:ro"},
		ScopesFile: filepath.Join(dir, "scopes", "ci.json"), ScopesHash: scopesHash, File: filepath.Join(dir, "tokens.yaml"),
	}, cfg.Tokens[0])
	require.Equal(t, config.HashBytes([]byte("admin-key-from-env")), cfg.Tokens[1].KeyHash)
	require.Equal(t, map[string]string{"github": "hook-secret-from-env"}, cfg.Secrets)
	require.Equal(t, filepath.Join(dir, "tokens.yaml"), cfg.TokensFile())

	// Neither keys nor secrets reach the settings config.applied records.
	b, err := json.Marshal(cfg.Settings())
	require.NoError(t, err)
	for _, secret := range []string{"admin-key-from-env", "hook-secret-from-env", keyHash, cfg.Tokens[1].KeyHash} {
		require.NotContains(t, string(b), secret)
	}
	s := cfg.Settings()
	require.Regexp(t, `^blake3:[0-9a-f]{64}$`, s.Sections["tokens"])
	require.Regexp(t, `^blake3:[0-9a-f]{64}$`, s.Sections["secrets"])
	require.Contains(t, string(b), `"name":"ci","scopes":["jobs:rw","plugin:ro"]`)

	// A changed key changes the settings' hash.
	t.Setenv("DUCTILE_TEST_ADMIN_KEY", "another-key")
	again, err := config.Load(path)
	require.NoError(t, err)
	require.NotEqual(t, s.Hash, again.Settings().Hash)
	require.NotEmpty(t, config.DiffSettings(again.Settings(), s))
}

func TestTokensErrors(t *testing.T) {
	t.Setenv("DUCTILE_TEST_KEY", "k")
	t.Setenv("DUCTILE_TEST_EMPTY", "")
	good := config.HashBytes([]byte(ciScopes))
	key := config.HashBytes([]byte("x"))
	entry := func(name, extra string) string {
		return "  - name: " + name + "\n    scopes_file: ci.json\n    scopes_hash: " + good + "\n" + extra
	}
	for _, tc := range []struct {
		name   string
		tokens string
		scopes string // ci.json; default ciScopes
		want   []string
	}{
		{
			name:   "plaintext key",
			tokens: entry("ci", "    key: dtk_AAAAsecret\n"),
			want:   []string{"tokens.yaml:5: tokens[0].key: a key written in the file is plaintext: put it in the environment (key: ${DUCTILE_TOKEN_CI}) or store only its hash (key_hash: blake3:…; ductile config token create writes one)"},
		},
		{
			name:   "key pasted as its hash",
			tokens: entry("ci", "    key_hash: dtk_AAAAsecret\n"),
			want:   []string{"tokens.yaml:5: tokens[0].key_hash: this is a key, not its hash: the file must not hold it; revoke the token (ductile config token revoke) and create a new one"},
		},
		{
			name:   "malformed hash",
			tokens: entry("ci", "    key_hash: blake3:abc\n"),
			want:   []string{`tokens.yaml:5: tokens[0].key_hash: must be blake3: and 64 lowercase hex digits (the BLAKE3 hash of the key), got "blake3:abc"`},
		},
		{
			name:   "no key",
			tokens: entry("ci", ""),
			want:   []string{"tokens.yaml:2: tokens[0].key_hash: missing: set key_hash: blake3:<hash of the key> (ductile config token create writes it) or key: ${ENV_VAR} naming a variable that holds the key"},
		},
		{
			name:   "both",
			tokens: entry("ci", "    key: ${DUCTILE_TEST_KEY}\n    key_hash: "+key+"\n"),
			want:   []string{"tokens.yaml:5: tokens[0].key: set key or key_hash, not both: keep key_hash (the file then holds no key)"},
		},
		{
			name:   "empty env key",
			tokens: entry("ci", "    key: ${DUCTILE_TEST_EMPTY}\n"),
			want:   []string{"tokens.yaml:5: tokens[0].key: the environment variable holds an empty key: set it to the token's key"},
		},
		{
			name:   "duplicate name",
			tokens: entry("ci", "    key_hash: "+key+"\n") + entry("ci", "    key_hash: "+config.HashBytes([]byte("y"))+"\n"),
			want:   []string{"tokens.yaml:6: tokens[1].name: token \"ci\" is defined twice (first at tokens.yaml:2): rename or remove one"},
		},
		{
			name:   "same key",
			tokens: entry("ci", "    key_hash: "+key+"\n") + entry("bot", "    key_hash: "+key+"\n"),
			want:   []string{"tokens.yaml:6: tokens[1]: token \"bot\" has the same key as token \"ci\": give each token its own key (ductile config token create makes one)"},
		},
		{
			name:   "unknown scope",
			tokens: entry("ci", "    key_hash: "+key+"\n"),
			scopes: `{"scopes": ["jobs:rw", "job:ro"]}`,
			want: []string{
				`tokens.yaml:3: tokens[0].scopes_file: scopes file ci.json: unknown scope "job:ro": did you mean jobs:ro? (valid: plugin:ro, plugin:rw, jobs:ro, jobs:rw, events:ro, events:rw, worker, topics:ro, topics:rw, *, worker:plugin=NAME)`,
				"tokens.yaml:4: tokens[0].scopes_hash: scopes file ci.json does not match its hash (the file hashes to " + config.HashBytes([]byte(`{"scopes": ["jobs:rw", "job:ro"]}`)) + "): if you changed it, set scopes_hash: " + config.HashBytes([]byte(`{"scopes": ["jobs:rw", "job:ro"]}`)) + "; if not, restore the file",
			},
		},
		{
			name:   "missing scopes file",
			tokens: "  - name: ci\n    key_hash: " + key + "\n    scopes_file: nope.json\n    scopes_hash: " + good + "\n",
			want:   []string{"tokens.yaml:4: tokens[0].scopes_file: scopes file nope.json not found (looked for {dir}/nope.json, relative to the directory of tokens.yaml): fix the path, or create the token again with ductile config token create"},
		},
		{
			name:   "missing scopes hash",
			tokens: "  - name: ci\n    key_hash: " + key + "\n    scopes_file: ci.json\n",
			want:   []string{"tokens.yaml:2: tokens[0].scopes_hash: missing: add scopes_hash: " + good + " (the hash of ci.json as it is now) so that a change to the scopes file is caught"},
		},
		{
			name:   "bad scopes json",
			tokens: entry("ci", "    key_hash: "+key+"\n"),
			scopes: `{"scope": ["jobs:rw"]}`,
			want: []string{
				`tokens.yaml:3: tokens[0].scopes_file: scopes file ci.json is not {"scopes": [...]}: json: unknown field "scope"`,
				"tokens.yaml:4: tokens[0].scopes_hash: scopes file ci.json does not match its hash",
			},
		},
		{
			name:   "unknown key",
			tokens: entry("ci", "    key_hash: "+key+"\n    scope: [jobs:ro]\n"),
			want:   []string{"tokens.yaml:6: tokens[0].scope: unknown key (valid keys: key, key_hash, name, scopes_file, scopes_hash)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			scopes := tc.scopes
			if scopes == "" {
				scopes = ciScopes
			}
			path := writeFiles(t, dir, map[string]string{
				"config.yaml": "include: [tokens.yaml]\n",
				"tokens.yaml": "tokens:\n" + tc.tokens,
				"ci.json":     scopes,
			})
			_, err := config.Load(path)
			var ve *config.ValidationError
			require.True(t, errors.As(err, &ve), "%v", err)
			var got []string
			for _, fe := range ve.Errors {
				got = append(got, fe.Error())
			}
			// Without .checksums the tokens file (and a scopes file read)
			// is refused too, in the same run, after what is wrong inside
			// the files.
			require.Greater(t, len(got), len(tc.want), "%s", strings.Join(got, "\n"))
			require.Contains(t, got[len(tc.want)], "tokens.yaml: holds tokens, secrets, scopes or webhooks, and there is no .checksums")
			for _, e := range got[len(tc.want):] {
				require.Contains(t, e, "there is no .checksums")
			}
			for i, w := range tc.want {
				require.Contains(t, got[i], strings.ReplaceAll(w, "{dir}", dir))
			}
		})
	}
}

func TestSecretsErrors(t *testing.T) {
	path := writeFiles(t, t.TempDir(), map[string]string{"config.yaml": "secrets:\n  github: ''\n  bad/name: x\n"})
	_, err := config.Load(path)
	require.EqualError(t, err, "config.yaml:2: secrets.github: must be a non-empty string, e.g. github: ${GITHUB}\n"+
		`config.yaml:3: secrets.bad/name: invalid secret name "bad/name": use letters, digits and _ . - (up to 64)`+"\n"+
		"config.yaml: holds tokens, secrets, scopes or webhooks, and there is no .checksums to check it against: record the files' hashes with ductile config lock --config "+path+" (once; token create and revoke keep it current)")
}
