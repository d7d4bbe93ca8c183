package api

import (
	"net"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
)

// document completes the OpenAPI document with what huma does not derive
// from the operations: where to call (servers), that the bearer token is
// needed unless an operation says otherwise (root security; /healthz
// declares none), and the routes served outside huma (GET /events, GET
// /metrics: streams and text, mounted by mount), so that a generated
// client knows every route, where it is and what to send.
func (s *Server) document() {
	doc := s.api.OpenAPI()
	doc.Servers = []*huma.Server{{URL: serverURL(s.opts.Settings),
		Description: "This daemon, at its api.listen"}}
	doc.Security = []map[string][]string{{bearerScheme: {}}}
	for _, item := range doc.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post} {
			if op != nil && op.Metadata[scopeKey] == nil {
				op.Security = []map[string][]string{} // no token needed
				op.Responses["403"] = &huma.Response{Description: "The Host is not a name the API serves (a loopback name, or one of api.hosts)",
					Content: errorContent()}
			}
		}
	}
	text := func(mediaType, description string) map[string]*huma.MediaType {
		return map[string]*huma.MediaType{mediaType: {Schema: &huma.Schema{Type: huma.TypeString, Description: description}}}
	}
	query := func(name, description string) *huma.Param {
		return &huma.Param{Name: name, In: "query", Description: description, Schema: &huma.Schema{Type: huma.TypeString}}
	}
	s.addMounted(secured(huma.Operation{
		OperationID: "stream-events", Method: http.MethodGet, Path: "/events", Summary: "The ledger's events, live (Server-Sent Events)",
		Description: "Each event is an SSE message: id is its seq, event its type, data the JSON of the event (seq, stream, version, type, data, meta, recorded_at). " +
			"It starts after the seq given by Last-Event-ID or after (none: at the head, new events only), writes ': ping' when idle, and follows the ledger until the client goes away. " +
			"A bad seq or filter is 400 invalid_input; a token holding api.max_streams_per_token streams already gets 429 too_many_streams; " +
			"a client that stops reading for api.write_timeout loses its stream (resume with Last-Event-ID).",
		Parameters: []*huma.Param{
			{Name: "Last-Event-ID", In: "header", Description: "Resume after this seq (an EventSource sends it on reconnecting)", Schema: &huma.Schema{Type: huma.TypeInteger, Minimum: new(float64)}},
			{Name: "after", In: "query", Description: "Start after this seq (Last-Event-ID wins)", Schema: &huma.Schema{Type: huma.TypeInteger, Minimum: new(float64)}},
			query("type", "Only events of these types: repeated, or a comma list (job.enqueued,job.succeeded)"),
			query("stream", "Only this stream's events (job/<id>, plugin/<name>…)"),
			query("job", "Only this job's own stream (job/<id>); its children's are other streams"),
			query("topic", "Only the events of the messages of this topic: each message.published and every later event on its stream (claims, renewals, ends)"),
			query("conversation", "Only the events of the messages of this conversation (as topic; both: the messages of both)"),
			query("correlation", "Only the events whose meta.correlation_id is this: a job tree's events, by its root job's id"),
		},
		Responses: map[string]*huma.Response{
			"200": {Description: "The stream: text/event-stream until the client closes it", Content: text("text/event-stream", "Server-Sent Events")},
		},
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests},
	}, auth.EventsRO))
	s.documentRunStreams()
	s.addMounted(secured(huma.Operation{
		OperationID: "get-metrics", Method: http.MethodGet, Path: "/metrics", Summary: "Prometheus metrics",
		Description: "The daemon's metrics in the Prometheus text exposition format (jobs by status, attempts, queue, projector lag, ledger size).",
		Responses: map[string]*huma.Response{
			"200": {Description: "The metrics", Content: text("text/plain", "Prometheus text exposition format 0.0.4")},
		},
		Errors: []int{http.StatusNotFound},
	}, auth.JobsRO))
}

// addMounted documents op, a route mount serves: its Errors become
// responses with the error body.
func (s *Server) addMounted(op huma.Operation) {
	for _, status := range op.Errors {
		op.Responses[strconv.Itoa(status)] = &huma.Response{Description: http.StatusText(status), Content: errorContent()}
	}
	op.Errors = nil
	s.api.OpenAPI().AddOperation(&op)
}

func errorContent() map[string]*huma.MediaType {
	return map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Ref: "#/components/schemas/Error"}}}
}

// serverURL is the base URL of the API with settings set: https with
// api.tls; the host is the first of api.hosts, else api.listen's (an
// unspecified one, all interfaces, is called as localhost).
func serverURL(set config.APIServer) string {
	scheme := "http://"
	if set.TLS.On() {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(set.Listen)
	if err != nil {
		return scheme + set.Listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	if len(set.Hosts) > 0 {
		host = set.Hosts[0]
	}
	return scheme + net.JoinHostPort(host, port)
}
