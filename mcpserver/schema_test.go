package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/mcpserver"
)

var defRef = regexp.MustCompile(`"#/\$defs/([^"]+)"`)

// TestToolSchemasAreTheAPIs: the tools a client lists have input schemas
// that are objects, self-contained (every $ref points into the schema's
// own $defs, which hold it, never into the OpenAPI document's
// components); run_command's arguments are POST /runs's body fields (mode
// sync or async), run_pipeline's payload is one argument beside the
// pipeline's name, get_job's output is GET /job/{id}'s body, and each
// description names the route and its scope.
func TestToolSchemasAreTheAPIs(t *testing.T) {
	raw, err := json.Marshal(api.New(api.Options{}).OpenAPI())
	require.NoError(t, err)
	srv, err := mcpserver.New(mcpserver.Options{OpenAPI: raw, Call: func(*http.Request) (*http.Response, error) {
		return nil, http.ErrServerClosed
	}})
	require.NoError(t, err)
	ctx := context.Background()
	serverSide, clientSide := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, serverSide, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, clientSide, nil)
	require.NoError(t, err)
	defer cs.Close()

	listed, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	schemas := map[string]map[string]any{}
	for _, tool := range listed.Tools {
		for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
			text, err := json.Marshal(schema)
			require.NoError(t, err)
			require.NotContains(t, string(text), "#/components/", "%s refers outside itself", tool.Name)
			var m map[string]any
			require.NoError(t, json.Unmarshal(text, &m))
			defs, _ := m["$defs"].(map[string]any)
			for _, ref := range defRef.FindAllStringSubmatch(string(text), -1) {
				require.Contains(t, defs, ref[1], "%s: $ref %s has no $defs entry", tool.Name, ref[1])
			}
		}
		in, _ := json.Marshal(tool.InputSchema)
		var m map[string]any
		require.NoError(t, json.Unmarshal(in, &m))
		require.Equal(t, "object", m["type"], tool.Name)
		schemas[tool.Name] = m
	}
	props := func(tool string) map[string]any { return schemas[tool]["properties"].(map[string]any) }
	require.Subset(t, keys(props("run_command")), []string{"plugin_id", "entry_id", "args", "mode", "idempotency_key", "task_id"})
	require.Equal(t, []any{"async", "sync"}, props("run_command")["mode"].(map[string]any)["enum"])
	require.Subset(t, schemas["run_command"]["required"], []any{"plugin_id", "entry_id"})
	require.Subset(t, keys(props("run_pipeline")), []string{"name", "body", "idempotency_key"})
	require.Subset(t, keys(props("read_ledger")), []string{"after", "type", "stream_prefix", "limit"})

	byName := map[string]*mcp.Tool{}
	for _, tool := range listed.Tools {
		byName[tool.Name] = tool
	}
	out, _ := json.Marshal(byName["get_job"].OutputSchema)
	require.Contains(t, string(out), `"max_attempts"`, "get_job answers GET /job/{id}'s body")
	require.Contains(t, byName["cancel_job"].Description, "POST /job/{id}/cancel")
	require.Contains(t, byName["cancel_job"].Description, "Needs scope jobs:rw")
	require.True(t, byName["get_job"].Annotations.ReadOnlyHint)

	// The pipelines and schedules the web page draws, for agents too.
	require.Subset(t, keys(props("get_pipeline")), []string{"name"})
	out, _ = json.Marshal(byName["get_pipeline"].OutputSchema)
	for _, field := range []string{`"graph"`, `"vertices"`, `"edges"`, `"nodes"`, `"trigger"`} {
		require.Contains(t, string(out), field, "get_pipeline answers GET /pipelines/{name}'s body")
	}
	out, _ = json.Marshal(byName["list_schedules"].OutputSchema)
	for _, field := range []string{`"now"`, `"last_fired"`, `"next"`, `"breaker"`, `"would"`} {
		require.Contains(t, string(out), field, "list_schedules answers GET /schedules's body")
	}
	for _, name := range []string{"list_pipelines", "get_pipeline", "list_schedules"} {
		require.True(t, byName[name].Annotations.ReadOnlyHint, name)
	}
	require.Contains(t, byName["list_schedules"].Description, "Needs scope jobs:ro")
	require.Contains(t, byName["list_pipelines"].Description, "Needs scope plugin:ro")

	// A call the API cannot be reached for is a tool error that says so.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"id": "x"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "GET /job/x")

	docs, err := cs.ListResources(ctx, nil)
	require.NoError(t, err)
	require.Len(t, docs.Resources, 2)
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
