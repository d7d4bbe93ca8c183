package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/daemon"
)

// BenchmarkOpenWithInits measures a daemon's start (Open then Close) with 5
// shell plugins: without init commands, with inits that all run (a fresh
// ledger each time), and with inits all skipped (a restart, same config).
func BenchmarkOpenWithInits(b *testing.B) {
	for _, tc := range []struct {
		name     string
		commands []string
		fresh    bool
	}{
		{"no_init", []string{"poll"}, true},
		{"init_runs", []string{"poll", "init"}, true},
		{"init_skipped", []string{"poll", "init"}, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			root := b.TempDir()
			modes := map[string]string{}
			for i := range 5 {
				name := fmt.Sprintf("p%d", i)
				writeLifecyclePlugin(b, root, name, tc.commands...)
				modes[name] = "ok"
			}
			cfg := lifecycleConfig(root, modes)
			state := filepath.Join(b.TempDir(), "state")
			open := func(dir string) {
				d, err := daemon.Open(context.Background(), daemon.Options{StateDir: dir, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
				require.NoError(b, err)
				require.NoError(b, d.Close())
			}
			if !tc.fresh {
				open(state) // the inits run once, before the timer
			}
			for i := 0; b.Loop(); i++ {
				dir := state
				if tc.fresh {
					dir = filepath.Join(state, fmt.Sprint(i))
				}
				open(dir)
			}
		})
	}
}

// BenchmarkInitPlugins measures InitPlugins alone for 5 shell plugins on an
// open ledger: every init runs (the config changes each time), or every one
// is skipped (same config).
func BenchmarkInitPlugins(b *testing.B) {
	for _, run := range []bool{true, false} {
		b.Run(map[bool]string{true: "runs", false: "skipped"}[run], func(b *testing.B) {
			root := b.TempDir()
			modes := map[string]string{}
			for i := range 5 {
				name := fmt.Sprintf("p%d", i)
				writeLifecyclePlugin(b, root, name, "poll", "init")
				modes[name] = "ok"
			}
			cfg := lifecycleConfig(root, modes)
			d, err := daemon.OpenCore(context.Background(), daemon.CoreOptions{StateDir: filepath.Join(b.TempDir(), "state"), Config: cfg,
				Logger: slog.New(slog.DiscardHandler)})
			require.NoError(b, err)
			defer d.Close()
			opts := daemon.InitOptions{Ledger: d.Ledger, Plugins: d.Plugins(), Config: cfg, Logger: slog.New(slog.DiscardHandler)}
			for i := 0; b.Loop(); i++ {
				if run {
					for name := range modes {
						cfg.Plugins[name].Config["n"] = i
					}
				}
				_, err := daemon.InitPlugins(context.Background(), opts)
				require.NoError(b, err)
			}
		})
	}
}
