package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

// TestTokenEdits: a token created in a config without a tokens file makes
// tokens.yaml, includes it and writes .checksums; the key loads as its
// hash; a second token goes into the same file; revoking one leaves the
// other loadable, and the refusals carry their kind and a hint.
func TestTokenEdits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeFiles(t, dir, map[string]string{"config.yaml": "# my config\nstate_dir: state\n"})
	cfg, err := config.LoadUnlocked(path)
	require.NoError(t, err)

	plan, err := config.PlanToken(cfg, "ci", []string{"jobs:rw"})
	require.NoError(t, err)
	require.Equal(t, config.TokenPlan{
		Name: "ci", Scopes: []string{"jobs:rw"}, TokensFile: filepath.Join(dir, config.TokensFileName),
		ScopesFile: filepath.Join(dir, "scopes", "ci.json"), Included: true, WritesChecksums: true,
	}, plan)
	_, err = os.Stat(plan.TokensFile)
	require.ErrorIs(t, err, os.ErrNotExist, "a plan writes nothing")

	created, err := config.CreateToken(cfg, plan)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(created.Key, config.KeyPrefix))
	require.True(t, created.ChecksumsWritten)
	require.False(t, created.ChecksumsUpdated)
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(src), "# my config", "comments are kept")
	require.Contains(t, string(src), "include:\n  - tokens.yaml")

	cfg, err = config.Load(path)
	require.NoError(t, err)
	require.Len(t, cfg.Tokens, 1)
	require.Equal(t, config.HashBytes([]byte(created.Key)), cfg.Tokens[0].KeyHash)
	require.Equal(t, []string{"jobs:rw"}, cfg.Tokens[0].Scopes)

	_, err = config.PlanToken(cfg, "ci", []string{"jobs:ro"})
	requireEditError(t, err, config.ErrTokenExists, "revoke it first")
	_, err = config.PlanToken(cfg, "-bad", []string{"jobs:ro"})
	requireEditError(t, err, config.ErrInvalidToken, "letters, digits")
	_, err = config.PlanToken(cfg, "ok", []string{"jobs:maybe"})
	requireEditError(t, err, config.ErrInvalidToken, "valid scopes")

	plan, err = config.PlanToken(cfg, "admin", []string{"*"})
	require.NoError(t, err)
	require.False(t, plan.Included)
	require.False(t, plan.WritesChecksums)
	second, err := config.CreateToken(cfg, plan)
	require.NoError(t, err)
	require.True(t, second.ChecksumsUpdated)

	cfg, err = config.Load(path)
	require.NoError(t, err)
	_, err = config.PlanRevoke(cfg, "nobody")
	requireEditError(t, err, config.ErrNoToken, "token list")
	revoke, err := config.PlanRevoke(cfg, "ci")
	require.NoError(t, err)
	require.False(t, revoke.SharedScopesFile)
	revoked, err := config.RevokeToken(cfg, revoke)
	require.NoError(t, err)
	require.True(t, revoked.ChecksumsUpdated)
	_, err = os.Stat(filepath.Join(dir, "scopes", "ci.json"))
	require.ErrorIs(t, err, os.ErrNotExist)

	cfg, err = config.Load(path)
	require.NoError(t, err)
	require.Len(t, cfg.Tokens, 1)
	require.Equal(t, "admin", cfg.Tokens[0].Name)
}

func requireEditError(t *testing.T, err error, kind error, hint string) {
	t.Helper()
	var te *config.TokenEditError
	require.True(t, errors.As(err, &te), "%v is a *config.TokenEditError", err)
	require.ErrorIs(t, err, kind)
	require.Contains(t, te.Hint, hint)
}
