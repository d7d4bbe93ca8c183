package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/views"
)

// registerPlugins adds GET /plugin/{plugin} and GET /plugin/{plugin}/logs
// (spec §11.6 status and logs).
func (s *Server) registerPlugins() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-plugin", Method: http.MethodGet, Path: "/plugin/{plugin}",
		Summary: "A plugin: as the daemon loaded it, its health, its state (plugin_state), its job totals and its newest jobs",
		Description: "plugin is null for a plugin the daemon does not load whose jobs the ledger holds. " +
			"Its newest jobs (jobs > 0, the default) need jobs:ro besides plugin:ro; jobs=0 leaves them out.",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.PluginRO), s.handleGetPlugin)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "get-plugin-logs", Method: http.MethodGet, Path: "/plugin/{plugin}/logs",
		Summary: "The last log lines of a plugin's jobs: stderr and the logs of their responses",
		Description: "Oldest first, each with its job and the seq of the event that carried it, from the plugin's newest jobs " +
			"(at most 100). With after (the seq of the last line seen), the first lines recorded after it instead: " +
			"poll with the last line's seq to follow them.",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.JobsRO), s.handleGetPluginLogs)
}

// PluginInput is GET /plugin/{plugin}'s request.
type PluginInput struct {
	Plugin string `path:"plugin" maxLength:"128" doc:"The plugin's name"`
	Jobs   int    `query:"jobs" minimum:"0" maximum:"1000" default:"10" doc:"How many of its newest jobs to show"`
}

// PluginShown is GET /plugin/{plugin}'s answer.
type PluginShown struct {
	Body views.PluginView
}

func (s *Server) handleGetPlugin(ctx context.Context, in *PluginInput) (*PluginShown, error) {
	if in.Jobs > 0 {
		if err := s.require(ctx, auth.JobsRO); err != nil {
			return nil, errorOf(err)
		}
	}
	applied := s.opts.Engine().Applied()
	v, err := views.ShowPlugin(ctx, s.opts.Ledger, applied, in.Plugin, in.Jobs)
	if err != nil {
		return nil, errorOf(err)
	}
	return &PluginShown{Body: v}, nil
}

// PluginLogsInput is GET /plugin/{plugin}/logs's request.
type PluginLogsInput struct {
	Plugin string `path:"plugin" maxLength:"128" doc:"The plugin's name"`
	Lines  int    `query:"lines" minimum:"1" maximum:"1000" default:"50" doc:"How many lines at most"`
	After  int64  `query:"after" minimum:"0" doc:"Only lines recorded after this seq (the seq of the last line seen), the first of them"`
}

// PluginLogs are log lines of a plugin's jobs.
type PluginLogs struct {
	Body struct {
		Lines []views.PluginLogLine `json:"lines"`
	}
}

func (s *Server) handleGetPluginLogs(ctx context.Context, in *PluginLogsInput) (*PluginLogs, error) {
	applied := s.opts.Engine().Applied()
	if _, err := views.ShowPlugin(ctx, s.opts.Ledger, applied, in.Plugin, 0); err != nil {
		return nil, errorOf(err)
	}
	lines, err := views.PluginLogs(ctx, s.opts.Ledger, in.Plugin, in.Lines, in.After)
	if err != nil {
		return nil, errorOf(err)
	}
	out := &PluginLogs{}
	out.Body.Lines = lines
	return out, nil
}
