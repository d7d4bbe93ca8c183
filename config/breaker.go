package config

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Circuit breaker defaults (spec §5.8).
const (
	DefaultBreakerThreshold  = 3
	DefaultBreakerResetAfter = 30 * time.Minute
)

// CircuitBreaker is a plugin's circuit breaker for its scheduled jobs
// (plugins.<name>.circuit_breaker), one breaker per command.
type CircuitBreaker struct {
	// Enabled: false lets every scheduled firing through and counts nothing.
	Enabled bool
	// Threshold is how many scheduled jobs in a row must end dead to open it.
	Threshold int
	// ResetAfter is how long it stays open before one probe job may run.
	ResetAfter time.Duration
}

// DefaultCircuitBreaker returns the spec's breaker: 3 failures, 30 minutes.
func DefaultCircuitBreaker() CircuitBreaker {
	return CircuitBreaker{Enabled: true, Threshold: DefaultBreakerThreshold, ResetAfter: DefaultBreakerResetAfter}
}

// OrDefault returns b, or DefaultCircuitBreaker for the zero value (a
// caller that was given no settings).
func (b CircuitBreaker) OrDefault() CircuitBreaker {
	if b == (CircuitBreaker{}) {
		return DefaultCircuitBreaker()
	}
	return b
}

func (l *loader) circuitBreaker(n *yaml.Node, path string, b *CircuitBreaker) {
	l.object(n, path, "",
		field{"enabled", func(v *yaml.Node, path string) { l.boolean(v, path, &b.Enabled) }},
		field{"threshold", func(v *yaml.Node, path string) {
			if i, ok := l.integer(v, path); ok {
				if i < 1 {
					l.fail(v, path, "must be ≥ 1, got %d (how many scheduled jobs in a row must fail to open the breaker; use enabled: false to turn it off)", i)
					return
				}
				b.Threshold = i
			}
		}},
		field{"reset_after", func(v *yaml.Node, path string) { l.duration(v, path, &b.ResetAfter) }},
	)
}

type circuitBreakerView struct {
	Enabled    bool   `json:"enabled" yaml:"enabled"`
	Threshold  int    `json:"threshold" yaml:"threshold"`
	ResetAfter string `json:"reset_after" yaml:"reset_after"`
}

func newCircuitBreakerView(b CircuitBreaker) circuitBreakerView {
	return circuitBreakerView{Enabled: b.Enabled, Threshold: b.Threshold, ResetAfter: formatDuration(b.ResetAfter)}
}
