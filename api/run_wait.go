package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// registerRunWait adds GET /runs/{id}/wait.
func (s *Server) registerRunWait() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "wait-run", Method: http.MethodGet, Path: "/runs/{id}/wait", Summary: "Wait for a run to end, then answer it",
		Description: runsDescription + "Waits until the run (plugin or pipeline) ends, or timeout_ms passes (bounded by api.max_sync_timeout): " +
			"200 with the run once it ended (at once if it had), 202 with the run as it is now past the wait (it goes on: wait again). " +
			"A waiting caller counts against api.max_concurrent_sync: one more is 503 too_many_sync.",
		Middlewares: huma.Middlewares{s.liftWriteDeadline},
		Errors:      []int{http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable},
	}, auth.JobsRO), s.handleWaitRun)
	wait := s.api.OpenAPI().Paths["/runs/{id}/wait"].Get
	wait.Responses["202"] = &huma.Response{Description: "The run had not ended within the wait: the run as it is now",
		Content: wait.Responses["200"].Content}
	wait.Responses["503"].Headers = map[string]*huma.Param{"Retry-After": {
		Description: "Seconds to wait before calling again (too_many_sync)", Schema: &huma.Schema{Type: huma.TypeInteger},
	}}
}

// WaitRunInput is GET /runs/{id}/wait's request.
type WaitRunInput struct {
	ID        string `path:"id" minLength:"1" maxLength:"64" doc:"A run id, its short id (the last 12 characters), or a unique prefix of either"`
	TimeoutMS int    `query:"timeout_ms" minimum:"0" maximum:"3600000" default:"30000" doc:"How long to wait, in milliseconds (at most api.max_sync_timeout)"`
}

// RunWaited is GET /runs/{id}/wait's answer.
type RunWaited struct {
	Status int
	Body   RunResource
}

func (s *Server) handleWaitRun(ctx context.Context, in *WaitRunInput) (*RunWaited, error) {
	run, err := s.readRun(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if run.ended() {
		return &RunWaited{Status: http.StatusOK, Body: run}, nil
	}
	select {
	case s.syncSlots <- struct{}{}:
		defer func() { <-s.syncSlots }()
	default:
		return nil, s.tooManySync()
	}
	wait := min(time.Duration(in.TimeoutMS)*time.Millisecond, s.opts.Settings.MaxSyncTimeout)
	waitCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)() // Shutdown: answer now, the run goes on
	if run.Plugin != nil {
		_, _, err = views.WaitJob(waitCtx, s.opts.Ledger, run.Plugin.RunID)
	} else {
		_, err = views.WaitRun(waitCtx, s.opts.Ledger, run.Pipeline.RunID)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, ctx.Err() // the caller is gone: nobody reads the answer
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
	default:
		return nil, errorOf(err)
	}
	if run, err = s.readRun(ctx, run.id()); err != nil {
		return nil, err
	}
	out := &RunWaited{Status: http.StatusAccepted, Body: run}
	if run.ended() {
		out.Status = http.StatusOK
	}
	return out, nil
}

// ended reports whether the run has ended.
func (r RunResource) ended() bool {
	if r.Pipeline != nil {
		return r.Pipeline.Status != events.RunRunning
	}
	return r.Plugin != nil && r.Plugin.Status.Terminal()
}

// id is the run's id.
func (r RunResource) id() string {
	if r.Pipeline != nil {
		return r.Pipeline.RunID
	}
	return r.Plugin.RunID
}
