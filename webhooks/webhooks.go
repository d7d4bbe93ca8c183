package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// DeliveryTTL is how long a delivery id is remembered: a delivery repeated
// within it enqueues nothing.
const DeliveryTTL = 24 * time.Hour

// MaxDeliveryIDLength bounds a delivery id header's value.
const MaxDeliveryIDLength = 256

// Options configure the handler.
type Options struct {
	Ledger *ledger.Ledger
	// Secrets resolves each endpoint's secret_ref, per request (a reload
	// may change them).
	Secrets func() auth.Secrets
	// Engine is the runtime of the config in force, per request: its
	// webhooks: endpoints, and the intent a delivery's job is enqueued
	// with. A delivery for a plugin command it cannot run is refused with
	// 503 unavailable and enqueues nothing.
	Engine func() *engine.Engine
	// Health is what /healthz reports beyond the ledger; nil: nothing.
	Health func() Health
	Logger *slog.Logger
	// Now is the clock timestamps are checked against (default time.Now).
	Now func() time.Time
}

// Health is what the daemon knows of itself that neither the ledger nor its
// Engine holds.
type Health struct {
	Started time.Time
	API     views.APIState // whether the daemon's HTTP API serves
}

// HealthReport is the body of /healthz (spec §10.3, with the ledger's
// writes and the daemon's API).
type HealthReport struct {
	// Status is ok; degraded while the daemon's API should serve and does
	// not (200); unavailable while the ledger cannot be read or written
	// (503).
	Status             string             `json:"status"`
	UptimeSeconds      int64              `json:"uptime_seconds"`
	QueueDepth         int64              `json:"queue_depth"`
	PluginsLoaded      int                `json:"plugins_loaded"`
	PluginsCircuitOpen int                `json:"plugins_circuit_open"`
	Writes             ledger.WriteHealth `json:"writes"`
	API                views.APIState     `json:"api"`
}

// Accepted is the body of a delivery's answer: 202 when enqueued, 200 when
// its delivery id was seen already (Deduplicated, JobID the earlier job).
type Accepted struct {
	JobID        string `json:"job_id"`
	Deduplicated bool   `json:"deduplicated,omitempty"`
}

// Error is the body of every error but a refused signature's: a stable
// code, what went wrong and what to do.
type Error struct {
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Hint    string       `json:"hint,omitempty"`
}

type handler struct {
	opts Options
	log  *slog.Logger
}

// New returns the webhook listener's handler: every configured endpoint,
// and GET /healthz.
func New(opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Health == nil {
		opts.Health = func() Health { return Health{} }
	}
	return &handler{opts: opts, log: opts.Logger.With("component", "webhooks")}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == config.WebhookHealthPath {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, errcode.InvalidInput, "/healthz answers GET only", "")
			return
		}
		h.handleHealth(w, r)
		return
	}
	eng := h.opts.Engine()
	endpoint, ok := eng.Config().WebhookSettings.Endpoint(r.URL.Path)
	if !ok {
		writeError(w, http.StatusNotFound, errcode.NotFound, "no webhook endpoint at this path", "check the URL against webhooks.endpoints in the config")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, errcode.InvalidInput, "a webhook endpoint answers POST only", "send the delivery with POST")
		return
	}
	h.handleDelivery(w, r, eng, endpoint)
}

// errNoDeliveryID refuses a delivery to an endpoint with a
// delivery_id_header that lacks a delivery id (or whose id is too long).
var errNoDeliveryID = errors.New("no delivery id")

