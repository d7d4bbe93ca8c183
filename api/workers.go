package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humaecho"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// The worker routes (docs/remote-workers.md): what `ductile worker` on
// another machine calls to register, claim jobs under a lease, renew it,
// stream stderr, progress and export items, and complete or fail the
// attempt. They need the worker scope, which grants nothing else.

// workerDescription is what every worker operation says about fences.
const workerDescription = "A route of remote worker hosts (ductile worker; docs/remote-workers.md), scope worker. " +
	"Every call about a claimed job carries the worker's name, the attempt and the fence its claim gave: a fence that no longer " +
	"holds the job (the lease expired and the job moved on, or it was canceled and ended) is refused with 409 code stale_fence, " +
	"recorded on the job as job.superseded and never applied; the worker then drops the job. "

// registerWorkers adds the worker routes.
func (s *Server) registerWorkers() {
	maxBody := s.opts.Settings.MaxBodySize + 1
	jobErrors := []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge}
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "register-worker", Method: http.MethodPost, Path: "/worker/register", Summary: "Register a worker host and the plugins it serves",
		Description: workerDescription + "Records worker.registered: who the worker is and each plugin it serves as its manifest there " +
			"declares it. A plugin the config places runs_on: remote or any need not be installed on the daemon's machine. " +
			"Registering again replaces the worker's registration. The answer gives the lease period: renew every third of it. " +
			"The name is bound to the token that registered it while that token is configured: another token registering, claiming or " +
			"reporting under it is 409 code worker_name_taken. A token whose scopes are worker:plugin=NAME may register only those plugins " +
			"(403 code plugin_not_permitted).",
		MaxBodyBytes: maxBody, Errors: []int{http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge},
	}, auth.Worker), s.handleRegisterWorker)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "claim-job", Method: http.MethodPost, Path: "/worker/claim", Summary: "Claim a job under a lease, waiting for one",
		Description: workerDescription + "Gives the worker the oldest queued job, due now, of the plugins it registered (or of those named " +
			"in plugins) that the config places runs_on: remote or any, within each plugin's parallelism cap: 200 with the claim " +
			"(the protocol v2 request to run the plugin with, the fence and lease_until). With none, it waits up to wait_ms " +
			"(at most 60 s), woken as soon as a job is enqueued, then answers 204 (at once when the daemon begins to stop). A worker that did not register, or serves no " +
			"plugin it may claim, is 409 code unknown_worker.",
		MaxBodyBytes: maxBody, Middlewares: huma.Middlewares{s.liftClaimDeadline},
		Errors: []int{http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge},
	}, auth.Worker), s.handleClaimJob)
	claim := s.api.OpenAPI().Paths["/worker/claim"].Post
	claim.Responses["204"] = &huma.Response{Description: "No job came within wait_ms: claim again"}
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "renew-lease", Method: http.MethodPost, Path: "/worker/jobs/{id}/renew", Summary: "Renew the lease on a claimed job",
		Description: workerDescription + "Extends the lease by the lease period (recorded at most once per third of it: renewing more " +
			"often is harmless). cancel_requested true tells the worker to stop the plugin's process group and complete the attempt " +
			"(it ends canceled).",
		MaxBodyBytes: maxBody, Errors: jobErrors,
	}, auth.Worker), s.handleRenewLease)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "record-worker-logs", Method: http.MethodPost, Path: "/worker/jobs/{id}/logs", Summary: "Record a batch of the plugin's stderr lines",
		Description:  workerDescription + "Appends the lines (job.stderr_written), as the daemon records a local plugin's stderr.",
		MaxBodyBytes: maxBody, Errors: jobErrors,
	}, auth.Worker), s.handleRecordWorkerLogs)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "report-worker-control", Method: http.MethodPost, Path: "/worker/jobs/{id}/control", Summary: "Report the run's progress or an export item",
		Description: workerDescription + "What the plugin wrote on its control channel (fd 3): progress (coalesced as for a local run: " +
			"at most one job.progressed per second) and export items (validated against the caps and stored durably before the " +
			"answer, which gives the item's id; over a cap: 400 and nothing is stored).",
		MaxBodyBytes: maxBody, Errors: jobErrors,
	}, auth.Worker), s.handleReportWorkerControl)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "complete-job", Method: http.MethodPost, Path: "/worker/jobs/{id}/complete", Summary: "Complete a claimed job's attempt",
		Description: workerDescription + "Records how the attempt ended, with the plugin's response, through the same path as a local " +
			"completion: outcome, state and facts, routed jobs, pipelines, circuit breaker. A job completes once: a second " +
			"completion, or one after the lease expired, is superseded (409 stale_fence).",
		MaxBodyBytes: maxBody, Errors: jobErrors,
	}, auth.Worker), s.handleCompleteJob)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "fail-job", Method: http.MethodPost, Path: "/worker/jobs/{id}/fail", Summary: "Fail a claimed job's attempt without a plugin response",
		Description:  workerDescription + "For an attempt whose plugin could not start or was lost: the job's retry policy decides what follows.",
		MaxBodyBytes: maxBody, Errors: jobErrors,
	}, auth.Worker), s.handleFailJob)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-workers", Method: http.MethodGet, Path: "/workers", Summary: "The registered worker hosts: plugins, claims, last seen",
	}, auth.JobsRO), s.handleListWorkers)
}

