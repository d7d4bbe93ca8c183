package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// mcpDaemon is a daemon serving the bundled echo plugin, with a token of
// every scope (admin) and one of jobs:ro only (reader).
type mcpDaemon struct {
	base, admin, reader string
	env                 []string
}

func startMCPDaemon(t *testing.T) mcpDaemon {
	t.Helper()
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", "..", "plugins"))
	require.NoError(t, err)
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("api: {listen: 127.0.0.1:0}\nplugin_roots: [\""+root+"\"]\n"), 0o600))
	args := func(a ...string) []string {
		return append([]string{"--config", cfg, "--state-dir", filepath.Join(dir, "state")}, a...)
	}
	env := cleanEnv(t)
	d := mcpDaemon{env: env}
	d.admin = lastLine(mustRun(t, env, args("config", "token", "create", "admin", "--scopes", "*")...).stdout)
	d.reader = lastLine(mustRun(t, env, args("config", "token", "create", "reader", "--scopes", "jobs:ro")...).stdout)
	p := start(t, env, args("system", "start")...)
	line, _ := p.waitLine(t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	d.base = "http://" + listening.Addr
	p.waitLine(t, 0, messageIs("ductile started"))
	return d
}

// bearer adds a token's Authorization header to every request.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// connectHTTP is an MCP client session with the daemon's /mcp under key.
func (d mcpDaemon) connectHTTP(t *testing.T, key string) (*mcp.ClientSession, error) {
	t.Helper()
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: bearer{key: key, next: transport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.base + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// connectStdio is an MCP client session with `ductile mcp` run as a
// subprocess, calling the daemon with key.
func (d mcpDaemon) connectStdio(t *testing.T, key string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(ductileBin, "mcp", "--api", d.base)
	cmd.Env = append(append([]string{}, d.env...), "DUCTILE_TOKEN="+key)
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// call calls a tool and decodes its structured answer into out (if not
// nil); it fails the test on a tool error.
func call(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res := callRaw(t, s, name, args)
	require.False(t, res.IsError, "%s: %s", name, toolText(res))
	if out != nil {
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, out), "%s answered %s", name, raw)
	}
}

func callRaw(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, name)
	return res
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, text.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// TestMCPOverStdioAndHTTP: the SDK's own client, over stdio (`ductile mcp`
// as a subprocess) and over streamable HTTP (the daemon's /mcp), lists the
// tools with their schemas, lists the plugins' commands with their
// manifests' descriptions, runs echo poll in mode sync and gets its
// result, gets the job, runs echo health in mode async and waits for it, reads the ledger and verifies it, and reads the
// event catalogue; over HTTP a jobs:ro token may read a job but is refused
// a run, the refusal naming the scope it lacks, and no token is refused
// at /mcp.
func TestMCPOverStdioAndHTTP(t *testing.T) {
	t.Parallel()
	d := startMCPDaemon(t)
	overHTTP, err := d.connectHTTP(t, d.admin)
	require.NoError(t, err)
	sessions := map[string]*mcp.ClientSession{"stdio": d.connectStdio(t, d.admin), "http": overHTTP}
	var jobID string
	for _, name := range []string{"stdio", "http"} {
		s := sessions[name]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
			defer cancel()
			listed, err := s.ListTools(ctx, nil)
			require.NoError(t, err)
			byName := map[string]*mcp.Tool{}
			for _, tool := range listed.Tools {
				byName[tool.Name] = tool
			}
			for _, want := range []string{"run_command", "run_pipeline", "get_run", "get_job", "get_job_tree", "get_job_logs",
				"cancel_job", "retry_run", "read_ledger", "verify_ledger", "list_plugin_commands"} {
				require.Contains(t, byName, want)
			}
			run := byName["run_command"]
			require.Contains(t, run.Description, "plugin:ro")
			schema, err := json.Marshal(run.InputSchema)
			require.NoError(t, err)
			for _, field := range []string{`"plugin_id"`, `"entry_id"`, `"mode"`, `"sync"`} {
				require.Contains(t, string(schema), field, "run_command's input schema comes from POST /runs's body")
			}
			require.NotNil(t, byName["get_job"].OutputSchema)

			var commands struct {
				Commands []struct {
					Plugin, Command, Description, Type string
				} `json:"commands"`
			}
			call(t, s, "list_plugin_commands", nil, &commands)
			found := false
			for _, c := range commands.Commands {
				if c.Plugin == "echo" && c.Command == "poll" {
					found = true
					require.Equal(t, "Emit echo.poll and record last_command/runs", c.Description)
				}
			}
			require.True(t, found, "echo poll is listed: %+v", commands)

			var created struct {
				RunID  string `json:"run_id"`
				Status string `json:"status"`
				Run    *struct {
					RunID  string `json:"run_id"`
					Status string `json:"status"`
				} `json:"run"`
			}
			call(t, s, "run_command", map[string]any{"plugin_id": "echo", "entry_id": "poll", "mode": "sync", "args": map[string]any{"n": 1}}, &created)
			require.Equal(t, "succeeded", created.Status)
			require.NotNil(t, created.Run, "mode sync answers the run")
			require.Equal(t, created.RunID, created.Run.RunID)
			require.Equal(t, "succeeded", created.Run.Status)
			jobID = created.RunID

			var job struct {
				JobID, Status, Plugin, Command string
				Result                         json.RawMessage
			}
			call(t, s, "get_job", map[string]any{"id": jobID}, &job)
			require.Equal(t, "succeeded", job.Status)
			require.Equal(t, "poll", job.Command)
			require.Contains(t, string(job.Result), "echo poll", "the job's result is the plugin's answer")

			// async: the run id at once; wait_run waits for its end.
			var async struct {
				RunID  string          `json:"run_id"`
				Status string          `json:"status"`
				Run    json.RawMessage `json:"run"`
			}
			call(t, s, "run_command", map[string]any{"plugin_id": "echo", "entry_id": "health", "mode": "async"}, &async)
			require.Equal(t, "queued", async.Status)
			require.Nil(t, async.Run, "async answers at once, without the run")
			var waited struct {
				RunID  string `json:"run_id"`
				Status string `json:"status"`
			}
			res := callRaw(t, s, "wait_run", map[string]any{"id": async.RunID, "timeout_ms": 30000})
			require.False(t, res.IsError, toolText(res))
			require.NoError(t, json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &waited))
			require.Equal(t, async.RunID, waited.RunID)
			require.Equal(t, "succeeded", waited.Status)

			var page struct {
				Events []struct {
					Seq    int64  `json:"seq"`
					Stream string `json:"stream"`
					Type   string `json:"type"`
				} `json:"events"`
				Next int64 `json:"next"`
			}
			call(t, s, "read_ledger", map[string]any{"stream_prefix": "job/" + jobID, "limit": 100}, &page)
			require.NotEmpty(t, page.Events)
			types := []string{}
			for _, ev := range page.Events {
				require.Equal(t, "job/"+jobID, ev.Stream)
				types = append(types, ev.Type)
			}
			require.Contains(t, types, "job.enqueued")
			require.Contains(t, types, "job.succeeded")

			// The topic exchange: publish, read the conversation back, check it.
			var published struct {
				ID             string `json:"id"`
				ConversationID string `json:"conversation_id"`
			}
			call(t, s, "publish_message", map[string]any{"topic": "mcp.request", "body": "hello from an agent", "producer": "agent"}, &published)
			require.NotEmpty(t, published.ID)
			require.Equal(t, published.ID, published.ConversationID, "a new conversation is named by its first message")
			var thread struct {
				Messages []struct {
					ID, Body, Producer string
				} `json:"messages"`
			}
			call(t, s, "read_messages", map[string]any{"conversation": published.ID}, &thread)
			require.Len(t, thread.Messages, 1)
			require.Equal(t, "hello from an agent", thread.Messages[0].Body)
			var checked struct {
				State string `json:"state"`
			}
			call(t, s, "check_conversation", map[string]any{"id": published.ID, "success_topic": "mcp.done", "failure_topic": "mcp.failed"}, &checked)
			require.Equal(t, "pending", checked.State)

			var verified struct {
				OK bool `json:"ok"`
			}
			call(t, s, "verify_ledger", nil, &verified)
			require.True(t, verified.OK)

			doc, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "ductile://docs/events.md"})
			require.NoError(t, err)
			require.Contains(t, doc.Contents[0].Text, "job.enqueued")
		})
	}

	t.Run("scope refused", func(t *testing.T) {
		require.NotEmpty(t, jobID, "a transport's run made a job")
		s, err := d.connectHTTP(t, d.reader)
		require.NoError(t, err)
		var job struct{ Status string }
		call(t, s, "get_job", map[string]any{"id": jobID}, &job)
		require.Equal(t, "succeeded", job.Status, "jobs:ro reads a job")
		res := callRaw(t, s, "run_command", map[string]any{"plugin_id": "echo", "entry_id": "poll", "mode": "sync"})
		require.True(t, res.IsError)
		require.Contains(t, toolText(res), "needs scope plugin:ro")
		require.Contains(t, toolText(res), "403")
		res = callRaw(t, s, "cancel_job", map[string]any{"id": jobID})
		require.True(t, res.IsError)
		require.Contains(t, toolText(res), "needs scope jobs:rw")

		_, err = d.connectHTTP(t, "not-a-key")
		require.Error(t, err, "an unknown key is refused at /mcp")
	})
}
