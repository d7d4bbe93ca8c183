package pluginhost_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
)

// pluginSpec describes one plugin directory for writePlugin.
type pluginSpec struct {
	name       string // manifest name; also the directory name unless dir is set
	dir        string
	entrypoint string // default run.sh
	extra      string // appended manifest YAML
	mode       os.FileMode
	noScript   bool
}

// writePlugin creates root/<dir> with a manifest and an entrypoint script
// (not executed by these tests). It returns the plugin directory.
func writePlugin(t *testing.T, root string, s pluginSpec) string {
	t.Helper()
	if s.dir == "" {
		s.dir = s.name
	}
	if s.entrypoint == "" {
		s.entrypoint = "run.sh"
	}
	if s.mode == 0 {
		s.mode = 0o755
	}
	dir := filepath.Join(root, s.dir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	manifest := fmt.Sprintf(`manifest_spec: ductile.plugin
manifest_version: 1
name: %s
version: 1.0.0
protocol: 2
entrypoint: %s
commands:
  - name: poll
    type: read
%s`, s.name, s.entrypoint, s.extra)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(manifest), 0o644))
	if !s.noScript {
		ep := filepath.Join(dir, filepath.FromSlash(s.entrypoint))
		require.NoError(t, os.MkdirAll(filepath.Dir(ep), 0o755))
		require.NoError(t, os.WriteFile(ep, []byte("#!/bin/sh\necho '{\"status\":\"ok\"}'\n"), 0o644))
		require.NoError(t, os.Chmod(ep, s.mode)) // exact mode, whatever the umask
	}
	return dir
}

func tempRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return root
}

func names(reg *pluginhost.Registry) []string {
	var out []string
	for _, p := range reg.List() {
		out = append(out, p.Name)
	}
	return out
}

// onlyError returns the single error in errs that mentions want.
func onlyError(t *testing.T, errs []error, want string) error {
	t.Helper()
	var found []error
	for _, err := range errs {
		if strings.Contains(err.Error(), want) {
			found = append(found, err)
		}
	}
	require.Len(t, found, 1, "errors mentioning %q in %v", want, errs)
	return found[0]
}

func TestDiscoverLoadsValidPlugins(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	zdir := writePlugin(t, root, pluginSpec{name: "zeta"})
	writePlugin(t, root, pluginSpec{name: "alpha", dir: "a-dir", entrypoint: "bin/alpha"})
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib"), 0o755)) // no manifest: not a plugin
	require.NoError(t, os.WriteFile(filepath.Join(root, "README.md"), []byte("hi"), 0o644))
	writePlugin(t, root, pluginSpec{name: "hidden", dir: ".hidden"})

	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	require.Equal(t, []string{"alpha", "zeta"}, names(reg), "sorted by name, hidden dirs skipped")

	p, ok := reg.Get("zeta")
	require.True(t, ok)
	require.Equal(t, zdir, p.Dir)
	require.Equal(t, filepath.Join(zdir, "run.sh"), p.Entrypoint)
	require.Equal(t, "zeta", p.Manifest.Name)
	c, ok := p.Command("poll")
	require.True(t, ok)
	require.Equal(t, pluginhost.CommandRead, c.Type)

	a, ok := reg.Get("alpha")
	require.True(t, ok)
	require.Equal(t, filepath.Join(root, "a-dir", "bin", "alpha"), a.Entrypoint)

	_, ok = reg.Get("missing")
	require.False(t, ok)
}