// WorkerObserver counts what remote workers do through the worker
// routes: the per-worker series of /metrics (metrics.Metrics).
type WorkerObserver interface {
	WorkerClaimed(worker, plugin string)
	WorkerCompleted(worker string, outcome events.Outcome)
	WorkerSuperseded(worker, refused string)
}

// observe counts worker's request: a claim, an applied completion, or,
// when err is a stale fence, a superseded request of kind refused. count
// gets the worker's label: its name if it registered, else
// UnregisteredWorker, so that the series' worker labels are bounded by
// the registered workers, not by what requests claim to be.
func (s *Server) observe(ctx context.Context, worker, refused string, err error, count func(o WorkerObserver, worker string)) {
	o := s.opts.Workers
	if o == nil || (err != nil && !errors.Is(err, commands.ErrStaleFence)) {
		return
	}
	label := UnregisteredWorker
	if workers, werr := s.opts.Engine().Workers(context.WithoutCancel(ctx)); werr == nil {
		if _, ok := workers[worker]; ok {
			label = worker
		}
	}
	if err != nil {
		o.WorkerSuperseded(label, refused)
		return
	}
	count(o, label)
}

// UnregisteredWorker is the worker label of /metrics' per-worker series
// for requests under a name no worker registered.
const UnregisteredWorker = "(unregistered)"

// liftClaimDeadline lets a claim wait up to engine.MaxClaimWait before
// it answers, beyond api.write_timeout.
func (s *Server) liftClaimDeadline(ctx huma.Context, next func(huma.Context)) {
	w := humaecho.Unwrap(ctx).Response().Writer
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(engine.MaxClaimWait + s.opts.Settings.WriteTimeout))
	next(ctx)
}

// RegisterWorkerInput is POST /worker/register's request.
type RegisterWorkerInput struct {
	Body events.WorkerRegisteredData
}

// WorkerRegistered is the answer to a registration.
type WorkerRegistered struct {
	Body struct {
		Name          string `json:"name"`
		LeasePeriodMS int64  `json:"lease_period_ms" doc:"How long a claim or renewal holds: renew every third of it"`
	}
}

// workerLimits are the plugins the request's token may serve as a worker
// (its worker:plugin=NAME scopes), with limited true; limited is false
// when it may serve every plugin.
func (s *Server) workerLimits(ctx context.Context) (plugins []string, limited bool) {
	l, ok := s.opts.Guard.(auth.WorkerLimiter)
	if !ok {
		return nil, false
	}
	authorization, _ := ctx.Value(authorizationKey{}).(string)
	return l.WorkerPlugins(authorization)
}

