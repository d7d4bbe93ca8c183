package pluginsource

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gitRepo makes a repository with two commits, the first tagged v1, and
// returns it with both commit ids.
func gitRepo(t *testing.T) (dir, first, second string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir = t.TempDir()
	env := append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t",
		"GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org")
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	run("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), []byte("one"), 0o644))
	run("add", "-A")
	run("commit", "-q", "-m", "one")
	run("tag", "v1")
	first = run("rev-parse", "HEAD")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), []byte("two"), 0o644))
	run("commit", "-qam", "two")
	return dir, first, run("rev-parse", "HEAD")
}

// TestFetchGitRefs: a file:// URL at HEAD, a tag, a full commit id and an
// abbreviated one (which a shallow fetch cannot ask for: the full fetch
// resolves it) each give the tree of that commit.
func TestFetchGitRefs(t *testing.T) {
	t.Parallel()
	dir, first, second := gitRepo(t)
	for _, tc := range []struct{ ref, want, content string }{
		{"", second, "two"}, {"main", second, "two"}, {"v1", first, "one"}, {first, first, "one"}, {first[:10], first, "one"},
	} {
		f, err := fetch(context.Background(), Source{Location: "file://" + dir, Kind: KindGit, Ref: tc.ref})
		require.NoError(t, err, tc.ref)
		require.Equal(t, tc.want, f.commit, tc.ref)
		data, err := os.ReadFile(filepath.Join(f.dir, "file"))
		require.NoError(t, err)
		require.Equal(t, tc.content, string(data), tc.ref)
		f.remove()
		require.NoDirExists(t, f.dir)
	}
	_, err := fetch(context.Background(), Source{Location: "file://" + dir, Kind: KindGit, Ref: "nope"})
	require.ErrorContains(t, err, `no branch, tag or commit "nope"`)
	_, err = fetch(context.Background(), Source{Location: "file://" + dir, Kind: KindGit, Ref: "--upload-pack=touch /tmp/x"})
	require.ErrorContains(t, err, "is not a branch, tag or commit")
}
