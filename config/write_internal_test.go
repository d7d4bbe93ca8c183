package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// An edited file keeps its mode and, reached through a link, stays behind
// the link; a new file is made 0600 (it may hold keys).
func TestWriteFileAtomicKeepsModeAndLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.yaml")
	require.NoError(t, os.WriteFile(real, []byte("a: 1\n"), 0o644))
	link := filepath.Join(dir, "ductile.yaml")
	require.NoError(t, os.Symlink(real, link))

	require.NoError(t, writeFileAtomic(link, []byte("a: 2\n")))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "the link is still a link")
	b, err := os.ReadFile(real)
	require.NoError(t, err)
	require.Equal(t, "a: 2\n", string(b))
	fi, err = os.Stat(real)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())

	fresh := filepath.Join(dir, "tokens.yaml")
	require.NoError(t, writeFileAtomic(fresh, []byte("tokens: []\n")))
	fi, err = os.Stat(fresh)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
