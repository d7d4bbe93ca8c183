package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ductile/ductile/events"
)

// workerSeries are the per-worker counters of what remote workers did
// through this process's API (reset when it restarts, as every _total
// series the process counts itself).
type workerSeries struct {
	claims      *prometheus.CounterVec
	completions *prometheus.CounterVec
	superseded  *prometheus.CounterVec
}

func newWorkerSeries() workerSeries {
	return workerSeries{
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ductile_worker_claims_total",
			Help: "Jobs remote workers claimed, by worker and plugin.",
		}, []string{"worker", "plugin"}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ductile_worker_completions_total",
			Help: "Attempts remote workers completed or failed (applied), by worker and outcome.",
		}, []string{"worker", "outcome"}),
		superseded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ductile_worker_superseded_total",
			Help: "Requests of remote workers refused for a stale fence and recorded as job.superseded, by worker and what was refused (complete, renew, log).",
		}, []string{"worker", "refused"}),
	}
}

func (w workerSeries) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.claims, w.completions, w.superseded}
}

// WorkerClaimed counts a job worker claimed.
func (m *Metrics) WorkerClaimed(worker, plugin string) {
	m.workers.claims.WithLabelValues(worker, plugin).Inc()
}

// WorkerCompleted counts an attempt worker completed (or failed) whose
// outcome was applied.
func (m *Metrics) WorkerCompleted(worker string, outcome events.Outcome) {
	m.workers.completions.WithLabelValues(worker, string(outcome)).Inc()
}

// WorkerSuperseded counts a request of worker refused for a stale fence
// (refused: events.RefusedComplete, RefusedRenew, RefusedLog).
func (m *Metrics) WorkerSuperseded(worker, refused string) {
	m.workers.superseded.WithLabelValues(worker, refused).Inc()
}
