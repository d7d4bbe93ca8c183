package daemon

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/pluginhost"
)

// Findings are what a check of a config against the plugins discovered for
// it found, one line each: Errors are what would fail when the daemon runs
// it (config check exits 1, a reload is refused), Warnings what is probably
// a mistake but may be meant.
type Findings struct {
	Errors, Warnings []string
}

// add appends to f each of errs as an error.
func (f *Findings) add(errs ...config.FieldError) {
	for _, fe := range errs {
		f.Errors = append(f.Errors, fe.Error())
	}
}

func (f *Findings) warn(warnings ...config.FieldError) {
	for _, fe := range warnings {
		f.Warnings = append(f.Warnings, fe.Error())
	}
}

// CheckConfig cross-checks cfg with the plugins discovered for it: reg, and
// problems, what discovery skipped (plugins and roots). It is what ductile
// config check reports beyond the file's own errors, and what refuses a
// reload: a plugin skipped, a route, webhook or schedule naming a plugin or
// command that is not there, a pipeline that does not compile against the
// plugins (config.Check, pipeline.Compile), api.tls files that do not load
// as a pair (checkTLS). Warnings: a shadowed plugin, a certificate out of
// date or not naming api.hosts, config.Check's and the pipelines'
// warnings, the integrity warnings, and each ${VAR} this process's
// environment does not set (config.LoadDeferred: only the daemon needs it).
//
// remote is the plugins as registered remote workers serve them (nil: none
// known): a pipeline step of a plugin cfg places runs_on: remote or any
// that is not installed here compiles against it, and a command its
// registration lacks is a warning (registrations are not config: the step
// is skipped until a worker registers it with the command).
func CheckConfig(cfg *config.Config, reg *pluginhost.Registry, problems []error, remote RemotePluginOf) (Findings, error) {
	f := Findings{Errors: []string{}, Warnings: []string{}}
	installed := map[string]config.InstalledPlugin{}
	for _, p := range reg.List() {
		installed[p.Name] = installedPlugin(p.Manifest)
	}
	var skipped []string
	for _, p := range problems {
		var pe *pluginhost.PluginError
		switch {
		case errors.Is(p, pluginhost.ErrShadowed):
			f.Warnings = append(f.Warnings, p.Error())
			continue
		case errors.As(p, &pe):
			skipped = append(skipped, pe.Name)
		}
		f.Errors = append(f.Errors, "skipped "+p.Error())
	}
	errs, warnings := cfg.Check(installed, skipped)
	pipelineErrs, pipelineWarnings, err := pipelineErrors(cfg, installed, skipped, remote)
	if err != nil {
		return Findings{}, err
	}
	f.add(append(errs, pipelineErrs...)...)
	tlsErrs, tlsWarnings := checkTLS(cfg, time.Now())
	f.Errors, f.Warnings = append(f.Errors, tlsErrs...), append(f.Warnings, tlsWarnings...)
	f.warn(cfg.Unused()...)
	f.warn(cfg.IntegrityWarnings...)
	f.warn(warnings...)
	f.warn(pipelineWarnings...)
	f.warn(cfg.UnsetWarnings()...)
	return f, nil
}

// installedPlugin is what config.Check needs to know of a manifest.
func installedPlugin(m *pluginhost.Manifest) config.InstalledPlugin {
	var p config.InstalledPlugin
	for _, cmd := range m.Commands {
		p.Commands = append(p.Commands, cmd.Name)
		if cmd.Values == nil {
			continue
		}
		for _, emit := range cmd.Values.Emit {
			if emit.Event != "" && !slices.Contains(p.Emits, emit.Event) {
				p.Emits = append(p.Emits, emit.Event)
			}
		}
	}
	if m.ConfigKeys.Required != nil || m.ConfigKeys.Optional != nil {
		p.ConfigKeys = append(append([]string{}, m.ConfigKeys.Required...), m.ConfigKeys.Optional...)
	}
	return p
}

// pipelineCheck is the check CheckConfig gives pipeline.Compile: whether
// a plugin command exists among the plugins discovery loaded, or the
// plugin runs on remote workers (cfg places it runs_on: remote or any;
// pipelineErrors warns of a command their registration lacks).
func pipelineCheck(cfg *config.Config, installed map[string]config.InstalledPlugin, skipped []string) func(plugin, command string) error {
	loaded := make([]string, 0, len(installed))
	for name := range installed {
		loaded = append(loaded, name)
	}
	sort.Strings(loaded)
	return func(plugin, command string) error {
		p, ok := installed[plugin]
		if placed, _ := remoteStep(cfg, nil, plugin, command); !ok && placed {
			return nil
		}
		switch {
		case !ok && slices.Contains(skipped, plugin):
			return fmt.Errorf("plugin %q was skipped (the reason is among the errors)", plugin)
		case !ok:
			suggestion := ""
			if s := config.Suggest(plugin, loaded); s != "" {
				suggestion = " (did you mean " + s + "?)"
			}
			return fmt.Errorf("no plugin named %q was found%s", plugin, suggestion)
		case !slices.Contains(p.Commands, command):
			return fmt.Errorf("plugin %q has no command %q (its commands: %s)", plugin, command, strings.Join(p.Commands, ", "))
		}
		return nil
	}
}

// pipelineErrors are the pipelines' compile errors, and their warnings (a
// step's on: no step before it declares emitting, an
// on-hook pipeline no plugin can fire).
func pipelineErrors(cfg *config.Config, installed map[string]config.InstalledPlugin, skipped []string, remote RemotePluginOf) (errs, warnings []config.FieldError, err error) {
	set, err := pipeline.Compile(cfg, pipelineCheck(cfg, installed, skipped))
	var ve *config.ValidationError
	switch {
	case err == nil:
		emits := func(plugin, _ string) ([]string, bool) {
			p, ok := installed[plugin]
			return p.Emits, ok && p.Emits != nil
		}
		warnings = append(pipeline.HookWarnings(cfg, set), pipeline.OnWarnings(set, emits)...)
		return nil, append(warnings, remoteStepWarnings(cfg, set, installed, remote)...), nil
	case errors.As(err, &ve):
		return ve.Errors, nil, nil
	}
	return nil, nil, err
}

// remoteStepWarnings warn of each pipeline step of a plugin not installed
// here, placed on remote workers, whose command their registration lacks:
// the daemon skips that pipeline until a worker registers the command.
func remoteStepWarnings(cfg *config.Config, set *pipeline.Set, installed map[string]config.InstalledPlugin, remote RemotePluginOf) []config.FieldError {
	var out []config.FieldError
	for _, name := range slices.Sorted(maps.Keys(set.Pipelines)) {
		p := set.Pipelines[name]
		for _, id := range slices.Sorted(maps.Keys(p.Nodes)) {
			n := p.Nodes[id]
			if _, ok := installed[n.Plugin]; ok || n.Kind != pipeline.KindUses {
				continue
			}
			if _, unfit := remoteStep(cfg, remote, n.Plugin, n.Command); unfit != "" {
				out = append(out, config.FieldError{File: n.File, Line: n.Line, Path: "pipelines." + name,
					Msg: fmt.Sprintf("step %s uses plugin %q, which %s: the daemon skips this pipeline until a worker registers the plugin with that command", id, n.Plugin, unfit)})
			}
		}
	}
	return out
}
