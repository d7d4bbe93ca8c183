package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/schedule"
	"github.com/ductile/ductile/views"
)

// registerPipelineList adds GET /pipelines, GET /pipelines/{name} and GET
// /schedules: what the daemon runs, as the web page draws it.
func (s *Server) registerPipelineList() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-pipelines", Method: http.MethodGet, Path: "/pipelines",
		Summary:     "The pipelines the daemon runs, each with its trigger and graph",
		Description: "Sorted by name; the compiled pipelines of the config the daemon applied (ductile pipeline list reads the config file instead).",
	}, auth.PluginRO), s.handleListPipelines)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-pipeline", Method: http.MethodGet, Path: "/pipelines/{name}",
		Summary:     "A pipeline the daemon runs: its trigger, graph and compiled nodes",
		Description: "The nodes are in the order they are written, calls inlined (as ductile pipeline show prints them).",
		Errors:      []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.PluginRO), s.handleGetPipeline)
	// They read the engine's compiled pipelines only: nothing in it fails.
	delete(s.api.OpenAPI().Paths["/pipelines"].Get.Responses, "500")
	delete(s.api.OpenAPI().Paths["/pipelines/{name}"].Get.Responses, "500")
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-schedules", Method: http.MethodGet, Path: "/schedules",
		Summary: "The schedules the daemon's scheduler runs: last firing, next run and circuit breaker",
		Description: "Each with its last firing, its next one and why (window, jitter, not_on), what a firing due now would do " +
			"and its plugin command's breaker (as ductile system scheduler --json shows them), at now.",
	}, auth.JobsRO), s.handleListSchedules)
}

// PipelineList is GET /pipelines's answer.
type PipelineList struct {
	Body struct {
		Pipelines []pipeline.Drawn `json:"pipelines"`
	}
}

func (s *Server) handleListPipelines(context.Context, *struct{}) (*PipelineList, error) {
	set := s.opts.Engine().Pipelines()
	out := &PipelineList{}
	out.Body.Pipelines = []pipeline.Drawn{}
	for _, name := range set.Names() {
		out.Body.Pipelines = append(out.Body.Pipelines, set.Pipelines[name].Drawn())
	}
	return out, nil
}

// PipelineInput is GET /pipelines/{name}'s request.
type PipelineInput struct {
	Name string `path:"name" maxLength:"128" doc:"A pipeline's name"`
}

// PipelineShown is GET /pipelines/{name}'s answer.
type PipelineShown struct {
	Body pipeline.Shown
}

func (s *Server) handleGetPipeline(_ context.Context, in *PipelineInput) (*PipelineShown, error) {
	set := s.opts.Engine().Pipelines()
	var p *pipeline.Pipeline
	if set != nil {
		p = set.Pipelines[in.Name]
	}
	if p == nil {
		message := "no pipeline named " + in.Name + " in the config the daemon runs"
		if suggestion := config.Suggest(in.Name, set.Names()); suggestion != "" {
			message += ": did you mean " + suggestion + "?"
		}
		return nil, newError(http.StatusNotFound, "see: GET /pipelines", message)
	}
	return &PipelineShown{Body: p.Shown()}, nil
}

// ScheduleList is GET /schedules's answer.
type ScheduleList struct {
	Body struct {
		Now       time.Time            `json:"now" doc:"When the schedules were read: next and would are as of then"`
		Schedules []views.ScheduleView `json:"schedules"`
	}
}

func (s *Server) handleListSchedules(ctx context.Context, _ *struct{}) (*ScheduleList, error) {
	var schedules []schedule.Schedule
	if s.opts.Schedules != nil {
		schedules = s.opts.Schedules()
	}
	now := s.opts.Now().UTC()
	vs, err := views.ReadSchedules(ctx, s.opts.Ledger, schedules, now)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &ScheduleList{}
	out.Body.Now, out.Body.Schedules = now, vs
	return out, nil
}
