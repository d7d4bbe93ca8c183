package api_test

import (
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/stream"
)

var openAPIOut = flag.String("openapi-out", "", "write the OpenAPI document of a daemon with the default settings to this file (task lint:openapi lints it)")

// TestOpenAPIDocument: the document of a daemon with the default settings
// encodes as JSON; with -openapi-out it is written out for the linter
// (go test ./api -run '^TestOpenAPIDocument$' -args -openapi-out=FILE).
func TestOpenAPIDocument(t *testing.T) {
	doc, err := json.MarshalIndent(api.New(api.Options{}).OpenAPI(), "", "  ")
	require.NoError(t, err)
	require.True(t, json.Valid(doc))
	if *openAPIOut != "" {
		require.NoError(t, os.WriteFile(*openAPIOut, append(doc, '\n'), 0o644))
	}
}

// TestOpenAPIForClients: the document says where to call (servers: the
// address the API listens on), that the bearer token is needed (root
// security; /healthz declares none), and documents the routes served
// outside huma, /events and /metrics, with their scopes: what a standard
// linter's recommended rules ask (task lint:openapi runs one).
func TestOpenAPIForClients(t *testing.T) {
	f := start(t, func(o *api.Options) { o.Settings.Listen = "127.0.0.1:9099" })
	r := f.do("GET", "/openapi.json", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	doc := r.body
	require.Equal(t, "http://127.0.0.1:9099", doc["servers"].([]any)[0].(map[string]any)["url"])
	require.Equal(t, []any{map[string]any{"bearer": []any{}}}, doc["security"])
	paths := doc["paths"].(map[string]any)
	op := func(path, method string) map[string]any { return paths[path].(map[string]any)[method].(map[string]any) }
	require.Equal(t, []any{}, op("/healthz", "get")["security"], "no token")
	require.Equal(t, []any{map[string]any{"bearer": []any{"jobs:ro"}}}, op("/jobs", "get")["security"])
	require.Equal(t, []any{map[string]any{"bearer": []any{"events:ro"}}}, op("/events", "get")["security"])
	require.Contains(t, op("/events", "get")["responses"].(map[string]any)["200"].(map[string]any)["content"], "text/event-stream")
	require.Equal(t, []any{map[string]any{"bearer": []any{"jobs:ro"}}}, op("/metrics", "get")["security"])
	require.Contains(t, op("/metrics", "get")["responses"].(map[string]any)["200"].(map[string]any)["content"], "text/plain")

	require.Contains(t, api.RouteScopes(), api.RouteScope{Method: "GET", Path: "/events", Scope: "events:ro"})
	require.Contains(t, api.RouteScopes(), api.RouteScope{Method: "GET", Path: "/healthz"})

	// Listening on every interface, the document names localhost.
	all := api.New(api.Options{Settings: config.APIServer{Listen: "0.0.0.0:8080"}})
	require.Equal(t, "http://localhost:8080", all.OpenAPI().Servers[0].URL)
}

// TestMountedRoutesAnswerAsDocumented: the real event stream refuses a bad
// seq with 400; a daemon without a stream answers 404.
func TestMountedRoutesAnswerAsDocumented(t *testing.T) {
	f := start(t, func(o *api.Options) { o.Events = nil })
	requireError(t, f.do("GET", "/events", "events-ro", nil), http.StatusNotFound, "not_found")
	s := start(t, func(o *api.Options) {
		o.Events = stream.Handler(o.Ledger, stream.Options{Logger: slog.New(slog.DiscardHandler)})
	})
	r := s.do("GET", "/events?after=x", "events-ro", nil)
	requireError(t, r, http.StatusBadRequest, "invalid_input")
}

// A token holds at most api.max_streams_per_token event streams: one more is
// 429 too_many_streams, and closing one frees its place.
func TestEventStreamsPerTokenAreCapped(t *testing.T) {
	open := make(chan struct{})
	release := make(chan struct{})
	f := start(t, func(o *api.Options) {
		o.Settings.MaxStreamsPerToken = 1
		o.Events = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			open <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
	})
	first := make(chan response, 1)
	go func() { first <- f.do("GET", "/events", "events-ro", nil) }()
	<-open
	requireError(t, f.do("GET", "/events", "events-ro", nil), http.StatusTooManyRequests, "too_many_streams")
	close(release)
	require.Equal(t, http.StatusOK, (<-first).status)
	go func() { <-open }()
	require.Equal(t, http.StatusOK, f.do("GET", "/events", "events-ro", nil).status, "the closed stream's place is free")
}
