package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// register adds the huma operations.
func (s *Server) register() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "enqueue-plugin-command", Method: http.MethodPost, Path: "/plugin/{plugin}/{command}",
		Summary:       "Enqueue a plugin command",
		Description:   "Queues a job running the command with the body as its payload; answers once the job is durable. The job is a plugin run (GET /runs/{job_id}), as POST /runs makes one. Needs plugin:ro for a command of type read, plugin:rw for any other. 409 if the daemon has the plugin disabled or did not load it; 503 (code unavailable) if its files can no longer be run (made not executable, removed since it loaded): nothing is enqueued.",
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: s.opts.Settings.MaxBodySize + 1, SkipValidateBody: true, // any JSON
		RequestBody: &huma.RequestBody{Description: "The job's payload: a JSON object (UTF-8), or no body (no payload, as for a poll)",
			Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: huma.TypeObject}}}},
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable},
	}, auth.PluginRO), s.handleEnqueue)
	// huma requires a raw body; a payload is optional, and a JSON object.
	enqueue := s.api.OpenAPI().Paths["/plugin/{plugin}/{command}"].Post
	enqueue.RequestBody.Required = false
	delete(enqueue.RequestBody.Content, "application/octet-stream")
	enqueue.Metadata[writeScopeKey] = auth.PluginRW
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-job", Method: http.MethodGet, Path: "/job/{id}", Summary: "A job's status and result",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleGetJob)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-jobs", Method: http.MethodGet, Path: "/jobs", Summary: "Jobs, newest first",
		Errors: []int{http.StatusBadRequest},
	}, auth.JobsRO), s.handleListJobs)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-job-tree", Method: http.MethodGet, Path: "/job/{id}/tree", Summary: "A job's whole tree: its root and every job routed from it, at any depth",
		Description: "The root is the job's topmost ancestor through parent_job_id; at most limit jobs, those nearest the root, with truncated set when there were more. " +
			"With at (a seq, or an RFC 3339 time: the last seq recorded at or before it), the tree as it was then: the jobs enqueued by then, each with the status, attempt and context its events up to that seq give; " +
			"404 if the root was not enqueued yet, 410 (code archived) if that moment's events were archived.",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusGone},
	}, auth.JobsRO), s.handleJobTree)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-job-events", Method: http.MethodGet, Path: "/job/{id}/events", Summary: "A job's events, from its stream",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleJobEvents)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-job-logs", Method: http.MethodGet, Path: "/job/{id}/logs", Summary: "A job's log lines",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleJobLogs)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "cancel-job", Method: http.MethodPost, Path: "/job/{id}/cancel", Summary: "Cancel a queued or running job",
		MaxBodyBytes: s.opts.Settings.MaxBodySize + 1,
		Errors:       []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict},
	}, auth.JobsRW), s.handleCancelJob)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "retry-job", Method: http.MethodPost, Path: "/job/{id}/retry", Summary: "Run a dead or canceled job again, as a new job linked to it",
		DefaultStatus: http.StatusAccepted, MaxBodyBytes: s.opts.Settings.MaxBodySize + 1,
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict},
	}, auth.JobsRW), s.handleRetryJob)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-plugins", Method: http.MethodGet, Path: "/plugins", Summary: "The plugins the daemon loaded, with their health",
	}, auth.PluginRO), s.handleListPlugins)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-queue", Method: http.MethodGet, Path: "/queue", Summary: "The queue's size and its first jobs",
		Errors: []int{http.StatusBadRequest},
	}, auth.JobsRO), s.handleGetQueue)
	s.registerPipelines()
	s.registerPipelineList()
	s.registerRuns()
	s.registerPlugins()
	s.registerWorkers()
	s.registerTopics()
	s.registerLedger()
	s.registerPluginCommands()
	s.registerRunWait()
	huma.Register(s.api, huma.Operation{
		OperationID: "health", Method: http.MethodGet, Path: "/healthz", Summary: "The daemon's health (no token)",
	}, s.handleHealth)
	health := s.api.OpenAPI().Paths["/healthz"].Get
	health.Responses["503"] = &huma.Response{Description: "The ledger's writes fail: status unavailable, and since when in writes",
		Content: health.Responses["200"].Content}
	// Validation failures are answered 400, not huma's 422.
	for _, item := range s.api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post} {
			if op != nil {
				delete(op.Responses, "422")
			}
		}
	}
}