// permitted refuses plugins the request's token may not serve as a worker:
// 403 plugin_not_permitted naming the first.
func (s *Server) permitted(ctx context.Context, plugins []string) error {
	allowed, limited := s.workerLimits(ctx)
	if !limited {
		return nil
	}
	for _, p := range plugins {
		if !slices.Contains(allowed, p) {
			return &Error{Status: http.StatusForbidden, Code: errcode.PluginNotPermitted, Scope: string(config.WorkerPluginScope(p)),
				Message: fmt.Sprintf("token %q may serve only %s as a worker, not plugin %q", tokenOf(ctx), strings.Join(allowed, ", "), p),
				Hint: "serve only those plugins (ductile worker --plugin NAME), or use a token with worker:plugin=" + p +
					" or worker (ductile config token create NAME --scopes worker:plugin=" + p + ", then ductile system reload)"}
		}
	}
	return nil
}

// actAs refuses the request's token acting as worker name when another
// token registered it (409 worker_name_taken).
func (s *Server) actAs(ctx context.Context, e *engine.Engine, name string) error {
	if err := e.CheckWorkerToken(ctx, name, tokenOf(ctx)); err != nil {
		return errorOf(err)
	}
	return nil
}

func (s *Server) handleRegisterWorker(ctx context.Context, in *RegisterWorkerInput) (*WorkerRegistered, error) {
	e := s.opts.Engine()
	names := make([]string, len(in.Body.Plugins))
	for i, p := range in.Body.Plugins {
		names[i] = p.Name
	}
	if err := s.permitted(ctx, names); err != nil {
		return nil, err
	}
	in.Body.Token = tokenOf(ctx)
	if err := e.RegisterWorker(ctx, in.Body); err != nil {
		return nil, errorOf(err)
	}
	out := &WorkerRegistered{}
	out.Body.Name, out.Body.LeasePeriodMS = in.Body.Name, e.Fleet().LeasePeriod().Milliseconds()
	return out, nil
}

// ClaimInput is POST /worker/claim's request.
type ClaimInput struct {
	Body struct {
		Worker  events.Worker `json:"worker" doc:"Who claims: the name it registered under, and its process id"`
		Plugins []string      `json:"plugins,omitempty" maxItems:"1000" doc:"Only jobs of these plugins (default: every plugin it registered)"`
		WaitMS  int64         `json:"wait_ms,omitempty" minimum:"0" doc:"How long to wait for a job, in milliseconds (at most 60000)"`
	}
}

// ClaimAnswer is a claim: 200 with the job, or 204 with none.
type ClaimAnswer struct {
	Status int
	Body   *ClaimBody
}

// ClaimBody is a claimed job.
type ClaimBody struct {
	Claim *engine.Claimed `json:"claim" doc:"The job, the request to run its plugin with, and the lease it is held under"`
}

func (s *Server) handleClaimJob(ctx context.Context, in *ClaimInput) (*ClaimAnswer, error) {
	wait := time.Duration(in.Body.WaitMS) * time.Millisecond
	e := s.opts.Engine()
	plugins := in.Body.Plugins
	if err := s.permitted(ctx, plugins); err != nil {
		return nil, err
	}
	if allowed, limited := s.workerLimits(ctx); limited && plugins == nil {
		plugins = allowed // a registration made under another token's scopes may list more
	}
	// The wait ends with the request (its client went away) or when the
	// server begins to shut down (it answers 204: claim again).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()
	err := e.CheckWorkerToken(ctx, in.Body.Worker.Name, tokenOf(ctx))
	var c *engine.Claimed
	if err == nil {
		c, err = e.Claim(ctx, in.Body.Worker, plugins, wait)
	}
	if err != nil {
		switch {
		case s.streams.Err() != nil:
			return &ClaimAnswer{Status: http.StatusNoContent}, nil
		case ctx.Err() != nil:
			return nil, newError(http.StatusServiceUnavailable, "claim again", "the claim's request ended before a job came")
		}
		return nil, errorOf(err)
	}
	if c == nil {
		return &ClaimAnswer{Status: http.StatusNoContent}, nil
	}
	s.observe(ctx, in.Body.Worker.Name, "", nil, func(o WorkerObserver, worker string) { o.WorkerClaimed(worker, c.Plugin) })
	return &ClaimAnswer{Status: http.StatusOK, Body: &ClaimBody{Claim: c}}, nil
}

