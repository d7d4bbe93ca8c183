package engine

import (
	"context"
	"time"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// HealthFacts are what the process knows of itself that the ledger does
// not hold, for a health report.
type HealthFacts struct {
	Started time.Time // when the daemon started (zero: uptime 0)
	Now     time.Time
	// API, when set, is whether the daemon's HTTP API serves: a report
	// that carries it is degraded while the API should serve and does not.
	API *views.APIState
	// Projector, when set, reports its lag: a report is degraded while the
	// projector fails.
	Projector *projections.Projector
}

// Health is the daemon's health (spec §10.3): the body /healthz of the API
// and of the webhook listener report.
type Health struct {
	// Status is ok; degraded (see HealthFacts); unavailable while the
	// ledger's writes fail, or it cannot be read.
	Status             string
	UptimeSeconds      int64
	QueueDepth         int64
	PluginsLoaded      int // loaded and enabled in the applied config
	PluginsCircuitOpen int
	Writes             ledger.WriteHealth
	ProjectorLag       *projections.Lag // with HealthFacts.Projector
}

// Health reports the daemon's health. An error reading the ledger (or the
// projector's lag) is returned with the report so far, status unavailable.
func (e *Engine) Health(ctx context.Context, f HealthFacts) (Health, error) {
	h := Health{Writes: e.ledger.WriteHealth()}
	h.Status = views.DaemonHealth(h.Writes, f.API)
	if !f.Started.IsZero() {
		h.UptimeSeconds = int64(f.Now.Sub(f.Started) / time.Second)
	}
	for _, p := range e.applied.Plugins {
		if p.Enabled {
			h.PluginsLoaded++
		}
	}
	counts, err := views.ReadHealth(ctx, e.ledger)
	h.QueueDepth, h.PluginsCircuitOpen = counts.QueueDepth, counts.PluginsCircuitOpen
	if err != nil {
		h.Status = "unavailable"
		return h, err
	}
	if f.Projector != nil {
		lag, err := f.Projector.Lag(ctx)
		if err != nil {
			h.Status = "unavailable"
			return h, err
		}
		h.ProjectorLag = &lag
		if lag.LastError != "" && h.Status == "ok" {
			h.Status = "degraded"
		}
	}
	return h, nil
}
