package api

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/pluginhost"
)

// registerPluginCommands adds GET /plugins/commands.
func (s *Server) registerPluginCommands() {
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-plugin-commands", Method: http.MethodGet, Path: "/plugins/commands",
		Summary: "The commands of the plugins the daemon loaded, as their manifests describe them",
		Description: "Each command with its plugin, its type (read or write), its description and its input and output schemas " +
			"as the manifest gives them (absent when it gives none): what to send to POST /runs or POST /plugin/{plugin}/{command}.",
	}, auth.PluginRO), s.handleListPluginCommands)
	// It reads the engine's config only: nothing in it fails.
	delete(s.api.OpenAPI().Paths["/plugins/commands"].Get.Responses, "500")
}

// PluginCommand is one command of a loaded plugin's manifest.
type PluginCommand struct {
	Plugin            string `json:"plugin"`
	PluginDescription string `json:"plugin_description,omitempty"`
	Enabled           bool   `json:"enabled" doc:"false: the config disables the plugin; its commands are refused"`
	Command           string `json:"command"`
	Type              string `json:"type" enum:"read,write"`
	Description       string `json:"description,omitempty"`
	InputSchema       any    `json:"input_schema,omitempty" doc:"The manifest's JSON Schema of the payload"`
	OutputSchema      any    `json:"output_schema,omitempty" doc:"The manifest's JSON Schema of the result"`
}

// PluginCommands is GET /plugins/commands's answer.
type PluginCommands struct {
	Body struct {
		Commands []PluginCommand `json:"commands"`
	}
}

func (s *Server) handleListPluginCommands(_ context.Context, _ *struct{}) (*PluginCommands, error) {
	e := s.opts.Engine()
	out := &PluginCommands{}
	out.Body.Commands = []PluginCommand{}
	for _, p := range e.Applied().Plugins {
		var described map[string]PluginCommand
		var pluginDescription string
		if loaded, ok := lookup(e.Plugins(), p.Name); ok && loaded.Manifest != nil {
			pluginDescription = loaded.Manifest.Description
			described = map[string]PluginCommand{}
			for _, c := range loaded.Manifest.Commands {
				described[c.Name] = PluginCommand{Description: c.Description, InputSchema: c.InputSchema, OutputSchema: c.OutputSchema}
			}
		}
		for _, c := range p.Commands {
			d := described[c.Name]
			out.Body.Commands = append(out.Body.Commands, PluginCommand{Plugin: p.Name, PluginDescription: pluginDescription, Enabled: p.Enabled,
				Command: c.Name, Type: c.Type, Description: d.Description, InputSchema: d.InputSchema, OutputSchema: d.OutputSchema})
		}
	}
	return out, nil
}

// lookup is the plugin name of reg (none without a registry).
func lookup(reg *pluginhost.Registry, name string) (*pluginhost.Plugin, bool) {
	if reg == nil {
		return nil, false
	}
	return reg.Get(name)
}
