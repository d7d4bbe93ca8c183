package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/pluginhost"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "check and show the configuration",
		Subcommands: []*cli.Command{
			{
				Name:   "check",
				Usage:  "load the config and plugins as the daemon would and report every problem (exit 1 on any error)",
				Flags:  []cli.Flag{jsonFlag()},
				Action: configCheck,
			},
			{
				Name:  "show",
				Usage: "print the merged configuration with secrets redacted",
				Description: "Prints the config file as loaded, every default filled in. While a daemon runs,\n" +
					"a setting whose value differs from what the daemon applied is marked with a\n" +
					"comment (# applied: …); apply the file with: ductile system reload.\n" +
					"--applied prints what the running daemon decides with instead, and when it applied\n" +
					"it (plugin config values and the pipelines, api and webhooks sections by hash only).",
				Flags: []cli.Flag{jsonFlag(),
					&cli.BoolFlag{Name: "applied", Usage: "print the settings the daemon applied (its last config.applied record)"}},
				Action: configShow,
			},
			tokenCommand(), lockCommand(),
		},
	}
}

// checkOutput is what config check prints with --json.
type checkOutput struct {
	OK       bool     `json:"ok"`
	Config   string   `json:"config"`
	Files    []string `json:"files"`
	Errors   []string `json:"errors"`
	Warnings []string `json:"warnings"`
	Plugins  []string `json:"plugins"`
	Skipped  []string `json:"skipped_plugins"`
	StateDir string   `json:"state_dir"`
}

// configCheck loads the config and discovers the plugins as the daemon
// would, then cross-checks them (config.Check). Errors exit 1: an invalid
// config, a plugin skipped for a problem, a route or plugin entry naming a
// plugin or command that is not there. Warnings (a section nothing reads
// yet, an undeclared config key, a shadowed plugin) leave the exit at 0.
func configCheck(c *cli.Context) error {
	path := c.String("config")
	out := checkOutput{Config: path, Files: []string{}, Errors: []string{}, Warnings: []string{}, Plugins: []string{}, Skipped: []string{}}
	var cfg *config.Config
	if path == "" {
		out.Config = "(none: built-in defaults)"
		cfg = config.Default()
	} else if loaded, err := config.Load(path); err != nil {
		var ve *config.ValidationError
		if errors.As(err, &ve) {
			for _, fe := range ve.Errors {
				out.Errors = append(out.Errors, fe.Error())
			}
		} else {
			out.Errors = append(out.Errors, err.Error())
		}
	} else {
		cfg, out.Files = loaded, loaded.Files
	}
	if cfg != nil {
		if err := checkPlugins(c, cfg, &out); err != nil {
			return err
		}
	}
	out.OK = len(out.Errors) == 0
	w := c.App.Writer
	if c.Bool("json") {
		if err := printJSON(w, out); err != nil {
			return err
		}
	} else {
		if out.OK {
			fmt.Fprintf(w, "config OK: %s\n", out.Config)
			for _, f := range out.Files {
				fmt.Fprintf(w, "  loaded %s\n", f)
			}
			fmt.Fprintf(w, "state dir %s\n", out.StateDir)
			fmt.Fprintf(w, "plugins: %v\n", out.Plugins)
		} else {
			fmt.Fprintf(w, "config has %d problem(s):\n", len(out.Errors))
			for _, e := range out.Errors {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
		if len(out.Warnings) > 0 {
			fmt.Fprintf(w, "%d warning(s):\n", len(out.Warnings))
			for _, e := range out.Warnings {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
	}
	if !out.OK {
		return silent(exitFailure)
	}
	return nil
}

// checkPlugins discovers the plugins for cfg and adds to out what they
// are, which were skipped and why, and what config.Check and
// config.Unused find.
func checkPlugins(c *cli.Context, cfg *config.Config, out *checkOutput) error {
	e, err := newEnv(c, cfg)
	if err != nil {
		return err
	}
	out.StateDir = e.stateDir
	reg, problems, err := daemon.DiscoverPlugins(e.stateDir, cfg, e.quietLogger())
	if err != nil {
		return err
	}
	installed := map[string]config.InstalledPlugin{}
	for _, p := range reg.List() {
		out.Plugins = append(out.Plugins, p.Name)
		installed[p.Name] = installedPlugin(p.Manifest)
	}
	var skipped []string
	for _, p := range problems {
		out.Skipped = append(out.Skipped, p.Error())
		var pe *pluginhost.PluginError
		switch {
		case errors.Is(p, pluginhost.ErrShadowed):
			out.Warnings = append(out.Warnings, p.Error())
			continue
		case errors.As(p, &pe):
			skipped = append(skipped, pe.Name)
		}
		out.Errors = append(out.Errors, "skipped "+p.Error())
	}
	errs, warnings := cfg.Check(installed, skipped)
	pipelineErrs, pipelineWarnings, err := pipelineErrors(cfg, installed, skipped)
	if err != nil {
		return err
	}
	for _, fe := range append(errs, pipelineErrs...) {
		out.Errors = append(out.Errors, fe.Error())
	}
	for _, fe := range append(append(append(cfg.Unused(), cfg.IntegrityWarnings...), warnings...), pipelineWarnings...) {
		out.Warnings = append(out.Warnings, fe.Error())
	}
	return nil
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

func configShow(c *cli.Context) error {
	if c.Bool("applied") {
		e, err := daemonEnv(c)
		if err != nil {
			return err
		}
		return configShowApplied(c, e)
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	shown := e.cfg.Redacted()
	if c.Bool("json") {
		return printJSON(e.stdout, shown)
	}
	var n yaml.Node
	if err := n.Encode(shown); err != nil {
		return err
	}
	if a, ok := runningApplied(c, e); ok {
		markDifferences(&n, e.cfg.Settings().Diff(a.Settings), a)
	}
	b, err := yaml.Marshal(&n)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}
