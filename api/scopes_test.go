package api_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
)

// TestForbiddenNamesTheScope: a 403 names the scope the route needs, in
// its message and in scope, and the token that lacks it.
func TestForbiddenNamesTheScope(t *testing.T) {
	f := start(t, nil)
	for _, tc := range []struct{ method, path, token, scope string }{
		{"GET", "/jobs", "events-ro", "jobs:ro"},
		{"POST", "/plugin/echo/handle", "plugin-ro", "plugin:rw"}, // a write command
		{"POST", "/plugin/echo/poll", "jobs-rw", "plugin:ro"},
		{"POST", "/job/x/cancel", "jobs-ro", "jobs:rw"},
		{"GET", "/events", "jobs-ro", "events:ro"},
		{"GET", "/metrics", "events-ro", "jobs:ro"},
	} {
		r := f.do(tc.method, tc.path, tc.token, nil)
		requireError(t, r, http.StatusForbidden, "forbidden")
		require.Equal(t, tc.scope, r.body["scope"], "%s %s", tc.method, tc.path)
		require.Contains(t, r.body["message"], `token "`+tc.token+`" does not grant `+tc.scope+`, which this route needs`)
		require.Contains(t, r.body["hint"], "--scopes "+tc.scope)
	}
}

// TestScopesDocumented: docs/api.md's table of scopes is the code's
// (api.RouteScopes), row for row.
func TestScopesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "api.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "<!-- scopes: api.RouteScopes; a test keeps this table equal to the code -->\n")
	require.True(t, ok, "docs/api.md has no table of scopes")
	table, _, ok = strings.Cut(table, "<!-- end of scopes -->")
	require.True(t, ok)
	var rows []string
	for line := range strings.Lines(table) {
		if strings.HasPrefix(line, "| `") {
			rows = append(rows, strings.Join(strings.Fields(line), " "))
		}
	}
	var want []string
	for _, r := range api.RouteScopes() {
		scope := "`" + string(r.Scope) + "`"
		if r.Scope == "" {
			scope = "none"
		}
		want = append(want, strings.Join(strings.Fields(fmt.Sprintf("| `%s %s` | %s | %s |", r.Method, r.Path, scope, r.When)), " "))
	}
	require.Equal(t, want, rows, "update the table in docs/api.md")
}
