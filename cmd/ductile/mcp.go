package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/mcpserver"
)

// mcpCommand is `ductile mcp`: the MCP server over stdio, each tool a call
// to a daemon's API (docs/mcp.md).
func mcpCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve the MCP tools (Model Context Protocol) on stdin/stdout, calling a running daemon's API",
		Description: "For agents (Claude Desktop and other MCP clients): each tool is an operation of the daemon's HTTP API,\n" +
			"called with --token's key, so the token's scopes decide what the agent may do. The daemon serves the\n" +
			"same tools at /mcp (streamable HTTP). Give the key with $DUCTILE_TOKEN or --token-file rather than --token\n" +
			"(other users see a process's arguments). See docs/mcp.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "api", EnvVars: []string{"DUCTILE_API"}, Value: "http://127.0.0.1:8080", Usage: "the daemon's API `URL`"},
			&cli.StringFlag{Name: "token", EnvVars: []string{"DUCTILE_TOKEN"}, Usage: "a bearer `KEY` of the daemon's tokens"},
			&cli.StringFlag{Name: "token-file", Usage: "read the key from `FILE` (its first line)"},
			&cli.StringFlag{Name: "ca", Usage: "trust the CA certificates of `FILE` (PEM) for the daemon's TLS certificate"},
		},
		Action: mcpServe,
	}
}

func mcpServe(c *cli.Context) error {
	base, err := url.Parse(c.String("api"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return usagef("--api %q is not an http:// or https:// URL with a host, such as http://127.0.0.1:8080", c.String("api"))
	}
	key, err := mcpToken(c)
	if err != nil {
		return err
	}
	hc, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: c.String("ca")})
	if err != nil {
		return withHint(errcode.InvalidInput, err, "--ca takes a PEM file of CA certificates (ca.crt, never a key)")
	}
	doc, err := json.Marshal(api.New(api.Options{}).OpenAPI())
	if err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Options{OpenAPI: doc, Version: workerVersion(),
		Authorization: func(*mcp.CallToolRequest) string { return "Bearer " + key },
		Call: func(r *http.Request) (*http.Response, error) {
			r.URL.Scheme, r.URL.Host, r.Host = base.Scheme, base.Host, ""
			r.URL.Path = strings.TrimSuffix(base.Path, "/") + r.URL.Path
			return hc.Do(r)
		}})
	if err != nil {
		return err
	}
	return srv.Run(c.Context, &mcp.StdioTransport{})
}

// mcpToken is the key: --token (or $DUCTILE_TOKEN), else the first line
// of --token-file.
func mcpToken(c *cli.Context) (string, error) {
	key := c.String("token")
	if f := c.String("token-file"); f != "" {
		if key != "" {
			return "", usagef("give the key once: --token (or $DUCTILE_TOKEN) or --token-file, not both")
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", usagef("--token-file: %v", err)
		}
		key, _, _ = strings.Cut(string(data), "\n")
	}
	if key = strings.TrimSpace(key); key == "" {
		return "", usagef("give a token's key with $DUCTILE_TOKEN, --token-file FILE or --token KEY; make one with: ductile config token create NAME --scopes plugin:rw,jobs:rw,events:ro")
	}
	return key, nil
}
