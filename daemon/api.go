package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/stream"
	"github.com/ductile/ductile/views"
)

// APIOptions are what the daemon's HTTP API is built with beyond the
// config's api: section; each nil one is the daemon's own.
type APIOptions struct {
	Guard   auth.Guard   // default: the tokens of the config applied now (a reload swaps them)
	Events  http.Handler // GET /events; default: the live stream from the ledger
	Metrics http.Handler // GET /metrics; default: the daemon's metrics
}

// appliedGuard checks tokens against the config the daemon applied last:
// a reload that adds or revokes a token takes effect at once.
type appliedGuard struct{ d *Daemon }

func (g appliedGuard) Check(authorization string, need auth.Scope) (string, error) {
	return g.d.apiTokens().Check(authorization, need)
}

// WorkerPlugins are the plugins the token's worker scope is limited to
// (auth.WorkerLimiter), in the config applied now.
func (g appliedGuard) WorkerPlugins(authorization string) ([]string, bool) {
	return g.d.apiTokens().WorkerPlugins(authorization)
}

// apiTokens are the tokens the API checks: those of the config a reload is
// about to record, or else of the one applied.
func (d *Daemon) apiTokens() *auth.Registry {
	if t := d.tokens.Load(); t != nil {
		return t
	}
	return d.Engine().Auth()
}

// apiShutdownTimeout bounds how long Close waits for API requests under way.
const apiShutdownTimeout = 10 * time.Second

// apiServer is the daemon's running HTTP API.
type apiServer struct {
	server *api.Server
	served chan error
	// certificate is the one served with api.tls (nil: plaintext); a
	// reload swaps it (daemon/tls.go).
	certificate *servedCertificate
}

// startAPI listens on api.listen and serves the API, when the config has
// an api: section.
func (d *Daemon) startAPI(opts APIOptions) error {
	settings := d.Config().APIServer
	d.apiState = views.APIState{Enabled: settings.Enabled}
	if !settings.Enabled {
		return nil
	}
	ln, err := net.Listen("tcp", settings.Listen)
	switch {
	case err != nil && !settings.ListenSet:
		// Reported by /healthz of the webhook listener, system status, and
		// system start on its terminal (Options.Alerts).
		d.apiState.Off = fmt.Sprintf("its default address %s is not free (%v): set api.listen to a free address (or api.enabled: false), then restart", settings.Listen, err)
		d.log.Warn("api: its default address is not free: running without the HTTP API", "addr", settings.Listen, "err", err.Error(),
			"fix", "set api.listen to a free address (or api.enabled: false), then restart")
		return nil
	case err != nil:
		return fmt.Errorf("api: listen on %s (api.listen): %w", settings.Listen, err)
	}
	plain := ln
	ln, certificate, err := d.secureAPI(ln, settings)
	if err != nil {
		return errors.Join(err, plain.Close())
	}
	if opts.Guard == nil {
		opts.Guard = appliedGuard{d}
		if d.Engine().Auth().Len() == 0 {
			d.log.Warn("api: no tokens are configured, so every request but /healthz is refused: make one with: ductile --config FILE config token create NAME --scopes plugin:rw,jobs:rw (tokens live in a file the config includes; with no config yet, write an empty config.yaml and start the daemon with --config), then ductile system reload")
		}
	}
	if opts.Events == nil {
		opts.Events = stream.Handler(d.Ledger, stream.Options{WriteTimeout: settings.WriteTimeout, Logger: d.log})
	}
	if opts.Metrics == nil && d.Metrics != nil {
		opts.Metrics = d.Metrics.Handler()
	}
	apiOpts := api.Options{
		Ledger: d.Ledger, Projector: d.Projector, Settings: settings, Guard: opts.Guard,
		Events: opts.Events, Metrics: opts.Metrics, Logger: d.log, Started: d.started,
		Engine: d.Engine, Schedules: d.Scheduled,
	}
	if d.Metrics != nil {
		apiOpts.Workers, apiOpts.Topics = d.Metrics, d.Metrics
	}
	s := api.New(apiOpts)
	d.api = &apiServer{server: s, served: make(chan error, 1), certificate: certificate}
	go func() { d.api.served <- s.Serve(ln) }()
	d.apiState.Listening = ln.Addr().String()
	listening := []any{"addr", ln.Addr().String()}
	if certificate != nil {
		listening = append(listening, "tls", true)
	}
	d.log.Info("api: listening", listening...)
	return nil
}

// APIState is whether the daemon serves its HTTP API, and why not when it
// should (fixed at start).
func (d *Daemon) APIState() views.APIState { return d.apiState }

// stopAPI stops accepting requests and waits for those under way.
func (d *Daemon) stopAPI() error {
	if d.api == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiShutdownTimeout)
	defer cancel()
	return errors.Join(d.api.server.Shutdown(ctx), <-d.api.served)
}
