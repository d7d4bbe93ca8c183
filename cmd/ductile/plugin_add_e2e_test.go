package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pluginRepo is a git repository of several plugins, one folder each (like
// the public ductile-plugins collection), made with the real git.
type pluginRepo struct {
	t   *testing.T
	dir string
	env []string
}

func newPluginRepo(t *testing.T) *pluginRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	home := t.TempDir()
	r := &pluginRepo{t: t, dir: filepath.Join(t.TempDir(), "ductile-plugins"), env: append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org")}
	require.NoError(t, os.MkdirAll(r.dir, 0o755))
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *pluginRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = r.dir, r.env
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// plugin writes a plugin folder: its manifest (body after the fixed
// header) and a run.sh answering result.
func (r *pluginRepo) plugin(folder, name, version, body, result string) {
	r.t.Helper()
	dir := filepath.Join(r.dir, folder)
	require.NoError(r.t, os.MkdirAll(dir, 0o755))
	manifest := "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: " + name + "\nversion: " + version +
		"\nentrypoint: run.sh\n" + body
	require.NoError(r.t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	script := "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{\"status\":\"ok\",\"result\":\"" + result + "\"}'\n"
	require.NoError(r.t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755))
}

func (r *pluginRepo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

type addView struct {
	DryRun   bool   `json:"dry_run"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	Dir      string `json:"dir"`
	Commands []struct {
		Name, Type string
	} `json:"commands"`
	ConfigKeys struct {
		Required, Optional []string
	} `json:"config_keys"`
	Source struct {
		Source, Kind, Ref, Commit, Path string
	} `json:"source"`
	Files int      `json:"files"`
	Notes []string `json:"notes"`
}

type listView struct {
	Plugins []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Source  *struct {
			Source, Commit, Path string
		} `json:"source"`
	} `json:"plugins"`
	Skipped []struct {
		Name, Dir, Reason string
	} `json:"skipped"`
}

// TestPluginAddFromRepositoryOfManyPlugins is issue 26's proof for plugin
// add: from a local git repository holding several plugins, one is added,
// pinned, and run as a job; an update shows the manifest's changes; a
// tampered file is refused at start by the root's .checksums; a manifest
// with a mistake is refused at add with discovery's own message.
func TestPluginAddFromRepositoryOfManyPlugins(t *testing.T) {
	t.Parallel()
	repo := newPluginRepo(t)
	repo.plugin("weather", "weather", "0.1.0", "protocol: 2\ncommands:\n  poll: {type: read}\nconfig_keys: {optional: [city]}\n", "sunny")
	repo.plugin("greet", "greet", "1.0.0", "protocol: 2\ncommands: [handle]\n", "hello")
	repo.plugin("broken", "broken", "1.0.0", "protocol: 1\ncommands:\n  poll: {type: execute}\n", "x")
	first := repo.commit("three plugins")

	roots := t.TempDir()
	plugins := filepath.Join(roots, "plugins")
	w := newJobWorld(t, "plugin_roots: ["+plugins+"]\n")

	// Several plugins and none chosen: refused, naming them.
	r := w.run("plugin", "add", repo.dir)
	require.Equal(t, 2, r.code, r.String())
	require.Contains(t, r.stderr, "broken, greet, weather")

	// A dry run writes nothing.
	var add addView
	w.runJSON(0, &add, "plugin", "add", repo.dir, "--path", "weather", "--dry-run", "--json")
	require.True(t, add.DryRun)
	require.NoDirExists(t, filepath.Join(plugins, "weather"))

	w.runJSON(0, &add, "plugin", "add", repo.dir, "--path", "weather", "--json")
	require.Equal(t, "weather", add.Name)
	require.Equal(t, first, add.Source.Commit, "pinned to the repository's commit")
	require.Equal(t, "weather", add.Source.Path)
	require.Equal(t, []string{"city"}, add.ConfigKeys.Optional)
	require.Len(t, add.Commands, 1)
	require.Equal(t, "read", add.Commands[0].Type)
	require.Equal(t, 3, add.Files, "manifest, run.sh and the source record")
	sums, err := os.ReadFile(filepath.Join(plugins, ".checksums"))
	require.NoError(t, err)
	require.Contains(t, string(sums), "  weather/run.sh\n")
	require.NoDirExists(t, filepath.Join(plugins, "greet"), "one plugin at a time")

	// Added twice: refused.
	r = w.run("plugin", "add", repo.dir, "--name", "weather", "--json")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `"code":"conflict"`)

	var list listView
	w.runJSON(0, &list, "plugin", "list", "--json")
	var found bool
	for _, p := range list.Plugins {
		if p.Name == "weather" {
			found = true
			require.NotNil(t, p.Source)
			require.Equal(t, first, p.Source.Commit)
		}
	}
	require.True(t, found, "plugin list: %+v", list)

	var ran runView
	w.runJSON(0, &ran, "plugin", "run", "weather", "--json")
	require.Equal(t, "succeeded", ran.Status, "%+v", ran)
	var show struct {
		Source struct{ Commit string } `json:"source"`
	}
	w.runJSON(0, &show, "plugin", "show", "weather", "--json")
	require.Equal(t, first, show.Source.Commit, "plugin show names the pin")

	// An update: a new version with a new command, a new required key and
	// a changed script. The dry run shows it and changes nothing.
	repo.plugin("weather", "weather", "0.2.0", "protocol: 2\ncommands:\n  poll: {type: read}\n  alert: {type: write}\nconfig_keys: {required: [units], optional: [city]}\n", "rainy")
	second := repo.commit("weather 0.2.0")
	type updateView struct {
		DryRun  bool `json:"dry_run"`
		Changes struct {
			Version       [2]string `json:"version"`
			Commit        [2]string `json:"commit"`
			CommandsAdded []struct {
				Name, Type string
			} `json:"commands_added"`
			RequiredAdded []string `json:"required_config_added"`
			FilesChanged  []string `json:"files_changed"`
		} `json:"changes"`
		Plugin addView `json:"plugin"`
	}
	var up updateView
	w.runJSON(0, &up, "plugin", "update", "weather", "--dry-run", "--json")
	require.True(t, up.DryRun)
	require.Equal(t, [2]string{"0.1.0", "0.2.0"}, up.Changes.Version)
	require.Equal(t, [2]string{first, second}, up.Changes.Commit)
	require.Len(t, up.Changes.CommandsAdded, 1)
	require.Equal(t, "alert", up.Changes.CommandsAdded[0].Name)
	require.Equal(t, "write", up.Changes.CommandsAdded[0].Type)
	require.Equal(t, []string{"units"}, up.Changes.RequiredAdded)
	require.ElementsMatch(t, []string{"manifest.yaml", "run.sh"}, up.Changes.FilesChanged)
	require.NotEmpty(t, up.Plugin.Notes, "the missing required key is named")
	r = w.run("plugin", "update", "weather")
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "version     0.1.0 -> 0.2.0")
	require.Contains(t, r.stdout, "+ command   alert (write)")
	// Back to the first commit by its id: the pin moves.
	w.runJSON(0, &up, "plugin", "update", "weather", "@"+first, "--json")
	require.Equal(t, [2]string{second, first}, up.Changes.Commit)
	w.runJSON(0, &ran, "plugin", "run", "weather", "--json")
	require.Equal(t, "succeeded", ran.Status, "%+v", ran)

	// A tampered file: refused at start (and by every discovery).
	script := filepath.Join(plugins, "weather", "run.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho evil\n"), 0o755))
	p := w.startDaemon()
	p.waitLine(t, 0, func(line string) bool {
		return strings.Contains(line, "plugin skipped") && strings.Contains(line, "run.sh (changed)")
	})
	w.stopDaemon(p)
	w.runJSON(0, &list, "plugin", "list", "--json")
	for _, p := range list.Plugins {
		require.NotEqual(t, "weather", p.Name, "a tampered plugin does not load")
	}
	r = w.run("plugin", "run", "weather")
	require.NotEqual(t, 0, r.code, r.String())

	// Removed: its directory and its pins are gone.
	r = w.run("plugin", "remove", "weather", "--dry-run")
	require.Equal(t, 0, r.code, r.String())
	require.FileExists(t, script)
	r = w.run("plugin", "remove", "weather")
	require.Equal(t, 0, r.code, r.String())
	require.NoDirExists(t, filepath.Join(plugins, "weather"))
	sums, err = os.ReadFile(filepath.Join(plugins, ".checksums"))
	require.NoError(t, err)
	require.NotContains(t, string(sums), "weather/")

	// A manifest with a mistake: refused at add with discovery's own
	// message (what plugin list says when the folder sits in a root).
	r = w.run("plugin", "add", repo.dir, "--path", "broken", "--json")
	require.Equal(t, 2, r.code, r.String())
	require.NoDirExists(t, filepath.Join(plugins, "broken"))
	discovery := newJobWorld(t, "plugin_roots: ["+repo.dir+"]\n")
	discovery.runJSON(0, &list, "plugin", "list", "--json")
	var reason string
	for _, s := range list.Skipped {
		if s.Name == "broken" {
			reason = s.Reason
		}
	}
	require.Contains(t, reason, "protocol 1 is not supported")
	var refused struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(lastLine(r.stderr)), &refused), r.String())
	require.Equal(t, "invalid_input", refused.Error.Code)
	require.Contains(t, refused.Error.Message, reason)
	require.Contains(t, refused.Error.Message, filepath.Join(plugins, "broken"))
}
