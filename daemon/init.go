package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/zeebo/blake3"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// InitCommand and HealthCommand are the lifecycle commands a manifest may
// declare (spec §5.2).
const (
	InitCommand   = "init"
	HealthCommand = "health"
)

// DefaultLifecycleParallelism bounds how many plugins run init (or health)
// at once.
const DefaultLifecycleParallelism = 4

// stderrTailBytes is how much of a failed init's stderr its event keeps.
const stderrTailBytes = 2 << 10

// InitOptions configure InitPlugins.
type InitOptions struct {
	Ledger  *ledger.Ledger
	Plugins *pluginhost.Registry
	Config  *config.Config
	Logger  *slog.Logger
	// Grace between SIGTERM and SIGKILL of a plugin (default 5s).
	Grace time.Duration
	// Parallelism bounds the inits run at once (default
	// DefaultLifecycleParallelism).
	Parallelism int
	// Actor is recorded in the events' meta (default events.ActorDaemon).
	Actor events.Actor
}

// InitResult is what InitPlugins did for one plugin that declares init.
type InitResult struct {
	Plugin     string
	ConfigHash string
	// Skipped: the newest init of the plugin succeeded with this hash.
	Skipped bool
	// Outcome of the run (ok on success); empty when skipped, canceled
	// when ctx ended before it finished (nothing is recorded then).
	Outcome  events.Outcome
	Error    string
	Duration time.Duration
}

// InitPlugins runs the init command of every enabled plugin of the registry
// that declares one, unless its newest init succeeded with the same config
// hash (InitConfigHash), and records each run as plugin.initialized or
// plugin.init_failed. A failed init is not retried: the plugin is unhealthy
// until a later start or reload runs an init that succeeds. At most
// Parallelism inits run at once, each bounded by the plugin's
// timeouts.init. The error is only ever the ledger's: a plugin's failure is
// its result and its event.
func InitPlugins(ctx context.Context, opts InitOptions) ([]InitResult, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "pluginhost")
	var todo []*pluginhost.Plugin
	for _, p := range opts.Plugins.List() {
		if _, ok := p.Command(InitCommand); ok && opts.Config.Plugin(p.Name).Enabled {
			todo = append(todo, p)
		}
	}
	results := make([]InitResult, len(todo))
	errs := make([]error, len(todo))
	forEach(len(todo), opts.Parallelism, func(i int) {
		results[i], errs[i] = initOne(ctx, opts, log, todo[i])
	})
	return results, errors.Join(errs...)
}

func initOne(ctx context.Context, opts InitOptions, log *slog.Logger, p *pluginhost.Plugin) (InitResult, error) {
	pc := opts.Config.Plugin(p.Name)
	r := InitResult{Plugin: p.Name}
	hash, err := InitConfigHash(p, pc.Config)
	if err != nil {
		return r, fmt.Errorf("init plugin %s: %w", p.Name, err)
	}
	r.ConfigHash = hash
	last, err := lastInit(ctx, opts.Ledger, p.Name)
	if err != nil {
		return r, err
	}
	if last.succeeded && last.configHash == hash {
		r.Skipped = true
		return r, nil
	}
	runID, res, err := runLifecycle(ctx, p, InitCommand, pc, opts.Grace)
	if err != nil {
		return r, fmt.Errorf("init plugin %s: %w", p.Name, err)
	}
	r.Outcome, r.Error, r.Duration = res.Kind, res.Err, res.Duration
	if res.Kind == events.OutcomeCanceled {
		// Stopped with the daemon, not a failure of the plugin: the next
		// start runs it again.
		log.Warn("plugin init interrupted", "plugin", p.Name)
		return r, nil
	}
	run := commands.InitRun{Plugin: p.Name, ConfigHash: hash, Version: p.Manifest.Version, RunID: runID, Outcome: res.Kind,
		Duration: res.Duration, Actor: opts.Actor}
	if res.Kind == events.OutcomeOK {
		log.Info("plugin initialized", "plugin", p.Name, "duration_ms", res.Duration.Milliseconds())
	} else {
		run.Error, run.ExitCode, run.Stderr = res.Err, res.ExitCode, tail(res.Stderr, stderrTailBytes)
		log.Error("plugin init failed: the plugin is unhealthy until an init succeeds (fix it, then reload or restart); its jobs still run",
			"plugin", p.Name, "outcome", string(res.Kind), "err", res.Err)
	}
	// Recorded even if ctx ended meanwhile: the run happened.
	return r, commands.RecordInit(context.WithoutCancel(ctx), opts.Ledger, run)
}

