package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// doChunked POSTs body without a Content-Length (chunked), as a client
// streaming it does.
func (f *fixture) doChunked(path, key, body string) response {
	f.t.Helper()
	req, err := http.NewRequest("POST", f.base+path, io.MultiReader(strings.NewReader(body)))
	require.NoError(f.t, err)
	require.Equal(f.t, int64(0), req.ContentLength, "the length is not known: the body goes chunked")
	req.Header.Set("Authorization", "Bearer "+key)
	return f.send(req)
}

// TestPayloadRule: POST /plugin and POST /pipeline take the CLI's payload
// rule (commands.CheckPayload): a JSON object, valid UTF-8; no body is no
// payload. A list, a scalar, whitespace or bytes that are not UTF-8 are
// refused with 400 and nothing is queued.
func TestPayloadRule(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil)
	for _, path := range []string{"/plugin/echo/handle", "/pipeline/async"} {
		for _, tc := range []struct{ body, message string }{
			{`[1,2]`, "the body must be a JSON object"},
			{`"x"`, "the body must be a JSON object"},
			{`null`, "the body must be a JSON object"},
			{` `, "the body is empty"},
			{"{\"city\":\"Z\xfcrich\"}", "the body is not valid UTF-8"},
			{`{"a":`, "the body is not valid JSON: unexpected end of JSON input at line 1, column 5"},
		} {
			res := f.do("POST", path, "plugin-rw", []byte(tc.body))
			requireError(t, res, http.StatusBadRequest, "invalid_input")
			require.Contains(t, res.body["message"], tc.message, "%s %q", path, tc.body)
			require.NotEmpty(t, res.body["hint"])
		}
	}
	require.Zero(t, f.l.Head(), "nothing was appended")
	require.Zero(t, r.calls.Load())

	res := f.do("POST", "/plugin/echo/handle", "plugin-rw", []byte(` {"city":"Zürich"} `))
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	res = f.do("POST", "/plugin/echo/poll", "plugin-rw", nil)
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
}

// TestChunkedBodyOverTheCap: a body past api.max_body_size sent without a
// Content-Length is 413 too_large, as one that declares its length is.
func TestChunkedBodyOverTheCap(t *testing.T) {
	r := newRuns()
	f := startPipelines(t, r, nil) // api.max_body_size: 1024
	big := `{"x":"` + strings.Repeat("a", 2000) + `"}`
	for _, path := range []string{"/plugin/echo/handle", "/pipeline/async", "/pipeline/sync"} {
		requireError(t, f.doChunked(path, "plugin-rw", big), http.StatusRequestEntityTooLarge, "too_large")
	}
	exact := `{"x":"` + strings.Repeat("a", 1024-8) + `"}`
	require.Len(t, exact, 1024)
	res := f.doChunked("/plugin/echo/handle", "plugin-rw", exact)
	require.Equal(t, http.StatusAccepted, res.status, string(res.raw))
	require.Zero(t, r.calls.Load())
}
