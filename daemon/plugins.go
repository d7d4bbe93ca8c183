package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/plugins"
)

// LoadPlugins unpacks the bundled plugins into the state directory and
// discovers plugins under the config's plugin_roots, then the bundled root
// (first match wins, so a root can override a bundled plugin). Plugins that
// fail validation are logged and skipped; the others load.
func LoadPlugins(stateDir string, cfg *config.Config, log *slog.Logger) (*pluginhost.Registry, error) {
	reg, problems, err := loadPlugins(stateDir, cfg, log)
	if err != nil {
		return nil, err
	}
	for _, p := range problems {
		level := slog.LevelError
		if errors.Is(p, pluginhost.ErrShadowed) {
			level = slog.LevelWarn
		}
		log.Log(context.Background(), level, "plugin skipped", "component", "pluginhost", "err", p.Error())
	}
	return reg, nil
}

// loadPlugins is LoadPlugins returning the plugins and roots discovery
// skipped instead of logging them.
func loadPlugins(stateDir string, cfg *config.Config, log *slog.Logger) (*pluginhost.Registry, []error, error) {
	if err := plugins.Unpack(BundledPluginsDir(stateDir)); err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	reg, problems := pluginhost.Discover(pluginRoots(stateDir, cfg), discoverOptions(cfg, log))
	return reg, problems, nil
}

// DiscoverPlugins discovers plugins as the daemon will at its next start,
// returning the plugins that failed validation instead of logging them
// (plugin list and config check show them), and writes nothing to the state
// directory, which may not exist (a mistyped --state-dir) or be read-only.
// The bundled plugins are unpacked into a temporary directory, removed
// before it returns, and reported where the daemon unpacks and runs them.
// err is set only if they could not be unpacked.
func DiscoverPlugins(stateDir string, cfg *config.Config, log *slog.Logger) (reg *pluginhost.Registry, problems []error, err error) {
	tmp, err := os.MkdirTemp("", "ductile-plugins-")
	if err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := plugins.Unpack(tmp); err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	// Discovery resolves symlinks: match the temporary root as it will.
	real, err := filepath.EvalSymlinks(tmp)
	if err != nil {
		return nil, nil, fmt.Errorf("unpack bundled plugins: %w", err)
	}
	reg, problems = pluginhost.Discover(append(append([]string{}, cfg.PluginRoots...), real), discoverOptions(cfg, log))
	bundled := BundledPluginsDir(stateDir)
	moved := func(path string) string {
		if rel, err := filepath.Rel(real, path); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(bundled, rel)
		}
		return path
	}
	for _, p := range reg.List() {
		p.Dir, p.Entrypoint = moved(p.Dir), moved(p.Entrypoint)
	}
	for _, problem := range problems {
		var pe *pluginhost.PluginError
		if errors.As(problem, &pe) {
			pe.Dir = moved(pe.Dir)
		}
	}
	return reg, problems, nil
}

func discoverOptions(cfg *config.Config, log *slog.Logger) pluginhost.DiscoverOptions {
	return pluginhost.DiscoverOptions{AllowSymlinks: cfg.Service.AllowSymlinks, Config: pluginConfigs(cfg), Logger: log}
}

func pluginRoots(stateDir string, cfg *config.Config) []string {
	return append(append([]string{}, cfg.PluginRoots...), BundledPluginsDir(stateDir))
}

func pluginConfigs(cfg *config.Config) map[string]map[string]any {
	m := map[string]map[string]any{}
	for name, pc := range cfg.Plugins {
		m[name] = pc.Config
	}
	return m
}

// demoted is a log handler that passes every record on at debug level.
type demoted struct{ slog.Handler }

func (h demoted) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h demoted) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

func (h demoted) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoted{h.Handler.WithAttrs(attrs)}
}
func (h demoted) WithGroup(name string) slog.Handler { return demoted{h.Handler.WithGroup(name)} }
