package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
)

// TestGroupWritableConfigDirectoryRefused: a group member who may write
// the config directory can rename their own tokens.yaml (0644, theirs)
// and a matching .checksums into it, so such a directory refuses Load,
// LoadUnlocked and config lock alike, whatever the files' own modes.
func TestGroupWritableConfigDirectoryRefused(t *testing.T) {
	t.Parallel()
	path := tokensConfig(t)
	dir := filepath.Dir(path)
	_, _, err := config.Lock(path)
	require.NoError(t, err)
	_, err = config.Load(path)
	require.NoError(t, err)

	for _, tc := range []struct{ dir, name string }{
		{dir: dir, name: "the config directory"},
		{dir: filepath.Join(dir, "scopes"), name: "a directory between a scopes file and the config directory"},
	} {
		require.NoError(t, os.Chmod(tc.dir, 0o775), tc.name)
		_, err = config.Load(path)
		require.Error(t, err, tc.name)
		require.Contains(t, strings.Join(validationErrors(t, err), "\n"), "directory "+tc.dir+" may be written by its group (mode 0775)", tc.name)
		_, err = config.LoadUnlocked(path)
		require.Error(t, err, tc.name)
		_, _, err = config.Lock(path)
		require.Error(t, err, "config lock must not record files Load refuses: %s", tc.name)

		// A sticky directory owned by the user or root is fine, like /tmp.
		require.NoError(t, os.Chmod(tc.dir, 0o775|os.ModeSticky), tc.name)
		_, err = config.Load(path)
		require.NoError(t, err, tc.name)
		require.NoError(t, os.Chmod(tc.dir, 0o755))
	}
}

// TestForeignOwnedTokensFileRefused: a tokens file or .checksums owned by
// another user (not root) is refused even at mode 0600, and config lock
// does not record it. Needs root to chown; the decision itself is tested
// with an injected uid in TestFilePermissionDecision.
func TestForeignOwnedTokensFileRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root; TestFilePermissionDecision covers the decision")
	}
	path := tokensConfig(t)
	dir := filepath.Dir(path)
	_, _, err := config.Lock(path)
	require.NoError(t, err)
	for _, file := range []string{filepath.Join(dir, "tokens.yaml"), filepath.Join(dir, ".checksums")} {
		require.NoError(t, os.Chown(file, 4242, 4242))
		_, err = config.Load(path)
		require.Error(t, err, file)
		require.Contains(t, strings.Join(validationErrors(t, err), "\n"), "is owned by user 4242", file)
		_, _, err = config.Lock(path)
		require.Error(t, err, file)
		require.NoError(t, os.Chown(file, 0, 0))
	}
	_, err = config.Load(path)
	require.NoError(t, err)
}

// TestSymlinkedTokensFile: a tokens file that is a symlink is checked as
// the file it resolves to, the file read: a group-writable target, or a
// target in a group-writable directory, is refused.
func TestSymlinkedTokensFile(t *testing.T) {
	t.Parallel()
	path := tokensConfig(t)
	dir := filepath.Dir(path)
	elsewhere := filepath.Join(t.TempDir(), "shared")
	require.NoError(t, os.Mkdir(elsewhere, 0o700))
	tokens := filepath.Join(dir, "tokens.yaml")
	target := filepath.Join(elsewhere, "tokens.yaml")
	require.NoError(t, os.Rename(tokens, target))
	require.NoError(t, os.Symlink(target, tokens))
	_, _, err := config.Lock(path)
	require.NoError(t, err)
	_, err = config.Load(path)
	require.NoError(t, err)

	require.NoError(t, os.Chmod(target, 0o664))
	_, err = config.Load(path)
	require.Error(t, err)
	require.Contains(t, strings.Join(validationErrors(t, err), "\n"), "tokens.yaml: may be written by its group (mode 0664)")
	require.NoError(t, os.Chmod(target, 0o600))

	require.NoError(t, os.Chmod(elsewhere, 0o770))
	_, err = config.Load(path)
	require.Error(t, err)
	require.Contains(t, strings.Join(validationErrors(t, err), "\n"), "directory "+elsewhere+" may be written by its group")
}
