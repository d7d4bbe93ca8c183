// Package metrics exposes Ductile's Prometheus metrics (GET /metrics): jobs
// by status and plugin and the queue's depth, read from the projections at
// scrape time; attempt durations and spawn failures, observed by the
// dispatcher as attempts end (dispatch.Observer); remote workers' claims,
// completions and superseded requests, counted by the API per worker
// (api.WorkerObserver); the projector's lag; the
// ledger's bytes, commits and fsyncs.
package metrics
