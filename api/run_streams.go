package api

import (
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/stream"
	"github.com/ductile/ductile/views"
)

// mountRunStreams serves the run resource's two live channels (package
// stream, read from the ledger): GET /runs/stream and GET
// /runs/{id}/export/stream. Like GET /events they count against the
// token's api.max_streams_per_token and resume with Last-Event-ID.
func (s *Server) mountRunStreams() {
	var runs, exports http.Handler
	if l := s.opts.Ledger; l != nil {
		set := stream.Options{WriteTimeout: s.opts.Settings.WriteTimeout, Logger: s.opts.Logger}
		runs, exports = stream.RunsHandler(l, set), stream.ExportsHandler(l, set)
	}
	s.mount("/runs/stream", auth.JobsRO, runs, true, nil)
	s.mount("/runs/:id/export/stream", auth.JobsRO, exports, true, s.resolveRun)
}

// resolveRun makes the path's run id (a short id or a prefix) whole, or
// answers 404 or 400.
func (s *Server) resolveRun(r *http.Request) (*http.Request, error) {
	id := r.PathValue("id")
	if len(id) > 64 {
		return nil, newError(http.StatusBadRequest, "give a run id as GET /runs answers it", "the run id is longer than 64 characters")
	}
	whole, err := views.ResolveJobID(r.Context(), s.opts.Ledger, id)
	if err != nil {
		return nil, errorOf(err)
	}
	r.SetPathValue("id", whole)
	return r, nil
}

// documentRunStreams documents the two run streams (mounted: huma does not
// see them).
func (s *Server) documentRunStreams() {
	sse := map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: huma.TypeString, Description: "Server-Sent Events"}}}
	start := []*huma.Param{
		{Name: "Last-Event-ID", In: "header", Description: "Resume after this seq (an EventSource sends it on reconnecting)", Schema: &huma.Schema{Type: huma.TypeInteger, Minimum: new(float64)}},
		{Name: "after", In: "query", Description: "Start after this seq (Last-Event-ID wins)", Schema: &huma.Schema{Type: huma.TypeInteger, Minimum: new(float64)}},
	}
	query := func(name, description string) *huma.Param {
		return &huma.Param{Name: name, In: "query", Description: description, Schema: &huma.Schema{Type: huma.TypeString}}
	}
	idMin, idMax := 1, 64
	statuses := []any{}
	for _, st := range views.RunStatuses() {
		statuses = append(statuses, string(st))
	}
	s.addMounted(secured(huma.Operation{
		OperationID: "stream-runs", Method: http.MethodGet, Path: "/runs/stream", Summary: "The runs channel: plugin runs' changes, live (Server-Sent Events)",
		Description: "Each change of a plugin run is an SSE message: id the seq of the ledger event it comes from, event run, data a delta " +
			"{op: add (the run was created) or change (its status or progress changed), run_id, status, progress, updated_at, seq}: the run as of that event (views.FollowRuns). " +
			"Read from the ledger and filtered on the server (every filter given must match); progress changes come as the ledger records them " +
			"(at most one per second per run). It starts after the seq given by Last-Event-ID or after (none: at the head, new changes only), " +
			"writes ': ping' when idle, and follows the ledger until the client goes away; with run_id it ends after the run's terminal change " +
			"(at once when the run had ended before the start). The channel is not authoritative: GET /runs/{id} is. " +
			"A bad seq, run_id or status is 400 invalid_input; a token holding api.max_streams_per_token streams already gets 429 too_many_streams.",
		Parameters: append(start,
			query("run_id", "Only this run's changes (a whole run id)"),
			query("task_id", "Only the changes of this task's runs"),
			query("plugin_id", "Only the changes of this plugin's runs"),
			&huma.Param{Name: "status", In: "query", Description: "Only changes to this status", Schema: &huma.Schema{Type: huma.TypeString, Enum: statuses}},
		),
		Responses: map[string]*huma.Response{"200": {Description: "The stream: text/event-stream", Content: sse}},
		Errors:    []int{http.StatusBadRequest, http.StatusTooManyRequests},
	}, auth.JobsRO))
	s.addMounted(secured(huma.Operation{
		OperationID: "stream-run-exports", Method: http.MethodGet, Path: "/runs/{id}/export/stream", Summary: "A plugin run's export channel, live (Server-Sent Events)",
		Description: "Each export item of the run is an SSE message: id the seq of its ledger event, event export, data the item (as GET /runs/{id}/export " +
			"lists it). Items are durable before they are sent. Without Last-Event-ID nor after it starts at the run's first item. Once the run has " +
			"ended and its items are sent, an 'end' message (data {run_id, status}) ends the stream: close the EventSource on it. " +
			"An unknown run is 404; a token holding api.max_streams_per_token streams already gets 429 too_many_streams.",
		Parameters: append([]*huma.Param{{Name: "id", In: "path", Required: true, Description: "A run id, its short id, or a unique prefix of either",
			Schema: &huma.Schema{Type: huma.TypeString, MinLength: &idMin, MaxLength: &idMax}}}, start...),
		Responses: map[string]*huma.Response{"200": {Description: "The stream: text/event-stream", Content: sse}},
		Errors:    []int{http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests},
	}, auth.JobsRO))
}