// Fence is what a worker sends with every call about a claimed job.
type Fence struct {
	Worker  events.Worker `json:"worker" doc:"Who holds the lease: the name it registered under"`
	Attempt int           `json:"attempt" minimum:"1" doc:"The claimed attempt"`
	Fence   int64         `json:"fence" minimum:"1" doc:"The fence the claim gave"`
}

// fenced is f as the engine takes it.
func (f Fence) fenced() commands.Fenced {
	return commands.Fenced{Worker: f.Worker.Name, Attempt: f.Attempt, Fence: f.Fence}
}

// RenewInput is POST /worker/jobs/{id}/renew's request.
type RenewInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"The claimed job's id, as the claim gave it"`
	Body Fence
}

// RenewAnswer is the answer to a renewal.
type RenewAnswer struct {
	Body commands.Renewed
}

func (s *Server) handleRenewLease(ctx context.Context, in *RenewInput) (*RenewAnswer, error) {
	if err := s.actAs(ctx, s.opts.Engine(), in.Body.Worker.Name); err != nil {
		return nil, err
	}
	r, err := s.opts.Engine().Renew(ctx, in.ID, in.Body.fenced())
	s.observe(ctx, in.Body.Worker.Name, events.RefusedRenew, err, func(WorkerObserver, string) {})
	if err != nil {
		return nil, errorOf(err)
	}
	return &RenewAnswer{Body: r}, nil
}

// WorkerLogsInput is POST /worker/jobs/{id}/logs's request.
type WorkerLogsInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"The claimed job's id, as the claim gave it"`
	Body struct {
		Fence
		Line      int                 `json:"line,omitempty" minimum:"0" doc:"The number of the batch's first line among the attempt's stderr lines, from 1"`
		Lines     []events.StderrLine `json:"lines" maxItems:"10000"`
		Truncated bool                `json:"truncated,omitempty" doc:"Lines were dropped before these (the worker's buffer was full)"`
	}
}

func (s *Server) handleRecordWorkerLogs(ctx context.Context, in *WorkerLogsInput) (*struct{}, error) {
	if err := s.actAs(ctx, s.opts.Engine(), in.Body.Worker.Name); err != nil {
		return nil, err
	}
	b := in.Body
	err := s.opts.Engine().RecordRemoteStderr(ctx, b.fenced(), commands.StderrLines{JobID: in.ID, Line: b.Line, Lines: b.Lines, Truncated: b.Truncated})
	s.observe(ctx, b.Worker.Name, events.RefusedLog, err, func(WorkerObserver, string) {})
	if err != nil {
		return nil, errorOf(err)
	}
	return nil, nil
}

