package pluginhost_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/pluginhost"
)

// TestRegistryKeepsSkippedPlugins: a plugin Discover refused stays known by
// name with its reason, so "no plugin named X" is never said of a plugin
// that was found and skipped.
func TestRegistryKeepsSkippedPlugins(t *testing.T) {
	t.Parallel()
	root, other := tempRoot(t), tempRoot(t)
	writePlugin(t, root, pluginSpec{name: "good"})
	noexec := writePlugin(t, root, pluginSpec{name: "noexec", mode: 0o644})
	broken := filepath.Join(root, "broken")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "manifest.yaml"), []byte("name: [\n"), 0o644))
	shadowed := writePlugin(t, other, pluginSpec{name: "good"})

	reg, errs := pluginhost.Discover([]string{root, other}, pluginhost.DiscoverOptions{})
	require.Len(t, errs, 3)
	require.Equal(t, []string{"good"}, names(reg))

	byName := map[string]*pluginhost.PluginError{}
	for _, p := range reg.Skipped() {
		byName[p.Name] = p
	}
	p := byName["noexec"]
	require.NotNil(t, p)
	require.Equal(t, noexec, p.Dir)
	require.ErrorIs(t, p, pluginhost.ErrUntrusted)
	require.Contains(t, p.Err.Error(), "entrypoint run.sh is not executable")
	require.NotNil(t, byName["broken"], "a manifest that does not parse is known by its directory's name")
	require.ErrorIs(t, byName["broken"], pluginhost.ErrInvalidManifest)
	require.ErrorIs(t, byName["good"], pluginhost.ErrShadowed, "a shadowed copy of a loaded name is skipped as shadowed")
	require.NotContains(t, byName, "missing")

	var skipped []string
	for _, p := range reg.Skipped() {
		skipped = append(skipped, p.Name+" "+p.Dir)
	}
	require.Equal(t, []string{"broken " + broken, "noexec " + noexec, "good " + shadowed}, skipped, "in discovery order, shadowed ones too")
}