type jobPath struct {
	ID string `path:"id" minLength:"1" maxLength:"64" doc:"A job id, its short id (the last 12 characters), or a unique prefix of either"`
}

// EnqueueInput is POST /plugin/{plugin}/{command}'s request.
type EnqueueInput struct {
	Plugin         string `path:"plugin" maxLength:"128"`
	Command        string `path:"command" maxLength:"128"`
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"256" doc:"Dedupe key: a job of this command with the same key that succeeded within the dedupe window makes this one a duplicate"`
	TaskID         string `query:"task_id" maxLength:"256" doc:"The run's task_id (the job is a run: GET /runs/{job_id})"`
	TraceID        string `query:"trace_id" maxLength:"256" doc:"The run's trace_id, handed to the plugin and recorded on its export items"`
	RawBody        []byte
}

// Accepted is the answer to an enqueue or a retry.
type Accepted struct {
	Body struct {
		JobID   string `json:"job_id" doc:"The job queued, or the one that made this a duplicate"`
		Deduped bool   `json:"deduped" doc:"A job with the same dedupe key made this one a duplicate: nothing was queued"`
		RetryOf string `json:"retry_of,omitempty" doc:"The job a retry retries"`
	}
}

func (s *Server) handleEnqueue(ctx context.Context, in *EnqueueInput) (*Accepted, error) {
	res, err := s.opts.Engine().Enqueue(ctx, engine.Enqueue{Plugin: in.Plugin, Command: in.Command, Payload: in.RawBody,
		DedupeKey: in.IdempotencyKey, TaskID: in.TaskID, TraceID: in.TraceID, By: events.ActorAPI, Now: s.opts.Now(), Allow: func(c events.AppliedCommand) error {
			if c.Type != "read" {
				return s.require(ctx, auth.PluginRW)
			}
			return nil
		}})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Accepted{}
	out.Body.JobID, out.Body.Deduped = res.JobID, res.Deduped
	if res.Deduped && res.ExistingJobID != "" {
		out.Body.JobID = res.ExistingJobID
	}
	return out, nil
}

// JobStatus is GET /job/{id}'s answer (spec §9.3).
type JobStatus struct {
	Body struct {
		JobID       string          `json:"job_id"`
		Status      events.Status   `json:"status"`
		Plugin      string          `json:"plugin"`
		Command     string          `json:"command"`
		Attempt     int64           `json:"attempt"`
		MaxAttempts int64           `json:"max_attempts"`
		SubmittedBy string          `json:"submitted_by"`
		CreatedAt   string          `json:"created_at"`
		StartedAt   *string         `json:"started_at,omitempty"`
		CompletedAt *string         `json:"completed_at,omitempty"`
		Result      json.RawMessage `json:"result,omitempty" doc:"The last attempt's response"`
		LastError   *string         `json:"last_error,omitempty"`
		ParentJobID *string         `json:"parent_job_id,omitempty"`
		RetryOf     string          `json:"retry_of,omitempty"`
		RetriedAs   string          `json:"retried_as,omitempty"`
		Payload     json.RawMessage `json:"payload,omitempty" doc:"The job's payload"`
		Seq         int64           `json:"seq" doc:"The seq of the job's job.enqueued"`
		UpdatedSeq  int64           `json:"updated_seq" doc:"The seq of the newest event of the job this answer folds: a client following /events knows the answer holds every event up to it"`
	}
}

func (s *Server) handleGetJob(ctx context.Context, in *jobPath) (*JobStatus, error) {
	inspection, err := views.Inspect(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, errorOf(err)
	}
	j := inspection.Job
	out := &JobStatus{}
	b := &out.Body
	b.JobID, b.Status, b.Plugin, b.Command, b.Attempt, b.MaxAttempts = j.ID, j.Status, j.Plugin, j.Command, j.Attempt, j.MaxAttempts
	b.SubmittedBy, b.CreatedAt, b.StartedAt, b.CompletedAt, b.LastError, b.ParentJobID = j.SubmittedBy, j.CreatedAt, j.StartedAt, j.CompletedAt, j.LastError, j.ParentJobID
	b.RetryOf, b.RetriedAs = inspection.RetryOf, inspection.RetriedAs
	b.Payload, b.Seq, b.UpdatedSeq = j.Payload, j.Seq, j.UpdatedSeq
	if n := len(inspection.Attempts); n > 0 {
		b.Result = inspection.Attempts[n-1].Response
	}
	return out, nil
}

// ListJobsInput is GET /jobs's query.
type ListJobsInput struct {
	Status string `query:"status" enum:"queued,running,cancel_requested,succeeded,dead,canceled" doc:"Only jobs with this status"`
	Plugin string `query:"plugin" maxLength:"128" doc:"Only this plugin's jobs"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"`
	Cursor string `query:"cursor" maxLength:"64" doc:"Where to go on: the next_cursor of the previous page (with the same filters)"`
}

