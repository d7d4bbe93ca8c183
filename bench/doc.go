// Package bench is ductile bench: it measures a daemon on a scratch state
// directory (end-to-end jobs/s against the raw spawn rate of the same
// plugin, or a CLI's enqueue-to-start latency on an idle daemon).
package bench
