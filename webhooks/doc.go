// Package webhooks receives signed webhook deliveries (spec §10): each
// configured endpoint checks the HMAC-SHA256 signature of the raw body and
// enqueues a job whose payload is the body; /healthz on the same listener
// reports the daemon's health (spec §10.3).
package webhooks