// Jobs is a list of jobs.
type Jobs struct {
	Body struct {
		Jobs       []views.Job `json:"jobs"`
		NextCursor string      `json:"next_cursor,omitempty" doc:"Pass it as cursor for the next page; absent on the last page"`
	}
}

func (s *Server) handleListJobs(ctx context.Context, in *ListJobsInput) (*Jobs, error) {
	before, err := parseCursor(in.Cursor)
	if err != nil {
		return nil, err
	}
	// One more than the page shows: whether there is a next page.
	jobs, err := views.ListJobs(ctx, s.opts.Ledger, views.JobFilter{Status: events.Status(in.Status), Plugin: in.Plugin, Limit: in.Limit + 1, Before: before})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Jobs{}
	if len(jobs) > in.Limit {
		jobs = jobs[:in.Limit]
		out.Body.NextCursor = formatCursor(jobs[len(jobs)-1].Seq)
	}
	out.Body.Jobs = jobs
	return out, nil
}

// JobTreeInput is GET /job/{id}/tree's request.
type JobTreeInput struct {
	ID    string `path:"id" minLength:"1" maxLength:"64" doc:"A job id, its short id (the last 12 characters), or a unique prefix of either"`
	Limit int    `query:"limit" minimum:"1" maximum:"10000" default:"1000" doc:"The most jobs to return"`
	At    string `query:"at" maxLength:"64" doc:"Show the tree as it was at this moment: a seq, or an RFC 3339 time"`
}

// JobTree is a job's whole tree, now or at a moment.
type JobTree struct {
	Body struct {
		JobID string `json:"job_id" doc:"The job asked for"`
		views.JobTreeAt
	}
}

