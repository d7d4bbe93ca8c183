package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// registerRuns adds GET /runs and GET /run/{id}.
func (s *Server) registerRuns() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-runs", Method: http.MethodGet, Path: "/runs", Summary: "Pipeline runs, newest first",
		Errors: []int{http.StatusBadRequest},
	}, auth.JobsRO), s.handleListRuns)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-run", Method: http.MethodGet, Path: "/run/{id}", Summary: "A pipeline run: its status, first job and, once finished, its results",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleGetRun)
}

// ListRunsInput is GET /runs's query.
type ListRunsInput struct {
	Pipeline string `query:"pipeline" maxLength:"128" doc:"Only this pipeline's runs"`
	Status   string `query:"status" enum:"running,succeeded,failed" doc:"Only runs with this status"`
	Limit    int    `query:"limit" minimum:"1" maximum:"1000" default:"50"`
}

// Runs is GET /runs's answer.
type Runs struct {
	Body struct {
		Runs []views.Run `json:"runs"`
	}
}

func (s *Server) handleListRuns(ctx context.Context, in *ListRunsInput) (*Runs, error) {
	runs, err := views.FindRuns(ctx, s.opts.Ledger, views.RunQuery{Pipeline: in.Pipeline, Status: events.RunStatus(in.Status), Limit: in.Limit})
	if err != nil {
		return nil, errorOf(err)
	}
	out := &Runs{}
	out.Body.Runs = runs
	return out, nil
}

// runPath is a run's id in the path.
type runPath struct {
	ID string `path:"id" maxLength:"64" doc:"The run's id (run_id of POST /pipeline/{name}), or its short id (the last 12 characters), or a unique prefix of either"`
}

// RunStatus is GET /run/{id}'s answer.
type RunStatus struct {
	Body views.Run
}

func (s *Server) handleGetRun(ctx context.Context, in *runPath) (*RunStatus, error) {
	id, err := views.ResolveRunID(ctx, s.opts.Ledger, in.ID)
	var run views.Run
	if err == nil {
		run, err = views.ReadRun(ctx, s.opts.Ledger, id)
	}
	if errors.Is(err, views.ErrRunNotFound) {
		return nil, newError(http.StatusNotFound, "see: GET /runs", err.Error())
	}
	if err != nil {
		return nil, errorOf(err)
	}
	return &RunStatus{Body: run}, nil
}
