package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
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