// runLifecycle runs command (init or health) of p once, with the plugin's
// config, an empty state and context, and the command's timeout; runID is
// the job_id its request carries. err is set only if the request could not
// be built.
func runLifecycle(ctx context.Context, p *pluginhost.Plugin, command string, pc config.PluginConfig, grace time.Duration) (string, pluginhost.Result, error) {
	cfgJSON, err := json.Marshal(pc.Config)
	if err != nil {
		return "", pluginhost.Result{}, fmt.Errorf("encode plugin config: %w", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return "", pluginhost.Result{}, err
	}
	timeout := pc.Timeouts.For(command)
	req := pluginhost.Request{Protocol: pluginhost.ProtocolVersion, JobID: id.String(), Command: command,
		Config: cfgJSON, State: json.RawMessage("{}"), Context: json.RawMessage("{}")}
	res := pluginhost.Run(ctx, p, req, pluginhost.RunOptions{Timeout: timeout, Grace: grace})
	return id.String(), res, nil
}

// lastInitRecord is the newest init event of a plugin.
type lastInitRecord struct {
	found      bool
	succeeded  bool
	configHash string
}

// lastInit reads the newest plugin.initialized or plugin.init_failed of
// plugin from its health stream.
func lastInit(ctx context.Context, l *ledger.Ledger, plugin string) (lastInitRecord, error) {
	var last lastInitRecord
	var lastSeq int64
	stream := events.PluginHealthStream(plugin)
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		for _, typ := range []string{events.PluginInitialized, events.PluginInitFailed} {
			err := queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: stream, Type: typ},
				func(r queries.ReadStreamLastOfTypeRow) error {
					if r.Seq < lastSeq {
						return nil
					}
					var d struct {
						ConfigHash string `json:"config_hash"`
					}
					if err := json.Unmarshal([]byte(r.Data), &d); err != nil {
						return err
					}
					lastSeq = r.Seq
					last = lastInitRecord{found: true, succeeded: typ == events.PluginInitialized, configHash: d.ConfigHash}
					return nil
				})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return lastInitRecord{}, fmt.Errorf("read last init of plugin %s: %w", plugin, err)
	}
	return last, nil
}

// InitConfigHash identifies what an init ran for: BLAKE3-256 (hex) of the
// compact JSON of the plugin's name, manifest version and entrypoint, the
// protocol, the init command's name and type, and the plugin's config map
// (keys sorted at every level). A change to any of them runs init again;
// a change elsewhere (timeouts, retry, schedules, the plugin's code without
// a new version) does not.
func InitConfigHash(p *pluginhost.Plugin, cfg map[string]any) (string, error) {
	spec, _ := p.Command(InitCommand)
	if cfg == nil {
		cfg = map[string]any{}
	}
	identity := struct {
		Domain     string         `json:"domain"`
		Plugin     string         `json:"plugin"`
		Version    string         `json:"version"`
		Protocol   int            `json:"protocol"`
		Entrypoint string         `json:"entrypoint"`
		Command    string         `json:"command"`
		Type       string         `json:"type"`
		Config     map[string]any `json:"config"`
	}{"ductile.plugin-init.v1", p.Name, p.Manifest.Version, p.Manifest.Protocol, p.Manifest.Entrypoint,
		spec.Name, string(spec.Type), cfg}
	b, err := json.Marshal(identity)
	if err != nil {
		return "", fmt.Errorf("encode plugin config: %w", err)
	}
	sum := blake3.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// forEach calls fn(0…n-1), at most parallelism at once (default
// DefaultLifecycleParallelism), and returns when every call has.
func forEach(n, parallelism int, fn func(i int)) {
	if parallelism <= 0 {
		parallelism = DefaultLifecycleParallelism
	}
	slots := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			fn(i)
		}()
	}
	wg.Wait()
}

// tail is the last max bytes of b as text, cut at a rune start.
func tail(b []byte, max int) string {
	if len(b) <= max {
		return string(b)
	}
	b = b[len(b)-max:]
	for len(b) > 0 && b[0]&0xC0 == 0x80 {
		b = b[1:]
	}
	return string(b)
}
