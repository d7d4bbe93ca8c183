package webui_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/webui"
)

// TestNothingFromElsewhere: no asset names another site (a script, a style,
// a font or a connection), and every module it imports is embedded. The SVG
// namespace is a name, never fetched.
func TestNothingFromElsewhere(t *testing.T) {
	files := webui.Assets()
	remote := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	imports := regexp.MustCompile(`(?:from |import\()"\./([a-z]+\.js)"`)
	n := 0
	require.NoError(t, fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		raw, err := fs.ReadFile(files, path)
		require.NoError(t, err)
		text := strings.ReplaceAll(string(raw), `"http://www.w3.org/2000/svg"`, `""`)
		require.Empty(t, remote.FindAllString(text, -1), "%s names another site", path)
		for _, m := range imports.FindAllStringSubmatch(string(raw), -1) {
			_, err := fs.Stat(files, m[1])
			require.NoError(t, err, "%s imports %s, which is not embedded", path, m[1])
		}
		return nil
	}))
	require.GreaterOrEqual(t, n, 8)
}

// TestHandler: the page at /ui/ and at any routed address, each file with
// its type, all with the policy that keeps the page to its own origin.
func TestHandler(t *testing.T) {
	h := webui.Handler()
	for path, want := range map[string]string{
		"/ui/": "text/html", "/ui/job/0194/tree": "text/html", "/ui/app.js": "javascript", "/ui/style.css": "text/css",
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		res := w.Result()
		body, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, path)
		require.Contains(t, res.Header.Get("Content-Type"), want, path)
		require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
		require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
		if want == "text/html" {
			require.True(t, strings.Contains(string(body), `<script type="module" src="/ui/app.js">`), path)
		}
	}
}
