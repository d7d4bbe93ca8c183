package config_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

// lockAndLoad does what a user does before starting a daemon whose config
// holds tokens, secrets or webhooks: ductile config lock (config.Lock,
// which loads the config as it is, and fails as Load would on an invalid
// one), then Load.
func lockAndLoad(t *testing.T, path string) (*config.Config, error) {
	t.Helper()
	if _, _, err := config.Lock(path); err != nil {
		return nil, err
	}
	return config.Load(path)
}

// loadable is the config file of testdata/<name>: the fixture itself, or,
// when it loads a high-security file, a copy (files 0600, as ductile
// writes them, whatever the checkout's umask gave the fixture) locked
// with config.Lock.
func loadable(t *testing.T, name string) string {
	t.Helper()
	src := fixture(t, name, "config.yaml")
	cfg, err := config.LoadUnverified(src)
	require.NoError(t, err)
	high := false
	for _, f := range cfg.Checksums() {
		high = high || cfg.HighSecurity(f.Path)
	}
	if !high {
		return src
	}
	dst := filepath.Join(t.TempDir(), name)
	require.NoError(t, filepath.WalkDir(fixture(t, name), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(fixture(t, name), path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	}))
	path := filepath.Join(dst, "config.yaml")
	_, _, err = config.Lock(path)
	require.NoError(t, err)
	return path
}

// tokensConfig writes a config including a tokens file with one token and
// its scopes file, all 0600, and returns the config file's path.
func tokensConfig(t *testing.T) string {
	t.Helper()
	return writeFiles(t, t.TempDir(), map[string]string{
		"config.yaml": "include: [tokens.yaml]\nservice: {max_workers: 2}\n",
		"tokens.yaml": "tokens:\n  - name: ci\n    key_hash: " + config.HashBytes([]byte(ciKeyHashOf)) +
			"\n    scopes_file: scopes/ci.json\n    scopes_hash: " + config.HashBytes([]byte(ciScopes)) + "\n",
		"scopes/ci.json": ciScopes,
	})
}

func validationErrors(t *testing.T, err error) []string {
	t.Helper()
	var ve *config.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	var out []string
	for _, fe := range ve.Errors {
		out = append(out, fe.Error())
	}
	return out
}

// TestHighSecurityFilesNeedChecksums: a config that loads tokens (or
// secrets, webhooks, a scopes file) is refused without .checksums, each
// such file named with the fix; once locked it loads. LoadUnlocked (for
// token create and revoke, which then lock) accepts it.
func TestHighSecurityFilesNeedChecksums(t *testing.T) {
	t.Parallel()
	path := tokensConfig(t)
	_, err := config.Load(path)
	require.Error(t, err)
	errs := validationErrors(t, err)
	require.Len(t, errs, 2, "%v", errs)
	require.True(t, strings.HasPrefix(errs[0], "tokens.yaml: holds tokens"), errs[0])
	require.True(t, strings.HasPrefix(errs[1], "scopes/ci.json: holds tokens"), errs[1])
	for _, e := range errs {
		require.Contains(t, e, "there is no .checksums")
		require.Contains(t, e, "ductile config lock --config "+path)
	}

	cfg, err := config.LoadUnlocked(path)
	require.NoError(t, err)
	require.Len(t, cfg.Tokens, 1)

	_, files, err := config.Lock(path)
	require.NoError(t, err)
	require.Len(t, files, 3)
	info, err := os.Stat(filepath.Join(filepath.Dir(path), ".checksums"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), "ductile writes .checksums 0600")
	cfg, err = config.Load(path)
	require.NoError(t, err)
	require.Empty(t, cfg.IntegrityWarnings)

	// Webhooks and secrets in the config file itself: the same.
	hooks := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(hooks, []byte("webhooks:\n  endpoints:\n    - {path: /hook, plugin: echo, secret_ref: h}\nsecrets:\n  h: x\n"), 0o600))
	_, err = config.Load(hooks)
	require.Error(t, err)
	require.Contains(t, err.Error(), "config.yaml: holds tokens, secrets, scopes or webhooks, and there is no .checksums")
}

// TestOrdinaryConfigNeedsNoChecksums: a config with no high-security file
// loads without .checksums, with no warning, whatever its mode.
func TestOrdinaryConfigNeedsNoChecksums(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("service: {max_workers: 2}\n"), 0o600))
	require.NoError(t, os.Chmod(path, 0o666))
	cfg, err := config.Load(path)
	require.NoError(t, err)
	require.Empty(t, cfg.IntegrityWarnings)
}

// TestHighSecurityFilePermissions: a high-security file or .checksums that
// a group or others may write is refused with the chmod that fixes it;
// one they may only read is a warning.
func TestHighSecurityFilePermissions(t *testing.T) {
	t.Parallel()
	path := tokensConfig(t)
	dir := filepath.Dir(path)
	_, _, err := config.Lock(path)
	require.NoError(t, err)
	tokens, scopes, sums := filepath.Join(dir, "tokens.yaml"), filepath.Join(dir, "scopes", "ci.json"), filepath.Join(dir, ".checksums")

	for _, tc := range []struct {
		file string
		mode fs.FileMode
		want string // "" loads
		warn string
	}{
		{file: tokens, mode: 0o620, want: "tokens.yaml: may be written by its group (mode 0620): whoever can write it can add a token or change what the config trusts; run chmod 600 " + tokens},
		{file: tokens, mode: 0o602, want: "may be written by others (mode 0602)"},
		{file: scopes, mode: 0o666, want: "scopes/ci.json: may be written by its group and others (mode 0666)"},
		{file: sums, mode: 0o622, want: ".checksums: may be written by its group and others (mode 0622)"},
		{file: tokens, mode: 0o644, warn: "tokens.yaml: may be read by its group and others (mode 0644): it names tokens, secrets or hashes; run chmod 600 " + tokens + ", or leave it if the sharing is intended (only a warning)"},
		{file: sums, mode: 0o640, warn: ".checksums: may be read by its group (mode 0640)"},
		{file: path, mode: 0o666}, // the config file holds none of them: its mode is the operator's
		{file: tokens, mode: 0o600},
	} {
		require.NoError(t, os.Chmod(tc.file, tc.mode))
		cfg, err := config.Load(path)
		switch {
		case tc.want != "":
			require.Error(t, err, "%s %o", tc.file, tc.mode)
			errs := validationErrors(t, err)
			require.Len(t, errs, 1)
			require.Contains(t, errs[0], tc.want)
			// token create and revoke check the modes too.
			_, err = config.LoadUnlocked(path)
			require.Error(t, err)
		case tc.warn != "":
			require.NoError(t, err)
			require.Len(t, cfg.IntegrityWarnings, 1)
			require.Contains(t, cfg.IntegrityWarnings[0].Error(), tc.warn)
		default:
			require.NoError(t, err)
			require.Empty(t, cfg.IntegrityWarnings)
		}
		require.NoError(t, os.Chmod(tc.file, 0o600))
	}
}