func TestDiscoverFirstRootWins(t *testing.T) {
	t.Parallel()
	first, second := tempRoot(t), tempRoot(t)
	firstDir := writePlugin(t, first, pluginSpec{name: "dup"})
	secondDir := writePlugin(t, second, pluginSpec{name: "dup"})
	writePlugin(t, second, pluginSpec{name: "other"})

	reg, errs := pluginhost.Discover([]string{first, second}, pluginhost.DiscoverOptions{})
	require.Equal(t, []string{"dup", "other"}, names(reg))
	p, _ := reg.Get("dup")
	require.Equal(t, firstDir, p.Dir)

	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], pluginhost.ErrShadowed)
	require.Equal(t, fmt.Sprintf("plugin %q (%s): shadowed by %s (the first root wins)", "dup", secondDir, firstDir), errs[0].Error())

	// Reversing the roots reverses the winner.
	reg, errs = pluginhost.Discover([]string{second, first}, pluginhost.DiscoverOptions{})
	p, _ = reg.Get("dup")
	require.Equal(t, secondDir, p.Dir)
	require.Len(t, errs, 1)
}

func TestDiscoverDuplicateNameWithinRoot(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	a := writePlugin(t, root, pluginSpec{name: "same", dir: "a"})
	writePlugin(t, root, pluginSpec{name: "same", dir: "b"})
	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	p, _ := reg.Get("same")
	require.Equal(t, a, p.Dir)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], pluginhost.ErrShadowed)
}

func TestDiscoverSymlinks(t *testing.T) {
	t.Parallel()
	root, outside := tempRoot(t), tempRoot(t)
	outsideDir := writePlugin(t, outside, pluginSpec{name: "evil"})
	require.NoError(t, os.Symlink(outsideDir, filepath.Join(root, "evil")))

	// A link that stays inside the root is allowed (with a warning).
	storeDir := writePlugin(t, root, pluginSpec{name: "stored", dir: ".store"})
	require.NoError(t, os.Symlink(storeDir, filepath.Join(root, "stored")))

	// An entrypoint that links out of the roots.
	escDir := writePlugin(t, root, pluginSpec{name: "esc", noScript: true})
	require.NoError(t, os.Symlink(filepath.Join(outsideDir, "run.sh"), filepath.Join(escDir, "run.sh")))

	// An entrypoint under a linked subdirectory that leaves the roots.
	subDir := writePlugin(t, root, pluginSpec{name: "sub", entrypoint: "bin/run.sh", noScript: true})
	require.NoError(t, os.Symlink(outsideDir, filepath.Join(subDir, "bin")))

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{Logger: logger})
	require.Equal(t, []string{"stored"}, names(reg))
	p, _ := reg.Get("stored")
	require.Equal(t, storeDir, p.Dir, "Dir is the resolved directory")
	require.Len(t, errs, 3, "%v", errs)
	for _, want := range []string{"evil", "esc", "sub"} {
		err := onlyError(t, errs, fmt.Sprintf("plugin %q", want))
		require.ErrorIs(t, err, pluginhost.ErrUntrusted)
		require.Contains(t, err.Error(), "outside the plugin roots")
	}
	require.Contains(t, logs.String(), "plugin path is a symlink")
	require.Contains(t, logs.String(), "target="+storeDir)

	// With AllowSymlinks they load, still with warnings.
	logs.Reset()
	reg, errs = pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{AllowSymlinks: true, Logger: logger})
	require.Empty(t, errs)
	require.Equal(t, []string{"esc", "evil", "stored", "sub"}, names(reg))
	require.Equal(t, 4, strings.Count(logs.String(), "plugin path is a symlink"))
	evil, _ := reg.Get("evil")
	require.Equal(t, outsideDir, evil.Dir)

	// A link into a second approved root is inside the roots.
	reg, errs = pluginhost.Discover([]string{root, outside}, pluginhost.DiscoverOptions{})
	require.Contains(t, names(reg), "esc")
	require.Contains(t, names(reg), "sub")
	err := onlyError(t, errs, `plugin "evil"`)
	require.ErrorIs(t, err, pluginhost.ErrShadowed, "the link in the first root shadows the real directory")
}

