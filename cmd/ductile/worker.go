package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/workerhost"
)

// workerRunCommand is `ductile worker` (workerCommand, with its
// subcommands) run as a worker host: it claims a daemon's jobs over its
// HTTP API and runs them here.
func workerRunCommand() *cli.Command {
	cmd := workerCommand()
	setWorkerRun(cmd)
	setTopicWorker(cmd)
	return cmd
}

// setWorkerRun makes cmd run a worker host.
func setWorkerRun(cmd *cli.Command) {
	cmd.Usage = "run a worker host: claim a daemon's jobs of the plugins here over its HTTP API and run them"
	cmd.Description = "Discovers plugins under --plugins (and the config's plugin_roots) with the daemon's rules, registers them\n" +
		"with the daemon at --api, claims their jobs (a long-poll), runs each like the daemon would, and reports back.\n" +
		"The daemon runs a plugin's jobs here only if its config says plugins.<name>.runs_on: remote (or any).\n" +
		"The token needs the worker scope; give it with $DUCTILE_WORKER_TOKEN or --token-file rather than --token\n" +
		"(other users see a process's arguments). SIGTERM or Ctrl-C: no more claims, running jobs get --grace to\n" +
		"finish, then their plugins are killed and their jobs reported interrupted (retried). See docs/remote-workers.md."
	cmd.Flags = append(cmd.Flags,
		&cli.StringFlag{Name: "api", EnvVars: []string{"DUCTILE_API"}, Usage: "the daemon's API `URL` (https://host:8443)"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"DUCTILE_WORKER_TOKEN"}, Usage: "a bearer `KEY` with the worker scope"},
		&cli.StringFlag{Name: "token-file", Usage: "read the key from `FILE` (its first line)"},
		&cli.StringSliceFlag{Name: "plugins", Usage: "a plugin root `DIR` (repeatable; beside the config's plugin_roots)"},
		&cli.StringSliceFlag{Name: "plugin", Usage: "serve only the plugin `NAME` (repeatable; default: every plugin found)"},
		&cli.IntFlag{Name: "concurrency", Value: 1, Usage: "run up to `N` jobs at once"},
		&cli.StringFlag{Name: "name", Usage: "the worker's `NAME` in the daemon's ledger (default: the host name)"},
		&cli.StringFlag{Name: "ca", Usage: "trust the CA certificates of `FILE` (PEM) for the daemon's TLS certificate"},
		&cli.BoolFlag{Name: "once", Usage: "handle one job, then exit (0 if it was completed)"},
		&cli.DurationFlag{Name: "grace", Value: workerhost.DefaultShutdownGrace, Usage: "on SIGTERM, how long running jobs may go on before their plugins are killed"},
	)
	cmd.Action = workerRun
}

func workerRun(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	base := c.String("api")
	if base == "" {
		return usagef("give the daemon's API with --api URL (or $DUCTILE_API), such as https://ductile.home.example:8443")
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--api %q is not an http:// or https:// URL with a host", base)
	}
	token, err := workerToken(c)
	if err != nil {
		return err
	}
	if c.Int("concurrency") < 1 {
		return usagef("--concurrency must be at least 1, got %d", c.Int("concurrency"))
	}
	host, _ := os.Hostname()
	name := c.String("name")
	if name == "" {
		name = host
	}
	log := e.logger(e.stderr, slog.LevelInfo)
	plugins, err := workerPlugins(c, e)
	if err != nil {
		return err
	}
	hc, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: c.String("ca")})
	if err != nil {
		return withHint(errcode.InvalidInput, err, "--ca takes a PEM file of CA certificates (ca.crt, never a key)")
	}
	client := workerhost.NewClient(base, token, hc, events.Worker{Name: name, PID: os.Getpid()})
	h, err := workerhost.New(workerhost.Options{Client: client, Plugins: plugins, Host: host, Version: workerVersion(),
		Concurrency: c.Int("concurrency"), Once: c.Bool("once"), ShutdownGrace: c.Duration("grace"), Log: log})
	if err != nil {
		return usagef("%v", err)
	}
	err = h.Run(c.Context)
	completed, dropped, _ := h.Snapshot()
	log.Info("worker stopped", "completed", completed, "dropped", dropped)
	switch {
	case errors.Is(err, workerhost.ErrNoJob):
		return failf("--once: no job was completed (stopped before one was, or its completion was refused; see the log above)")
	case err != nil:
		var tlsErr *apiclient.TLSError
		if errors.As(err, &tlsErr) {
			return withHint(errcode.Error, err, tlsErr.Hint)
		}
		return failf("%v", err)
	}
	return nil
}

// workerToken is the key: --token (or $DUCTILE_WORKER_TOKEN), else the
// first line of --token-file.
func workerToken(c *cli.Context) (string, error) {
	token := c.String("token")
	if f := c.String("token-file"); f != "" {
		if token != "" {
			return "", usagef("give the key once: --token (or $DUCTILE_WORKER_TOKEN) or --token-file, not both")
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", usagef("--token-file: %v", err)
		}
		token, _, _ = strings.Cut(string(data), "\n")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", usagef("give a key with the worker scope: $DUCTILE_WORKER_TOKEN, --token-file FILE or --token KEY (made on the daemon's machine with: ductile config token create NAME --scopes worker)")
	}
	return token, nil
}

// workerPlugins discovers the plugins of --plugins and the config's
// plugin_roots with the daemon's rules (their config is the daemon's: it
// comes with each claim), keeping those --plugin names.
func workerPlugins(c *cli.Context, e *env) ([]*pluginhost.Plugin, error) {
	roots := append(append([]string{}, c.StringSlice("plugins")...), e.cfg.PluginRoots...)
	if len(roots) == 0 {
		return nil, usagef("give a plugin root with --plugins DIR (a directory of plugin directories, each with a manifest.yaml)")
	}
	log := e.quietLogger()
	reg, problems := pluginhost.Discover(roots, pluginhost.DiscoverOptions{AllowSymlinks: e.cfg.Service.AllowSymlinks, ConfigElsewhere: true, Logger: log})
	for _, p := range problems {
		log.Warn("plugin skipped", "err", p.Error())
	}
	wanted := c.StringSlice("plugin")
	var out []*pluginhost.Plugin
	for _, p := range reg.List() {
		if len(wanted) == 0 || slices.Contains(wanted, p.Name) {
			out = append(out, p)
		}
	}
	for _, w := range wanted {
		if _, ok := reg.Get(w); !ok {
			return nil, notFoundf("--plugin %s: no such plugin under %s (see the skipped plugins above, if any)", w, strings.Join(roots, ", "))
		}
	}
	if len(out) == 0 {
		return nil, notFoundf("no plugin found under %s (each plugin is a directory with a manifest.yaml)", strings.Join(roots, ", "))
	}
	return out, nil
}

// workerVersion is the version the worker registers with.
func workerVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += fmt.Sprintf(" (%s)", s.Value[:12])
		}
	}
	return v
}
