package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a server.
type Options struct {
	// OpenAPI is the API's OpenAPI document (JSON): the tools' schemas,
	// paths and scopes.
	OpenAPI []byte
	// Call sends a request to the API and returns its answer: the API's
	// handler in the daemon's process, or an HTTP client of a daemon.
	Call func(*http.Request) (*http.Response, error)
	// Authorization is the Authorization header a tool call sends. nil:
	// the header of the MCP request that carried the call (streamable
	// HTTP).
	Authorization func(*mcp.CallToolRequest) string
	// Version is the server's version, as initialize reports it.
	Version string
}

// maxAnswer bounds an answer a tool reads.
const maxAnswer = 16 << 20

// New is an MCP server with a tool per operation of tools and the
// documents of resources.
func New(o Options) (*mcp.Server, error) {
	doc, err := parseDocument(o.OpenAPI)
	if err != nil {
		return nil, err
	}
	if o.Authorization == nil {
		o.Authorization = func(req *mcp.CallToolRequest) string {
			if req.Extra == nil || req.Extra.Header == nil {
				return ""
			}
			return req.Extra.Header.Get("Authorization")
		}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "ductile", Title: "Ductile", Version: o.Version}, &mcp.ServerOptions{
		Instructions: "Ductile runs plugin commands as jobs and pipelines of them, recording everything in an event ledger. " +
			"list_plugin_commands says what can be run and with which payload; run_command runs one (mode sync waits for its result); " +
			"get_run, get_job, get_job_tree and get_job_logs follow what ran. Each tool needs the scope its description names.",
	})
	for _, t := range tools {
		op, err := doc.find(t.Operation)
		if err != nil {
			return nil, err
		}
		srv.AddTool(describe(t, op), handler(o, op))
	}
	addResources(srv)
	return srv, nil
}

// describe is the MCP tool of t.
func describe(t tool, op operation) *mcp.Tool {
	desc := op.Summary
	if op.Description != "" {
		desc += ". " + op.Description
	}
	desc += fmt.Sprintf("\n\nCalls %s %s.", op.Method, op.Path)
	if len(op.Scopes) > 0 {
		desc += " Needs scope " + strings.Join(op.Scopes, " or ") + " (or *)."
	}
	mt := &mcp.Tool{Name: t.Name, Title: op.Summary, Description: desc, InputSchema: op.Input,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly}}
	if op.Output != nil {
		mt.OutputSchema = op.Output
	}
	return mt
}

// handler calls op with a tool call's arguments.
func handler(o Options, op operation) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := map[string]json.RawMessage{}
		if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &args); err != nil {
				return failed("the arguments are not a JSON object: %v; send an object as the tool's input schema describes", err), nil
			}
		}
		httpReq, err := op.request(ctx, args)
		if err != nil {
			return failed("%v", err), nil
		}
		if a := o.Authorization(req); a != "" {
			httpReq.Header.Set("Authorization", a)
		}
		resp, err := o.Call(httpReq)
		if err != nil {
			return failed("%s %s: %v", op.Method, httpReq.URL.Path, err), nil
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			return failed("%s %s: read the answer: %v", op.Method, httpReq.URL.Path, err), nil
		}
		if resp.StatusCode >= 300 {
			return refused(op, httpReq, resp.StatusCode, body), nil
		}
		out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}
		if op.Output != nil {
			var structured map[string]any
			if json.Unmarshal(body, &structured) == nil {
				out.StructuredContent = structured
			}
		}
		return out, nil
	}
}

// request is the HTTP request of op with args.
func (op operation) request(ctx context.Context, args map[string]json.RawMessage) (*http.Request, error) {
	path, query, header := op.Path, url.Values{}, http.Header{}
	for _, p := range op.Params {
		raw, ok := args[p.Arg]
		if !ok {
			continue
		}
		v := scalar(raw)
		switch p.In {
		case "path":
			path = strings.ReplaceAll(path, "{"+p.Name+"}", url.PathEscape(v))
		case "query":
			query.Set(p.Name, v)
		case "header":
			header.Set(p.Name, v)
		}
	}
	if strings.Contains(path, "{") {
		return nil, fmt.Errorf("%s %s needs its path arguments: give each of them (see the input schema's required)", op.Method, op.Path)
	}
	var body io.Reader
	switch {
	case op.Body:
		if raw, ok := args["body"]; ok {
			body = bytes.NewReader(raw)
		}
	case len(op.BodyFields) > 0:
		fields := map[string]json.RawMessage{}
		for _, name := range op.BodyFields {
			if raw, ok := args[name]; ok {
				fields[name] = raw
			}
		}
		raw, _ := json.Marshal(fields)
		body = bytes.NewReader(raw)
	}
	u := "http://127.0.0.1" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", op.Method, op.Path, err)
	}
	req.Header = header
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

// scalar is a JSON argument as a parameter's text: a string's value, or
// the JSON of anything else.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// refused is the tool error of an API answer that is not a success: its
// status, code, message and hint, and the scope it lacks.
func refused(op operation, req *http.Request, status int, body []byte) *mcp.CallToolResult {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Detail  string `json:"detail"`
		Hint    string `json:"hint"`
		Scope   string `json:"scope"`
	}
	_ = json.Unmarshal(body, &e)
	msg := fmt.Sprintf("%s %s answered %d", op.Method, req.URL.Path, status)
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	if m := cmp.Or(e.Message, e.Detail); m != "" {
		msg += ": " + m
	}
	if e.Scope != "" {
		msg += "; the tool needs scope " + e.Scope
	}
	if e.Hint != "" {
		msg += ". " + e.Hint
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}, &mcp.TextContent{Text: string(body)}}}
}

// failed is a tool error made here, before the API was called.
func failed(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}
