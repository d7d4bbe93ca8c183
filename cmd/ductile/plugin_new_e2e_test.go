package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPluginNewPassesItsTestAndRunsAsAJob: for each language, the scaffold
// plugin new writes passes its own test as it is, config check loads it
// from a plugin root, and a job of it runs through the daemon and succeeds.
func TestPluginNewPassesItsTestAndRunsAsAJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lang, name string
		test       []string
	}{
		{"sh", "hello-sh", []string{"./test.sh"}},
		{"python", "hello_py", []string{"python3", "test_plugin.py"}},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			t.Parallel()
			if _, err := exec.LookPath(tc.test[0]); err != nil && tc.lang == "python" {
				t.Skipf("python3 is not installed: the Python scaffold's test cannot run (%v)", err)
			}
			root := filepath.Join(t.TempDir(), "plugins") // made by plugin new
			var out struct {
				Name, Lang, Dir, Root, Test string
				Files                       []string
				DryRun                      bool `json:"dry_run"`
			}
			r := mustRun(t, nil, "plugin", "new", tc.name, "--lang", tc.lang, "--dir", root, "--json")
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), "%s", r)
			dir := filepath.Join(root, tc.name)
			require.Equal(t, dir, out.Dir)
			require.Equal(t, root, out.Root)
			require.False(t, out.DryRun)
			for _, f := range append([]string{"manifest.yaml", "README.md"}, out.Files...) {
				require.FileExists(t, filepath.Join(dir, f))
			}
			require.Len(t, out.Files, 5, "manifest, entrypoint, SDK, test, README")

			// Its own test, as its README says to run it.
			test := exec.Command(tc.test[0], tc.test[1:]...)
			test.Dir = dir
			test.Env = cleanEnv(t)
			got, err := test.CombinedOutput()
			require.NoError(t, err, "the scaffold's own test:\n%s", got)
			t.Logf("%s", got)

			w := newJobWorld(t, "plugin_roots: ["+root+"]\n")
			r = w.run("config", "check")
			require.Equal(t, 0, r.code, "%s", r)
			require.Contains(t, r.stdout, tc.name)
			var list struct {
				Plugins []struct{ Name string }
				Skipped []struct{ Name, Reason string }
			}
			w.runJSON(0, &list, "plugin", "list", "--json")
			require.Empty(t, list.Skipped)
			var names []string
			for _, p := range list.Plugins {
				names = append(names, p.Name)
			}
			require.Contains(t, names, tc.name)

			w.startDaemon()
			var job struct {
				Status   string
				Response struct{ Status, Result string }
			}
			start := time.Now()
			w.runJSON(0, &job, "plugin", "run", tc.name, "--payload", `{"name":"Ada"}`, "--wait", "--timeout", "60s", "--json")
			t.Logf("a job of the %s scaffold through the daemon: %v", tc.lang, time.Since(start))
			require.Equal(t, "succeeded", job.Status)
			require.Equal(t, "ok", job.Response.Status)
			require.Equal(t, "hello, Ada", job.Response.Result)
		})
	}
}

// TestPluginNewRefuses: an existing folder (left untouched: exit 1,
// conflict), a name the manifest refuses, a missing or unknown --lang (exit
// 2, nothing written); --dry-run lists the files and writes nothing.
func TestPluginNewRefuses(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	existing := filepath.Join(root, "taken")
	require.NoError(t, os.Mkdir(existing, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(existing, "keep"), []byte("mine"), 0o644))

	r := ductile(t, nil, "plugin", "new", "taken", "--lang", "sh", "--dir", root, "--json")
	require.Equal(t, 1, r.code, "%s", r)
	var e struct {
		Error struct{ Code, Message, Hint string }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stderr), &e), "%s", r)
	require.Equal(t, "conflict", e.Error.Code)
	require.Contains(t, e.Error.Message, existing+" already exists")
	require.Contains(t, e.Error.Hint, "choose another NAME or --dir")
	entries, err := os.ReadDir(existing)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the existing folder is left as it was")

	for _, args := range [][]string{
		{"plugin", "new", "bad name", "--lang", "sh"},
		{"plugin", "new", ".hidden", "--lang", "python"},
		{"plugin", "new", "a/b", "--lang", "sh"},
		{"plugin", "new", "ok", "--lang", "go"},
		{"plugin", "new", "ok"},
		{"plugin", "new", "--lang", "sh"},
	} {
		r := ductile(t, nil, append(args, "--dir", root)...)
		require.Equal(t, 2, r.code, "%q: %s", args, r)
		require.True(t, strings.HasPrefix(r.stderr, "ductile: "), "%q: %s", args, r)
	}

	r = mustRun(t, nil, "plugin", "new", "later", "--lang", "python", "--dir", root, "--dry-run")
	require.Contains(t, r.stdout, "would write (dry run)")
	require.Contains(t, r.stdout, "test_plugin.py")
	require.Contains(t, r.stdout, "ductile.py")
	require.NoDirExists(t, filepath.Join(root, "later"))
	entries, err = os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the folder that was there")
}
