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
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// APIOptions are what the daemon's HTTP API is built with beyond the
// config's api: section.
type APIOptions struct {
	Guard   auth.Guard   // nil: no tokens, every authenticated route answers 401
	Events  http.Handler // GET /events
	Metrics http.Handler // GET /metrics
}

// apiShutdownTimeout bounds how long Close waits for API requests under way.
const apiShutdownTimeout = 10 * time.Second

// apiServer is the daemon's running HTTP API.
type apiServer struct {
	server *api.Server
	served chan error
}

// startAPI listens on api.listen and serves the API, when the config has
// an api: section.
func (d *Daemon) startAPI(opts APIOptions) error {
	settings := d.Config().APIServer
	if !settings.Enabled {
		return nil
	}
	ln, err := net.Listen("tcp", settings.Listen)
	if err != nil {
		return fmt.Errorf("api: listen on %s (api.listen): %w", settings.Listen, err)
	}
	if opts.Guard == nil {
		d.log.Warn("api: no tokens are configured, so every request but /healthz is refused: make one with: ductile config token create NAME --scopes plugin:rw,jobs:rw")
	}
	s := api.New(api.Options{
		Ledger: d.Ledger, Projector: d.Projector, Settings: settings, Guard: opts.Guard,
		Events: opts.Events, Metrics: opts.Metrics, Logger: d.log, Started: d.started,
		Current: func() (*config.Config, events.ConfigAppliedData) {
			c := d.current.Load()
			return c.config, c.applied
		},
	})
	d.api = &apiServer{server: s, served: make(chan error, 1)}
	go func() { d.api.served <- s.Serve(ln) }()
	d.log.Info("api: listening", "addr", ln.Addr().String())
	return nil
}

// stopAPI stops accepting requests and waits for those under way.
func (d *Daemon) stopAPI() error {
	if d.api == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiShutdownTimeout)
	defer cancel()
	return errors.Join(d.api.server.Shutdown(ctx), <-d.api.served)
}