// ControlInput is POST /worker/jobs/{id}/control's request.
type ControlInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"The claimed job's id, as the claim gave it"`
	Body struct {
		Fence
		Progress *ControlProgress `json:"progress,omitempty" doc:"The run's progress now (events.Progressed)"`
		Export   *ControlExport   `json:"export,omitempty" doc:"An export item (events.Exported; its id is assigned here)"`
	}
}

// ControlProgress is a run's progress as a worker sends it: the JSON of
// events.Progressed, whose attempt is the fence's.
type ControlProgress struct {
	Attempt  int      `json:"attempt,omitempty" doc:"Ignored: the fence's attempt is recorded"`
	Progress *float64 `json:"progress,omitempty" minimum:"0" maximum:"1"`
	Message  string   `json:"message,omitempty" maxLength:"4096"`
	Stage    string   `json:"stage,omitempty" maxLength:"256"`
	Lines    int      `json:"lines,omitempty" minimum:"0"`
}

// ControlExport is an export item as a worker sends it: the JSON of
// events.Exported, whose id and attempt are assigned here.
type ControlExport struct {
	ExportItemID string            `json:"export_item_id,omitempty" doc:"Ignored: assigned when it is stored"`
	Attempt      int               `json:"attempt,omitempty" doc:"Ignored: the fence's attempt is recorded"`
	Type         events.ExportType `json:"type" enum:"text,url,binary_url,binary"`
	Text         string            `json:"text,omitempty"`
	URL          string            `json:"url,omitempty"`
	BinaryURL    string            `json:"binary_url,omitempty"`
	Binary       []byte            `json:"binary,omitempty" doc:"base64"`
	MIME         string            `json:"mime,omitempty"`
	Description  string            `json:"description,omitempty"`
	Metadata     json.RawMessage   `json:"metadata,omitempty" doc:"A JSON object"`
	TraceID      string            `json:"trace_id,omitempty"`
}

// ControlAnswer is the answer to a control message.
type ControlAnswer struct {
	Body struct {
		ExportItemID string `json:"export_item_id,omitempty" doc:"The stored export item's id"`
	}
}

func (s *Server) handleReportWorkerControl(ctx context.Context, in *ControlInput) (*ControlAnswer, error) {
	if err := s.actAs(ctx, s.opts.Engine(), in.Body.Worker.Name); err != nil {
		return nil, err
	}
	b := in.Body
	if b.Progress == nil && b.Export == nil {
		return nil, newError(http.StatusBadRequest, "send progress, export or both", "the control message has neither progress nor export")
	}
	r, err := s.opts.Engine().RemoteReport(ctx, in.ID, b.fenced())
	if err != nil {
		return nil, errorOf(err)
	}
	out := &ControlAnswer{}
	if b.Progress != nil {
		p := b.Progress
		r.Progress(events.Progressed{Attempt: b.Attempt, Progress: p.Progress, Message: p.Message, Stage: p.Stage, Lines: p.Lines})
	}
	if b.Export != nil {
		x := b.Export
		item := events.Exported{Attempt: b.Attempt, Type: x.Type, Text: x.Text, URL: x.URL, BinaryURL: x.BinaryURL, Binary: x.Binary,
			MIME: x.MIME, Description: x.Description, Metadata: x.Metadata, TraceID: x.TraceID}
		stored, err := r.Export(ctx, item)
		if errors.Is(err, commands.ErrInvalidExport) {
			return nil, newError(http.StatusBadRequest, "fix the item (docs/runs.md: export caps), or send a url instead of the content", err.Error())
		}
		if err != nil {
			return nil, errorOf(err)
		}
		out.Body.ExportItemID = stored.ExportItemID
	}
	return out, nil
}

// CompleteInput is POST /worker/jobs/{id}/complete's request.
type CompleteInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"The claimed job's id, as the claim gave it"`
	Body CompleteBody
}

// CompleteBody is the attempt as the worker ran it: the JSON of
// engine.Attempt, with the fence (its job_id, if given, must be the
// path's).
type CompleteBody struct {
	Fence
	JobID           string          `json:"job_id,omitempty" maxLength:"64"`
	Kind            events.Outcome  `json:"kind" minLength:"1" doc:"How the attempt ended: ok, error, protocol_error, timeout, canceled…"`
	Retryable       bool            `json:"retryable,omitempty"`
	Error           string          `json:"error,omitempty"`
	ExitCode        int             `json:"exit_code,omitempty" doc:"-1: killed by a signal, or never started"`
	Duration        time.Duration   `json:"duration_ns,omitempty" minimum:"0"`
	Response        json.RawMessage `json:"response,omitempty" doc:"The plugin's response as it wrote it (one JSON object)"`
	Stdout          string          `json:"stdout,omitempty"`
	StdoutBytes     int64           `json:"stdout_bytes,omitempty"`
	Stderr          string          `json:"stderr,omitempty"`
	StderrTruncated bool            `json:"stderr_truncated,omitempty"`
	StderrBytes     int64           `json:"stderr_bytes,omitempty"`
	EndedAt         time.Time       `json:"ended_at,omitzero" doc:"When the attempt ended (default: when the daemon records it)"`
}

// CompleteAnswer is how a completed attempt left its job.
type CompleteAnswer struct {
	Body struct {
		Status      events.Status  `json:"status" doc:"succeeded, queued (a retry follows), dead or canceled"`
		Kind        events.Outcome `json:"kind" doc:"The outcome recorded"`
		Error       string         `json:"error,omitempty"`
		NextRetryAt *time.Time     `json:"next_retry_at,omitempty"`
		Children    []string       `json:"children" doc:"The jobs it enqueued (routed, or its pipeline's next steps)"`
	}
}

