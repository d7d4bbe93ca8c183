package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
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

// The per-worker gauges read from the ledger at scrape time: one series
// per registered worker (views.ReadFleet), so the worker label is bounded
// by the workers that registered.
var (
	workerLeasesDesc = prometheus.NewDesc("ductile_worker_leases",
		"Running jobs each registered remote worker holds leases on now.", []string{"worker"}, nil)
	workerLastSeenDesc = prometheus.NewDesc("ductile_worker_last_seen_timestamp_seconds",
		"When each registered remote worker was last seen: the latest of its registration and the claims and recorded renewals of the leases it holds (Unix seconds).",
		[]string{"worker"}, nil)
	workerPluginsDesc = prometheus.NewDesc("ductile_worker_plugins",
		"How many plugins each registered remote worker serves.", []string{"worker"}, nil)
)

// collectWorkers sends the per-worker gauges.
func collectWorkers(ctx context.Context, l *ledger.Ledger, ch chan<- prometheus.Metric) {
	fleet, err := views.ReadFleet(ctx, l)
	if err != nil {
		for _, d := range []*prometheus.Desc{workerLeasesDesc, workerLastSeenDesc, workerPluginsDesc} {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
		return
	}
	for _, w := range fleet {
		ch <- prometheus.MustNewConstMetric(workerLeasesDesc, prometheus.GaugeValue, float64(w.Claims), w.Name)
		ch <- prometheus.MustNewConstMetric(workerPluginsDesc, prometheus.GaugeValue, float64(len(w.Plugins)), w.Name)
		if seen, err := time.Parse(time.RFC3339Nano, w.LastSeen); err == nil {
			ch <- prometheus.MustNewConstMetric(workerLastSeenDesc, prometheus.GaugeValue, float64(seen.UnixMilli())/1000, w.Name)
		}
	}
}