// handleDelivery checks a delivery's size, signature and freshness, and
// enqueues its job.
func (h *handler) handleDelivery(w http.ResponseWriter, r *http.Request, eng *engine.Engine, endpoint config.WebhookEndpoint) {
	if r.ContentLength > endpoint.MaxBodySize {
		tooLarge(w, endpoint)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, endpoint.MaxBodySize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			tooLarge(w, endpoint)
			return
		}
		writeError(w, http.StatusBadRequest, errcode.InvalidInput, "the body could not be read", "send the whole body again")
		return
	}
	var secret []byte
	if h.opts.Secrets != nil {
		if s := h.opts.Secrets(); s != nil {
			secret, _ = s.Secret(endpoint.SecretRef)
		}
	}
	if len(secret) == 0 {
		h.log.Error("webhook refused: its secret is not defined", "path", endpoint.Path, "secret_ref", endpoint.SecretRef,
			"fix", "define the secret named by secret_ref, then reload")
		forbidden(w)
		return
	}
	if !Verify(secret, r.Header.Get(endpoint.SignatureHeader), signed(endpoint, r, body)) {
		h.log.Warn("webhook refused: bad signature", signatureProblem(endpoint, r)...)
		forbidden(w)
		return
	}
	if endpoint.TimestampHeader != "" && !fresh(r.Header.Get(endpoint.TimestampHeader), h.opts.Now(), endpoint.Tolerance) {
		h.log.Warn("webhook refused: timestamp missing or outside the tolerance", "path", endpoint.Path, "remote", r.RemoteAddr)
		forbidden(w)
		return
	}
	job := engine.Enqueue{Plugin: endpoint.Plugin, Command: endpoint.Command, Payload: body, Kind: engine.PayloadDelivery,
		By: events.ActorWebhook, Now: h.opts.Now()}
	if endpoint.DeliveryIDHeader != "" {
		id := r.Header.Get(endpoint.DeliveryIDHeader)
		job.DedupeKey, job.DedupeTTL, job.Causation = "webhook "+endpoint.Path+" "+id, DeliveryTTL, "webhook:"+id
		job.Allow = func(events.AppliedCommand) error { // once the plugin is known to run
			if id == "" || len(id) > MaxDeliveryIDLength {
				return errNoDeliveryID
			}
			return nil
		}
	}
	res, err := eng.Enqueue(r.Context(), job)
	var target *commands.TargetError
	var bad *commands.PayloadError
	switch {
	case errors.Is(err, errNoDeliveryID):
		writeError(w, http.StatusBadRequest, errcode.InvalidInput,
			"header "+endpoint.DeliveryIDHeader+" must hold the delivery id (1 to 256 bytes)", "send the delivery id the endpoint is configured with")
		return
	case errors.As(err, &target):
		h.log.Error("webhook refused: its plugin cannot run now, so nothing was enqueued", "path", endpoint.Path,
			"plugin", endpoint.Plugin, "command", endpoint.Command, "err", err.Error(), "fix", "fix the plugin (see: ductile plugin list), then reload")
		// The sender is told no more than that (the log says why).
		writeError(w, http.StatusServiceUnavailable, errcode.Unavailable, "this endpoint's plugin cannot run now: nothing was enqueued",
			"deliver it again later; the daemon's log says why")
		return
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, errcode.InvalidInput, "the body "+bad.Problem, "send a JSON body")
		return
	case errors.Is(err, commands.ErrInvalidCommand):
		writeError(w, http.StatusBadRequest, errcode.InvalidInput, err.Error(), "send a smaller or flatter JSON body")
		return
	case err != nil:
		h.log.Error("webhook not enqueued", "path", endpoint.Path, "err", err.Error())
		writeError(w, http.StatusServiceUnavailable, errcode.Unavailable, "the delivery could not be recorded", "deliver it again later")
		return
	case res.Deduped:
		writeJSON(w, http.StatusOK, Accepted{JobID: res.ExistingJobID, Deduplicated: true})
		return
	}
	h.log.Info("webhook accepted", "path", endpoint.Path, "job_id", res.JobID, "plugin", endpoint.Plugin, "command", endpoint.Command)
	writeJSON(w, http.StatusAccepted, Accepted{JobID: res.JobID})
}

