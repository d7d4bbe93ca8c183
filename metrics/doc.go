// Package metrics exposes Ductile's Prometheus metrics (GET /metrics): jobs
// by status and plugin and the queue's depth, read from the projections at
// scrape time; attempt durations and spawn failures, observed by the
// dispatcher as attempts end (dispatch.Observer); the projector's lag; the
// ledger's bytes, commits and fsyncs.
package metrics