func (s *Server) handleCompleteJob(ctx context.Context, in *CompleteInput) (*CompleteAnswer, error) {
	if err := s.actAs(ctx, s.opts.Engine(), in.Body.Worker.Name); err != nil {
		return nil, err
	}
	b := in.Body
	if b.JobID != "" && b.JobID != in.ID {
		return nil, newError(http.StatusBadRequest, "send the completion to its own job's path", "job_id "+b.JobID+" is not the path's job "+in.ID)
	}
	a := engine.Attempt{JobID: in.ID, Attempt: b.Attempt, Worker: b.Worker, Kind: b.Kind, Retryable: b.Retryable, Error: b.Error,
		ExitCode: b.ExitCode, Duration: b.Duration, Response: b.Response, Stdout: b.Stdout, StdoutBytes: b.StdoutBytes, Stderr: b.Stderr,
		StderrTruncated: b.StderrTruncated, StderrBytes: b.StderrBytes, EndedAt: b.EndedAt}
	c, err := s.opts.Engine().CompleteRemote(ctx, b.Fence.Fence, a)
	s.observe(ctx, b.Worker.Name, events.RefusedComplete, err, func(o WorkerObserver, worker string) { o.WorkerCompleted(worker, c.Kind) })
	if err != nil {
		return nil, errorOf(err)
	}
	return completeAnswer(c), nil
}

func completeAnswer(c engine.Completion) *CompleteAnswer {
	out := &CompleteAnswer{}
	b := &out.Body
	b.Status, b.Kind, b.Error, b.Children = c.Status, c.Kind, c.Error, []string{}
	if !c.NextRetryAt.IsZero() {
		b.NextRetryAt = &c.NextRetryAt
	}
	for _, ch := range c.Children {
		if !ch.Deduped {
			b.Children = append(b.Children, ch.JobID)
		}
	}
	return out
}

// FailInput is POST /worker/jobs/{id}/fail's request.
type FailInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"The claimed job's id, as the claim gave it"`
	Body struct {
		Fence
		JobID     string         `json:"job_id,omitempty" maxLength:"64" doc:"If given, the path's job (engine.Failure's JSON)"`
		Kind      events.Outcome `json:"kind,omitempty" doc:"How it failed (default error; never ok)"`
		Error     string         `json:"error" maxLength:"65536"`
		Retryable bool           `json:"retryable,omitempty"`
		ExitCode  int            `json:"exit_code,omitempty" doc:"-1: killed by a signal, or never started"`
		Duration  time.Duration  `json:"duration_ns,omitempty" minimum:"0"`
	}
}

func (s *Server) handleFailJob(ctx context.Context, in *FailInput) (*CompleteAnswer, error) {
	if err := s.actAs(ctx, s.opts.Engine(), in.Body.Worker.Name); err != nil {
		return nil, err
	}
	b := in.Body
	if b.JobID != "" && b.JobID != in.ID {
		return nil, newError(http.StatusBadRequest, "send the failure to its own job's path", "job_id "+b.JobID+" is not the path's job "+in.ID)
	}
	c, err := s.opts.Engine().Fail(ctx, engine.Failure{JobID: in.ID, Worker: b.Worker, Attempt: b.Attempt, Fence: b.Fence.Fence,
		Kind: b.Kind, Error: b.Error, Retryable: b.Retryable, ExitCode: b.ExitCode, Duration: b.Duration})
	s.observe(ctx, b.Worker.Name, events.RefusedComplete, err, func(o WorkerObserver, worker string) { o.WorkerCompleted(worker, c.Kind) })
	if err != nil {
		return nil, errorOf(err)
	}
	return completeAnswer(c), nil
}

// Fleet is GET /workers's answer.
type Fleet struct {
	Body struct {
		Workers []views.FleetWorker `json:"workers"`
	}
}

func (s *Server) handleListWorkers(ctx context.Context, _ *struct{}) (*Fleet, error) {
	workers, err := views.ReadFleet(ctx, s.opts.Ledger)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Fleet{}
	out.Body.Workers = workers
	return out, nil
}