func TestDiscoverNonExecutableEntrypoint(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	dir := writePlugin(t, root, pluginSpec{name: "x", mode: 0o644})
	writePlugin(t, root, pluginSpec{name: "good"})

	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Equal(t, []string{"good"}, names(reg))
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], pluginhost.ErrUntrusted)
	require.Equal(t,
		fmt.Sprintf("plugin %q (%s): entrypoint run.sh is not executable: chmod +x %s/run.sh", "x", dir, dir),
		errs[0].Error())
}

func TestDiscoverEntrypointProblems(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	writePlugin(t, root, pluginSpec{name: "missing", noScript: true})
	dirEP := writePlugin(t, root, pluginSpec{name: "isdir", noScript: true})
	require.NoError(t, os.Mkdir(filepath.Join(dirEP, "run.sh"), 0o755))
	writePlugin(t, root, pluginSpec{name: "wwfile", mode: 0o777})
	writePlugin(t, root, pluginSpec{name: "dotdot", entrypoint: "../good/run.sh", noScript: true})
	writePlugin(t, root, pluginSpec{name: "good"})

	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Equal(t, []string{"good"}, names(reg))
	require.Len(t, errs, 4)
	require.Contains(t, onlyError(t, errs, `plugin "missing"`).Error(), "entrypoint run.sh does not exist")
	require.ErrorIs(t, onlyError(t, errs, `plugin "isdir"`), pluginhost.ErrUntrusted)
	require.Contains(t, onlyError(t, errs, `plugin "wwfile"`).Error(), "entrypoint run.sh is world-writable")
	dd := onlyError(t, errs, `plugin "dotdot"`)
	require.ErrorIs(t, dd, pluginhost.ErrInvalidManifest)
	require.Contains(t, dd.Error(), `entrypoint "../good/run.sh" must not contain ".."`)
}

func TestDiscoverWorldWritable(t *testing.T) {
	t.Parallel()
	root, wwRoot := tempRoot(t), tempRoot(t)
	dir := writePlugin(t, root, pluginSpec{name: "open"})
	require.NoError(t, os.Chmod(dir, 0o777))
	writePlugin(t, root, pluginSpec{name: "good"})
	writePlugin(t, wwRoot, pluginSpec{name: "inww"})
	require.NoError(t, os.Chmod(wwRoot, 0o777))

	reg, errs := pluginhost.Discover([]string{wwRoot, root}, pluginhost.DiscoverOptions{})
	require.Equal(t, []string{"good"}, names(reg))
	require.Len(t, errs, 2, "%v", errs)

	rootErr := onlyError(t, errs, "plugin root "+wwRoot)
	require.ErrorIs(t, rootErr, pluginhost.ErrUntrusted)
	require.Contains(t, rootErr.Error(), "is world-writable")

	dirErr := onlyError(t, errs, `plugin "open"`)
	require.ErrorIs(t, dirErr, pluginhost.ErrUntrusted)
	require.Equal(t, fmt.Sprintf("plugin %q (%s): directory is world-writable (mode -rwxrwxrwx): chmod o-w %s", "open", dir, dir), dirErr.Error())
}

// A world-writable manifest.yaml used to be accepted while its directory
// and entrypoint were refused: anyone could point it at another entrypoint.
func TestDiscoverWorldWritableManifest(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	dir := writePlugin(t, root, pluginSpec{name: "open", dir: "openmanifest"})
	manifest := filepath.Join(dir, "manifest.yaml")
	require.NoError(t, os.Chmod(manifest, 0o666))
	// A link to a world-writable manifest inside the roots is refused too.
	linked := writePlugin(t, root, pluginSpec{name: "linked", dir: "linkedmanifest"})
	require.NoError(t, os.Remove(filepath.Join(linked, "manifest.yaml")))
	require.NoError(t, os.Symlink(manifest, filepath.Join(linked, "manifest.yaml")))
	writePlugin(t, root, pluginSpec{name: "good"})

	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Equal(t, []string{"good"}, names(reg))
	require.Len(t, errs, 2, "%v", errs)
	err := onlyError(t, errs, `plugin "openmanifest"`)
	require.ErrorIs(t, err, pluginhost.ErrUntrusted)
	require.Equal(t, fmt.Sprintf("plugin %q (%s): manifest.yaml is world-writable (mode -rw-rw-rw-): chmod o-w %s", "openmanifest", dir, manifest), err.Error())
	err = onlyError(t, errs, `plugin "linkedmanifest"`)
	require.ErrorIs(t, err, pluginhost.ErrUntrusted)
	require.Contains(t, err.Error(), "manifest.yaml is world-writable (mode -rw-rw-rw-): chmod o-w "+manifest)
}