// signatureProblem says, for the daemon's log only (the sender gets a bare
// 403), why a delivery's signature did not check: the header the endpoint
// reads, whether the delivery had it, the other headers that look like a
// signature, and what to fix.
func signatureProblem(endpoint config.WebhookEndpoint, r *http.Request) []any {
	present := r.Header.Get(endpoint.SignatureHeader) != ""
	var others []string
	for name := range r.Header {
		if strings.Contains(strings.ToLower(name), "signature") && !strings.EqualFold(name, endpoint.SignatureHeader) {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	fix := "the delivery has no " + endpoint.SignatureHeader + " header: make the sender sign its deliveries with the secret named by secret_ref"
	switch {
	case present:
		fix = "the signature in " + endpoint.SignatureHeader + " does not match the body: check that the sender signs with the secret named by secret_ref (HMAC-SHA256 of the raw body"
		if endpoint.TimestampHeader != "" {
			fix += ", prefixed by the " + endpoint.TimestampHeader + " value and a dot"
		}
		fix += ")"
	case len(others) > 0:
		fix = "the delivery signs in " + strings.Join(others, ", ") + ", not " + endpoint.SignatureHeader + ": set this endpoint's signature_header to the sender's"
	}
	return []any{"path", endpoint.Path, "remote", r.RemoteAddr, "signature_header", endpoint.SignatureHeader,
		"signature_present", present, "other_signature_headers", others, "fix", fix}
}

// signed is the content the signature covers: the raw body, or
// "<timestamp>.<body>" when the endpoint checks a timestamp.
func signed(endpoint config.WebhookEndpoint, r *http.Request, body []byte) []byte {
	if endpoint.TimestampHeader == "" {
		return body
	}
	ts := r.Header.Get(endpoint.TimestampHeader)
	out := make([]byte, 0, len(ts)+1+len(body))
	return append(append(append(out, ts...), '.'), body...)
}

// Sign is the signature header value a sender writes for content:
// sha256=<hex of HMAC-SHA256(secret, content)>.
func Sign(secret, content []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(content)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether header, sha256=<hex> or bare hex, is the
// HMAC-SHA256 of content with secret, compared in constant time.
func Verify(secret []byte, header string, content []byte) bool {
	header = strings.TrimSpace(header)
	if len(header) > 7 && strings.EqualFold(header[:7], "sha256=") {
		header = header[7:]
	}
	got, err := hex.DecodeString(header)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(content)
	return hmac.Equal(got, mac.Sum(nil))
}

// fresh reports whether header, a Unix time in seconds, lies within
// tolerance of now, either way.
func fresh(header string, now time.Time, tolerance time.Duration) bool {
	sec, err := strconv.ParseInt(strings.TrimSpace(header), 10, 64)
	if err != nil {
		return false
	}
	tol := int64(tolerance / time.Second)
	return sec >= now.Unix()-tol && sec <= now.Unix()+tol
}

// handleHealth answers /healthz from the read side (spec §10.3).
func (h *handler) handleHealth(w http.ResponseWriter, r *http.Request) {
	facts := h.opts.Health()
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	health, err := h.opts.Engine().Health(ctx, engine.HealthFacts{Started: facts.Started, Now: h.opts.Now(), API: &facts.API})
	if err != nil {
		h.log.Error("healthz: read the ledger", "err", err.Error())
	}
	report := HealthReport{Status: health.Status, UptimeSeconds: health.UptimeSeconds, QueueDepth: health.QueueDepth,
		PluginsLoaded: health.PluginsLoaded, PluginsCircuitOpen: health.PluginsCircuitOpen, Writes: health.Writes, API: facts.API}
	status := http.StatusOK
	if report.Status == "unavailable" {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, report)
}

func tooLarge(w http.ResponseWriter, endpoint config.WebhookEndpoint) {
	writeError(w, http.StatusRequestEntityTooLarge, errcode.TooLarge,
		"the body is larger than this endpoint accepts ("+strconv.FormatInt(endpoint.MaxBodySize, 10)+" bytes)",
		"raise webhooks.endpoints[].max_body_size, or send less")
}

// forbidden refuses a delivery whose signature or timestamp does not
// check, saying nothing of why (spec §10.2).
func forbidden(w http.ResponseWriter) {
	writeJSON(w, http.StatusForbidden, Error{Code: errcode.Forbidden, Message: "forbidden"})
}

func writeError(w http.ResponseWriter, status int, code errcode.Code, message, hint string) {
	writeJSON(w, status, Error{Code: code, Message: message, Hint: hint})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