func (s *Server) handleJobTree(ctx context.Context, in *JobTreeInput) (*JobTree, error) {
	id, err := views.ResolveJobID(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &JobTree{}
	out.Body.JobID = id
	if in.At != "" {
		cut, err := views.ParseCut(in.At)
		if err != nil {
			return nil, errorOf(err)
		}
		if out.Body.JobTreeAt, err = views.ReadJobTreeAt(ctx, s.opts.Ledger, id, cut, in.Limit); err != nil {
			return nil, errorOf(err)
		}
		return out, nil
	}
	tree, err := views.ReadJobTree(ctx, s.opts.Ledger, id, in.Limit)
	if err != nil {
		return nil, errorOf(err)
	}
	out.Body.JobTreeAt = views.TreeNow(tree)
	return out, nil
}

// JobEvents are a job's events.
type JobEvents struct {
	Body struct {
		Events []views.Event `json:"events"`
	}
}

func (s *Server) handleJobEvents(ctx context.Context, in *jobPath) (*JobEvents, error) {
	inspection, err := views.Inspect(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &JobEvents{}
	out.Body.Events = inspection.Events
	return out, nil
}

// JobLogs are a job's log lines.
type JobLogs struct {
	Body struct {
		Lines []views.LogLine `json:"lines"`
	}
}

func (s *Server) handleJobLogs(ctx context.Context, in *jobPath) (*JobLogs, error) {
	id, err := views.ResolveJobID(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, errorOf(err)
	}
	lines, err := views.JobLogs(ctx, s.opts.Ledger, id)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &JobLogs{}
	out.Body.Lines = lines
	return out, nil
}

// CancelInput is POST /job/{id}/cancel's request.
type CancelInput struct {
	ID     string `path:"id" minLength:"1" maxLength:"64"`
	Reason string `query:"reason" maxLength:"1024" doc:"Why (recorded with the cancel)"`
}

// Canceled is the answer to a cancel.
type Canceled struct {
	Body struct {
		JobID  string        `json:"job_id"`
		Status events.Status `json:"status" doc:"canceled, or cancel_requested for a running job"`
	}
}

func (s *Server) handleCancelJob(ctx context.Context, in *CancelInput) (*Canceled, error) {
	reason := in.Reason
	if reason == "" {
		reason = "canceled through the API"
	}
	res, err := s.opts.Engine().Cancel(ctx, engine.Cancel{Job: in.ID, Reason: reason, By: events.ActorAPI, Now: s.opts.Now()})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Canceled{}
	out.Body.JobID, out.Body.Status = res.JobID, res.Status
	return out, nil
}

func (s *Server) handleRetryJob(ctx context.Context, in *jobPath) (*Accepted, error) {
	res, err := s.opts.Engine().Retry(ctx, engine.Redo{Job: in.ID, By: events.ActorAPI, Now: s.opts.Now()})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Accepted{}
	out.Body.JobID, out.Body.Deduped, out.Body.RetryOf = res.JobID, res.Deduped, res.RetryOf
	if res.Deduped && res.ExistingJobID != "" {
		out.Body.JobID = res.ExistingJobID
	}
	return out, nil
}

// Plugin is a loaded plugin with its health.
type Plugin struct {
	events.AppliedPlugin
	Health views.PluginHealth `json:"health"`
}

// Plugins are the plugins the daemon loaded and those it skipped.
type Plugins struct {
	Body struct {
		Plugins []Plugin               `json:"plugins"`
		Skipped []events.SkippedPlugin `json:"skipped"`
	}
}

func (s *Server) handleListPlugins(ctx context.Context, _ *struct{}) (*Plugins, error) {
	applied := s.opts.Engine().Applied()
	health, err := views.ListPluginHealth(ctx, s.opts.Ledger)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Plugins{}
	out.Body.Plugins, out.Body.Skipped = []Plugin{}, applied.Skipped
	if out.Body.Skipped == nil {
		out.Body.Skipped = []events.SkippedPlugin{}
	}
	for _, p := range applied.Plugins {
		out.Body.Plugins = append(out.Body.Plugins, Plugin{AppliedPlugin: p, Health: health.Of(p.Name)})
	}
	return out, nil
}

// QueueInput is GET /queue's query.
type QueueInput struct {
	Limit int `query:"limit" minimum:"1" maximum:"1000" default:"50" doc:"How many active jobs to list"`
}

// Queue is the queue's size and its first jobs.
type Queue struct {
	Body views.Queue
}

func (s *Server) handleGetQueue(ctx context.Context, in *QueueInput) (*Queue, error) {
	q, err := views.ReadQueue(ctx, s.opts.Ledger, in.Limit)
	if err != nil {
		return nil, errorOf(err)
	}
	if q.Jobs == nil {
		q.Jobs = []views.Job{}
	}
	return &Queue{Body: q}, nil
}

// Health is GET /healthz's answer (spec §10.3, with the projector's lag
// and whether the ledger's writes succeed): 503 while they fail.
type Health struct {
	Status int
	Body   struct {
		Status             string             `json:"status" enum:"ok,degraded,unavailable" doc:"unavailable (503) while the ledger's writes fail; degraded while the projector fails"`
		UptimeSeconds      int64              `json:"uptime_seconds"`
		QueueDepth         int64              `json:"queue_depth"`
		PluginsLoaded      int                `json:"plugins_loaded"`
		PluginsCircuitOpen int                `json:"plugins_circuit_open"`
		ProjectorLag       *projections.Lag   `json:"projector_lag,omitempty"`
		Writes             ledger.WriteHealth `json:"writes" doc:"Whether the ledger's writes succeed; if not, since when and the last error"`
	}
}

func (s *Server) handleHealth(ctx context.Context, _ *struct{}) (*Health, error) {
	h, err := s.opts.Engine().Health(ctx, engine.HealthFacts{Started: s.opts.Started, Now: s.opts.Now(), Projector: s.opts.Projector})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Health{Status: http.StatusOK}
	if h.Writes.Failing {
		out.Status = http.StatusServiceUnavailable
	}
	b := &out.Body
	b.Status, b.UptimeSeconds, b.QueueDepth, b.PluginsLoaded = h.Status, h.UptimeSeconds, h.QueueDepth, h.PluginsLoaded
	b.PluginsCircuitOpen, b.ProjectorLag, b.Writes = h.PluginsCircuitOpen, h.ProjectorLag, h.Writes
	return out, nil
}
