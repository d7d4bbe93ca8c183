package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/views"
)

// SandboxStep asks for one step of a pipeline to run in a sandbox: its
// real plugin, with its real config, through the runner the daemon uses,
// against a scratch state directory that is deleted afterwards.
type SandboxStep struct {
	Config   *config.Config
	Pipeline string
	Step     string
	// Event, Payload and Context are what the step is entered with: the
	// type and payload of the event the step before it emitted (Event ""
	// is ductile.pipeline, a run's first event), and the inherited baggage.
	Event   string
	Payload json.RawMessage
	Context json.RawMessage
	// State, when not nil, is the real ledger, opened read-only: the
	// plugin starts with the state it has there (else with {}).
	State  *ledger.Ledger
	Logger *slog.Logger
}

// RunSandboxStep runs s's step once (no retry) in a scratch ledger of its
// own, and reports what the plugin did and what the pipeline would do
// next. Nothing is written to any other ledger: the scratch state
// directory, whatever the step recorded in it included, is deleted
// before it returns. A step its on: or if: bypasses does not run; the
// report says why and what would run instead.
func RunSandboxStep(ctx context.Context, s SandboxStep) (views.StepRun, error) {
	dir, err := os.MkdirTemp("", "ductile-sandbox-")
	if err != nil {
		return views.StepRun{}, fmt.Errorf("sandbox: %w", err)
	}
	defer os.RemoveAll(dir)
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	// What the plugin writes to stderr is in the report: the runner's
	// lines about it are detail here (shown with --verbose).
	log = slog.New(demoted{log.Handler()})
	d, err := OpenCore(ctx, CoreOptions{StateDir: dir, Config: s.Config, Logger: log})
	if err != nil {
		return views.StepRun{}, fmt.Errorf("sandbox: %w", err)
	}
	defer d.Close()
	p := d.Pipelines().Pipelines[s.Pipeline]
	if p == nil {
		for _, skipped := range d.Engine().Applied().SkippedPipelines {
			if skipped.Name == s.Pipeline {
				return views.StepRun{}, fmt.Errorf("%w: pipeline %s cannot run: %s", commands.ErrInvalidCommand, s.Pipeline, skipped.Reason)
			}
		}
		return views.StepRun{}, fmt.Errorf("%w: no pipeline named %q", commands.ErrInvalidCommand, s.Pipeline)
	}
	n := p.Nodes[s.Step]
	switch {
	case n == nil:
		return views.StepRun{}, fmt.Errorf("%w: pipeline %s has no step %q", commands.ErrInvalidCommand, s.Pipeline, s.Step)
	case n.Kind != pipeline.KindUses:
		return views.StepRun{}, fmt.Errorf("%w: step %s of pipeline %s is a %s: it runs no plugin (dry-run one of its branches' steps)", commands.ErrInvalidCommand, s.Step, s.Pipeline, n.Kind)
	}
	if s.State != nil {
		ev, ok, err := s.State.LastEvent(ctx, events.PluginStream(n.Plugin))
		if err != nil {
			return views.StepRun{}, fmt.Errorf("sandbox: read the state of plugin %s: %w", n.Plugin, err)
		}
		if ok && (ev.Type == events.PluginStateMerged || ev.Type == events.PluginFactRecorded) {
			if err := commands.SeedState(ctx, d.Ledger, ev); err != nil {
				return views.StepRun{}, fmt.Errorf("sandbox: %w", err)
			}
		}
	}
	// One attempt: a sandbox shows what the plugin does, not its retries.
	cfg := *s.Config
	cfg.Plugins = maps.Clone(cfg.Plugins)
	if cfg.Plugins == nil {
		cfg.Plugins = map[string]config.PluginConfig{}
	}
	pc := cfg.Plugin(n.Plugin)
	pc.Retry.MaxAttempts = 1
	cfg.Plugins[n.Plugin] = pc
	run, err := commands.StartPipeline(ctx, d.Ledger, commands.StartRun{Pipeline: p, Trigger: events.TriggerCLI, SubmittedBy: events.ActorCLI,
		Node: s.Step, EventType: s.Event, Payload: s.Payload, Context: s.Context, Config: &cfg, Now: time.Now()})
	if err != nil {
		return views.StepRun{}, fmt.Errorf("sandbox: %w", err)
	}
	read := context.WithoutCancel(ctx) // an interrupted step is still reported
	report, err := views.ReadStepRun(read, d.Ledger, run.RunID, s.Step)
	if err == nil && report.Input != nil && report.Input.Error == "" {
		// Not bypassed, nor failed before its plugin could run.
		if err := d.RunJob(ctx, report.Input.JobID); err != nil && ctx.Err() == nil {
			return views.StepRun{}, fmt.Errorf("sandbox: %w", err)
		}
		report, err = views.ReadStepRun(read, d.Ledger, run.RunID, s.Step)
	}
	report.Split = p.SplitOf(s.Step)
	return sandboxed(report), err
}

// sandboxed is r without the ids of its jobs: they were the scratch
// ledger's, deleted with it.
func sandboxed(r views.StepRun) views.StepRun {
	if r.Input != nil {
		in := *r.Input
		in.JobID = ""
		r.Input = &in
	}
	for i := range r.Next {
		r.Next[i].JobID = ""
	}
	return r
}