func TestDiscoverRequiredConfig(t *testing.T) {
	t.Parallel()
	root := tempRoot(t)
	extra := "config_keys:\n  required: [client_id, client_secret]\n  optional: [token]\n"
	writePlugin(t, root, pluginSpec{name: "needs", extra: extra})
	writePlugin(t, root, pluginSpec{name: "configured", extra: extra})
	writePlugin(t, root, pluginSpec{name: "free"})

	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{Config: map[string]map[string]any{
		"needs":      {"client_id": "abc", "client_secret": nil},
		"configured": {"client_id": "abc", "client_secret": "s"},
	}})
	require.Equal(t, []string{"configured", "free"}, names(reg))
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], pluginhost.ErrMissingConfig)
	require.Contains(t, errs[0].Error(), "missing required config key(s): client_secret")
}

func TestDiscoverOneBadPluginDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	root, other := tempRoot(t), tempRoot(t)
	writePlugin(t, root, pluginSpec{name: "a-good"})
	bad := filepath.Join(root, "b-broken")
	require.NoError(t, os.MkdirAll(bad, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "manifest.yaml"), []byte("name: [oops\n"), 0o644))
	writePlugin(t, root, pluginSpec{name: "c-proto", extra: "protocol: 1\n"})
	writePlugin(t, root, pluginSpec{name: "d-noexec", mode: 0o600})
	writePlugin(t, root, pluginSpec{name: "e-good"})
	writePlugin(t, other, pluginSpec{name: "f-good"})

	reg, errs := pluginhost.Discover([]string{root, filepath.Join(root, "does-not-exist"), other}, pluginhost.DiscoverOptions{})
	require.Equal(t, []string{"a-good", "e-good", "f-good"}, names(reg))
	require.Len(t, errs, 4, "%v", errs)

	broken := onlyError(t, errs, `plugin "b-broken"`)
	require.ErrorIs(t, broken, pluginhost.ErrInvalidManifest)
	var pe *pluginhost.PluginError
	require.True(t, errors.As(broken, &pe))
	require.Equal(t, bad, pe.Dir)

	require.ErrorIs(t, onlyError(t, errs, `plugin "c-proto"`), pluginhost.ErrInvalidManifest)
	require.ErrorIs(t, onlyError(t, errs, `plugin "d-noexec"`), pluginhost.ErrUntrusted)
	onlyError(t, errs, "plugin root "+filepath.Join(root, "does-not-exist"))
}

func TestDiscoverBundledEcho(t *testing.T) {
	t.Parallel()
	reg, errs := pluginhost.Discover([]string{bundledRoot}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)
	p, ok := reg.Get("echo")
	require.True(t, ok)
	require.Equal(t, "run.sh", p.Manifest.Entrypoint)
	for cmd, typ := range map[string]pluginhost.CommandType{
		"poll": pluginhost.CommandRead, "handle": pluginhost.CommandWrite, "health": pluginhost.CommandRead,
	} {
		c, ok := p.Command(cmd)
		require.True(t, ok, cmd)
		require.Equal(t, typ, c.Type, cmd)
	}
	require.Equal(t, "echo.snapshot", p.Manifest.FactOutputsFor("poll")[0].FactType)
}
