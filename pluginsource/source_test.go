package pluginsource

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseSourceSplitsTheRefAfterThePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, loc, ref string }{
		{"https://github.com/owner/ductile-plugins.git", "https://github.com/owner/ductile-plugins.git", ""},
		{"https://github.com/owner/ductile-plugins@v1.2.0", "https://github.com/owner/ductile-plugins", "v1.2.0"},
		{"https://user@host.example/owner/repo.git", "https://user@host.example/owner/repo.git", ""},
		{"https://user@host.example/owner/repo.git@feature/x", "https://user@host.example/owner/repo.git", "feature/x"},
		{"git@github.com:owner/repo.git", "git@github.com:owner/repo.git", ""},
		{"git@github.com:owner/repo.git@main", "git@github.com:owner/repo.git", "main"},
		{"ssh://git@host:2222/owner/repo", "ssh://git@host:2222/owner/repo", ""},
	} {
		src, err := ParseSource(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, KindGit, src.Kind, tc.in)
		require.Equal(t, tc.loc, src.Location, tc.in)
		require.Equal(t, tc.ref, src.Ref, tc.in)
	}
}

func TestParseSourceTellsFoldersFromRepositories(t *testing.T) {
	t.Parallel()
	folder := t.TempDir()
	src, err := ParseSource(folder)
	require.NoError(t, err)
	require.Equal(t, Source{Location: folder, Kind: KindFolder}, src)

	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	src, err = ParseSource(repo + "@abc123")
	require.NoError(t, err)
	require.Equal(t, Source{Location: repo, Kind: KindGit, Ref: "abc123"}, src)

	_, err = ParseSource(filepath.Join(folder, "missing"))
	require.ErrorContains(t, err, "neither a folder nor a git URL")
	_, err = ParseSource("ext::sh -c touch% /tmp/pwned")
	require.ErrorContains(t, err, "neither a folder nor a git URL")
	_, err = ParseSource("fd://x/y")
	require.ErrorContains(t, err, "git URLs here are")
}

func TestPickChoosesOnePluginOfMany(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	for _, name := range []string{"a", "b"} {
		require.NoError(t, os.Mkdir(filepath.Join(top, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(top, name, "manifest.yaml"), []byte("name: plugin-"+name+"\n"), 0o644))
	}
	_, _, err := pick(top, "", "")
	require.ErrorIs(t, err, ErrNoPlugin)
	require.ErrorContains(t, err, "(a, b)")
	dir, rel, err := pick(top, "b", "")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(top, "b"), dir)
	require.Equal(t, "b", rel)
	_, rel, err = pick(top, "", "plugin-a")
	require.NoError(t, err)
	require.Equal(t, "a", rel)
	_, _, err = pick(top, "../x", "")
	require.ErrorContains(t, err, "inside the source")
}

func TestSweepLeftoversRemovesOnlyOldStagingDirectories(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, name := range []string{".ductile-stage-1", ".ductile-old-2", ".ductile-stage-new", "plugin", ".other"} {
		require.NoError(t, os.Mkdir(filepath.Join(root, name), 0o755))
	}
	old := time.Now().Add(-2 * staleAfter)
	for _, name := range []string{".ductile-stage-1", ".ductile-old-2", "plugin", ".other"} {
		require.NoError(t, os.Chtimes(filepath.Join(root, name), old, old))
	}
	sweepLeftovers(root, time.Now().Add(-staleAfter))
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	require.Equal(t, []string{".ductile-stage-new", ".other", "plugin"}, left)
}
