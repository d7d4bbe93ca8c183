package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "check and show the configuration",
		Subcommands: []*cli.Command{
			{
				Name:   "check",
				Usage:  "load the config and plugins and report every problem (exit 1 if the config is invalid)",
				Flags:  []cli.Flag{jsonFlag},
				Action: configCheck,
			},
			{
				Name:   "show",
				Usage:  "print the merged configuration with secrets redacted",
				Flags:  []cli.Flag{jsonFlag},
				Action: configShow,
			},
		},
	}
}

func configCheck(c *cli.Context) error {
	path := c.String("config")
	out := struct {
		OK       bool     `json:"ok"`
		Config   string   `json:"config"`
		Files    []string `json:"files"`
		Errors   []string `json:"errors"`
		Plugins  []string `json:"plugins"`
		Skipped  []string `json:"skipped_plugins"`
		StateDir string   `json:"state_dir"`
	}{Config: path, Files: []string{}, Errors: []string{}, Plugins: []string{}, Skipped: []string{}}
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
		e, err := newEnv(c, cfg)
		if err != nil {
			return err
		}
		out.StateDir = e.stateDir
		reg, problems, err := daemon.DiscoverPlugins(e.stateDir, cfg, e.quietLogger())
		if err != nil {
			return err
		}
		for _, p := range reg.List() {
			out.Plugins = append(out.Plugins, p.Name)
		}
		for _, p := range problems {
			out.Skipped = append(out.Skipped, p.Error())
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
			for _, s := range out.Skipped {
				fmt.Fprintf(w, "skipped plugin: %s\n", s)
			}
		} else {
			fmt.Fprintf(w, "config has %d problem(s):\n", len(out.Errors))
			for _, e := range out.Errors {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
	}
	if !out.OK {
		return silent(exitFailure)
	}
	return nil
}

func configShow(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	shown := e.cfg.Redacted()
	if c.Bool("json") {
		return printJSON(e.stdout, shown)
	}
	b, err := yaml.Marshal(shown)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}
