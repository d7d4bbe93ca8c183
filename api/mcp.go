package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/mcpserver"
)

// mountMCP serves the MCP server (mcpserver) at /mcp over streamable HTTP,
// stateless, answering JSON: every tool call is a request to its
// operation in this process, under the MCP request's bearer token, so the
// operation checks the scope it needs. /mcp itself takes any valid token.
func (s *Server) mountMCP() {
	doc, err := json.Marshal(s.api.OpenAPI())
	if err != nil {
		panic("api: the OpenAPI document does not marshal: " + err.Error())
	}
	srv, err := mcpserver.New(mcpserver.Options{OpenAPI: doc, Call: s.callInProcess, Version: "1"})
	if err != nil {
		panic("api: " + err.Error()) // an operation of mcpserver's tools is missing: a bug caught by any test
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.opts.Logger})
	s.echo.Any("/mcp", func(c echo.Context) error {
		if err := s.authenticate(c.Request().Header.Get("Authorization")); err != nil {
			return err
		}
		// A tool that waits (mode sync) may take api.max_sync_timeout.
		set := s.opts.Settings
		_ = http.NewResponseController(c.Response().Writer).SetWriteDeadline(time.Now().Add(set.MaxSyncTimeout + set.WriteTimeout))
		h.ServeHTTP(c.Response().Writer, c.Request())
		return nil
	})
}

// authenticate checks that authorization carries a valid token, whatever
// its scopes.
func (s *Server) authenticate(authorization string) error {
	_, err := s.check(authorization, auth.All)
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden {
		return nil // a valid token; each tool checks its own scope
	}
	return err
}

// callInProcess answers r with the API's handler in this process.
func (s *Server) callInProcess(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	s.echo.ServeHTTP(w, r)
	return w.Result(), nil
}
