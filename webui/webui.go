// Package webui is the daemon's web page (served at /ui/): plain HTML, CSS
// and JavaScript modules embedded in the binary, with no build step and
// nothing fetched from elsewhere. The page signs in with a bearer token
// exchanged for a session cookie (api/session.go) and then calls the same
// API and event streams as any client (docs/ui.md).
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the page is served under.
const Prefix = "/ui/"

// Assets are the page's files, rooted at the page (index.html, app.js, …).
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("webui: the embedded assets have no assets directory: " + err.Error())
	}
	return sub
}

// contentSecurityPolicy lets the page load and call only its own origin:
// no inline script, no other site's script, style, image or connection.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Handler serves the page's files under Prefix; any path that names no
// file is the page itself (index.html), so a reload on a routed address
// such as /ui/job/ID shows the page, which routes from its address.
func Handler() http.Handler {
	files := Assets()
	server := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" || !fileExists(files, name) {
			r = r.Clone(r.Context())
			r.URL.Path = "/"
		} else {
			r = r.Clone(r.Context())
			r.URL.Path = "/" + name
		}
		server.ServeHTTP(w, r)
	})
}

func fileExists(files fs.FS, name string) bool {
	st, err := fs.Stat(files, name)
	return err == nil && !st.IsDir()
}
