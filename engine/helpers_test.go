package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoManifest declares plugin echo: poll (a read) and handle (a write).
const echoManifest = "manifest_spec: ductile.plugin\nmanifest_version: 1\nname: echo\nversion: 1.0.0\nprotocol: 2\n" +
	"entrypoint: run.sh\ncommands: {poll: {type: read}, handle: {type: write}}\n"

// fixture is an Engine on a real ledger in a temp dir, with plugin echo
// discovered from a real directory and plugin quiet disabled.
type fixture struct {
	ctx context.Context
	l   *ledger.Ledger
	cfg *config.Config
	eng *engine.Engine
	run string // echo's entrypoint
}

func setup(t testing.TB, pipelines *pipeline.Set) *fixture {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "echo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte(echoManifest), 0o644))
	run := filepath.Join(dir, "run.sh")
	require.NoError(t, os.WriteFile(run, []byte("#!/bin/sh\necho '{\"status\":\"ok\"}'\n"), 0o755))
	reg, errs := pluginhost.Discover([]string{root}, pluginhost.DiscoverOptions{})
	require.Empty(t, errs)

	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	cfg := config.Default()
	echo := config.DefaultPlugin()
	echo.Retry.MaxAttempts = 7
	cfg.Plugins["echo"] = echo
	applied := events.ConfigAppliedData{
		Plugins: []events.AppliedPlugin{
			{Name: "echo", Enabled: true, Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}, {Name: "handle", Type: "write"}}},
			{Name: "quiet", Enabled: false, Commands: []events.AppliedCommand{{Name: "poll", Type: "read"}}},
		},
		Skipped: []events.SkippedPlugin{{Name: "broken", Reason: "manifest: bad"}},
	}
	eng := engine.New(engine.Options{Ledger: l, Config: cfg, Applied: applied, Plugins: reg, Pipelines: pipelines})
	return &fixture{ctx: context.Background(), l: l, cfg: cfg, eng: eng, run: run}
}

// job is a job's state as its stream folds now.
func (f *fixture) job(t *testing.T, id string) *commands.Job {
	t.Helper()
	evs, err := f.l.ReadStream(f.ctx, events.JobStream(id))
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	return j
}

// head is the ledger's last seq.
func (f *fixture) head(t *testing.T) int64 {
	t.Helper()
	seq, err := f.l.LastSeq(f.ctx)
	require.NoError(t, err)
	return seq
}
