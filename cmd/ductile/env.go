package main

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/errcode"
)

// env is what a command needs to know about where it runs.
type env struct {
	stdout, stderr io.Writer
	cfg            *config.Config
	stateDir       string
	verbose        bool
	logFormat      string // logAuto, logJSON or logText
}

// loadEnv loads the config (--config, else the built-in defaults) and
// resolves the state directory from it (see newEnv). A ${VAR} whose
// variable is not set in this shell does not stop it (loadEnvWith).
func loadEnv(c *cli.Context) (*env, error) { return loadEnvWith(c, config.LoadDeferred) }

// loadEnvWith is loadEnv with the config loaded by load: config.LoadDeferred
// for a command that uses few of its values (a ${VAR} whose variable is not
// set in this shell is left for whatever uses it to refuse:
// config.Config.UnsetFor), config.Load for the daemon, which uses them all.
func loadEnvWith(c *cli.Context, load func(string) (*config.Config, error)) (*env, error) {
	// Global flags live on the root; c.String finds them through the lineage.
	path := c.String("config")
	if path == "" {
		return newEnv(c, config.Default())
	}
	cfg, err := load(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, withHint(errcode.NotFound, err, "check the path given to --config (or $DUCTILE_CONFIG); without either, the built-in defaults apply")
		}
		return nil, withHint(errcode.InvalidConfig, err, "check the file with: ductile config check --config "+path)
	}
	return newEnv(c, cfg)
}

// newEnv is the environment for an already loaded config. The state
// directory is --state-dir, then $DUCTILE_STATE_DIR (both arrive through the
// flag), then the config's state_dir, then the per-user default.
func newEnv(c *cli.Context, cfg *config.Config) (*env, error) {
	e := &env{
		stdout:    c.App.Writer,
		stderr:    c.App.ErrWriter,
		cfg:       cfg,
		verbose:   c.Bool("verbose"),
		logFormat: c.String("log-format"),
	}
	switch {
	case c.String("state-dir") != "":
		e.stateDir = c.String("state-dir")
	case cfg.StateDir != "":
		e.stateDir = cfg.StateDir
	default:
		dir, err := defaultStateDir()
		if err != nil {
			return nil, err
		}
		e.stateDir = dir
	}
	abs, err := filepath.Abs(e.stateDir)
	if err != nil {
		return nil, err
	}
	e.stateDir = abs
	return e, nil
}

func defaultStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "ductile"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", failf("cannot find a state directory: %v (set --state-dir or $DUCTILE_STATE_DIR)", err)
	}
	return filepath.Join(home, ".local", "state", "ductile"), nil
}
