package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/auth"
)

// revocableGuard is guard with keys a test can revoke, as a reload that
// drops a token does.
type revocableGuard struct {
	mu      sync.Mutex
	revoked map[string]bool
}

func (g *revocableGuard) Check(authorization string, need auth.Scope) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if key, _ := strings.CutPrefix(authorization, "Bearer "); g.revoked[key] {
		return "", auth.ErrUnauthorized
	}
	return guard.Check(authorization, need)
}

func (g *revocableGuard) revoke(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.revoked[key] = true
}

// signIn signs in with key and answers the session cookie.
func signIn(t *testing.T, base, key string) *http.Cookie {
	t.Helper()
	res := uiDo(t, "POST", base+"/ui/session", nil, []byte(`{"token":"`+key+`"}`), "Content-Type", "application/json", "Origin", base)
	require.Equal(t, http.StatusOK, res.status, string(res.raw))
	var cookie *http.Cookie
	for _, c := range res.cookies {
		if c.Name == api.SessionCookie {
			cookie = c
		}
	}
	require.NotNil(t, cookie, "sign-in set no %s cookie", api.SessionCookie)
	return cookie
}

type uiResponse struct {
	status  int
	raw     []byte
	cookies []*http.Cookie
}

func uiDo(t *testing.T, method, url string, cookie *http.Cookie, body []byte, headers ...string) uiResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	require.NoError(t, err)
	if cookie != nil {
		req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return uiResponse{status: res.StatusCode, raw: raw, cookies: res.Cookies()}
}

// TestSessionCookieFlags: sign-in sets a random, HttpOnly, SameSite=Strict
// cookie (Secure only under TLS: this listener is plain HTTP), answers
// the token's name, and a bad token gets no cookie.
func TestSessionCookieFlags(t *testing.T) {
	f := start(t, nil)
	a, b := signIn(t, f.base, "admin"), signIn(t, f.base, "admin")
	for _, c := range []*http.Cookie{a, b} {
		require.True(t, c.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, c.SameSite)
		require.False(t, c.Secure)
		require.Equal(t, "/", c.Path)
		require.Len(t, c.Value, 43) // 32 random bytes, base64url
		require.NotContains(t, c.Value, "admin")
	}
	require.NotEqual(t, a.Value, b.Value)
	who := uiDo(t, "GET", f.base+"/ui/session", a, nil)
	require.Equal(t, http.StatusOK, who.status)
	var body map[string]any
	require.NoError(t, json.Unmarshal(who.raw, &body))
	require.Equal(t, "admin", body["token"])

	bad := uiDo(t, "POST", f.base+"/ui/session", nil, []byte(`{"token":"nope"}`), "Content-Type", "application/json")
	require.Equal(t, http.StatusUnauthorized, bad.status)
	require.Empty(t, bad.cookies)
	other := uiDo(t, "POST", f.base+"/ui/session", nil, []byte(`{"token":"admin"}`), "Content-Type", "application/json", "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, other.status, "a sign-in from another site's page")
	require.Empty(t, other.cookies)
}

// TestSessionHasTheTokensScopes: a cookie grants exactly what its token
// grants, route for route, reads and writes (with the page's Origin).
func TestSessionHasTheTokensScopes(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{}`)
	for _, key := range []string{"jobs-ro", "jobs-rw", "plugin-rw", "events-ro", "admin"} {
		cookie := signIn(t, f.base, key)
		for _, tc := range []struct{ method, path string }{
			{"GET", "/jobs"}, {"GET", "/job/" + id}, {"GET", "/events"}, {"GET", "/plugins"},
			{"POST", "/job/" + id + "/retry"}, {"POST", "/plugin/echo/poll"},
		} {
			byToken := f.do(tc.method, tc.path, key, nil)
			byCookie := uiDo(t, tc.method, f.base+tc.path, cookie, nil, "Origin", f.base)
			require.Equal(t, byToken.status, byCookie.status, "%s %s with %s: token answered %s, cookie %s", tc.method, tc.path, key, byToken.raw, byCookie.raw)
		}
	}
	none := uiDo(t, "GET", f.base+"/jobs", nil, nil)
	require.Equal(t, http.StatusUnauthorized, none.status)
}

// TestSessionWriteNeedsOrigin: a write by cookie without the page's own
// Origin is refused before it reaches the route, so a cross-site form
// cannot cancel a job; the same write with the Origin gets through.
func TestSessionWriteNeedsOrigin(t *testing.T) {
	f := start(t, nil)
	id := f.enqueue(`{}`)
	cookie := signIn(t, f.base, "admin")
	for _, origin := range []string{"", "https://evil.example", "null", "https://" + strings.TrimPrefix(f.base, "http://")} {
		var headers []string
		if origin != "" {
			headers = []string{"Origin", origin}
		}
		r := uiDo(t, "POST", f.base+"/job/"+id+"/cancel", cookie, nil, headers...)
		require.Equal(t, http.StatusForbidden, r.status, "Origin %q: %s", origin, r.raw)
		require.Contains(t, string(r.raw), "must come from this daemon's origin")
	}
	job := f.do("GET", "/job/"+id, "admin", nil)
	require.Equal(t, "queued", job.body["status"], "a refused cancel changed nothing")
	r := uiDo(t, "POST", f.base+"/job/"+id+"/cancel", cookie, nil, "Origin", f.base)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	out := uiDo(t, "DELETE", f.base+"/ui/session", cookie, nil, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, out.status, "a cross-site sign-out")
}

// TestSignOutAndRevocation: sign-out ends the session (the cookie is
// refused afterwards); a token revoked while signed in ends its sessions.
func TestSignOutAndRevocation(t *testing.T) {
	g := &revocableGuard{revoked: map[string]bool{}}
	f := start(t, func(o *api.Options) { o.Guard = g })
	cookie := signIn(t, f.base, "jobs-ro")
	require.Equal(t, http.StatusOK, uiDo(t, "GET", f.base+"/jobs", cookie, nil).status)
	out := uiDo(t, "DELETE", f.base+"/ui/session", cookie, nil, "Origin", f.base)
	require.Equal(t, http.StatusNoContent, out.status, string(out.raw))
	require.Len(t, out.cookies, 1)
	require.Less(t, out.cookies[0].MaxAge, 0, "sign-out clears the cookie")
	require.Equal(t, http.StatusUnauthorized, uiDo(t, "GET", f.base+"/jobs", cookie, nil).status)
	require.Equal(t, http.StatusUnauthorized, uiDo(t, "GET", f.base+"/ui/session", cookie, nil).status)

	cookie = signIn(t, f.base, "admin")
	require.Equal(t, http.StatusOK, uiDo(t, "GET", f.base+"/jobs", cookie, nil).status)
	g.revoke("admin")
	require.Equal(t, http.StatusUnauthorized, uiDo(t, "GET", f.base+"/jobs", cookie, nil).status)
	require.Equal(t, http.StatusUnauthorized, uiDo(t, "GET", f.base+"/events", cookie, nil).status)
	require.Equal(t, http.StatusUnauthorized, uiDo(t, "GET", f.base+"/ui/session", cookie, nil).status)
}

// TestPageServed: /ui/ is the embedded page with a policy that loads
// nothing from elsewhere; a routed address is the page too.
func TestPageServed(t *testing.T) {
	f := start(t, nil)
	for _, path := range []string{"/ui/", "/ui/job/abc", "/ui/app.js"} {
		r := uiDo(t, "GET", f.base+path, nil, nil)
		require.Equal(t, http.StatusOK, r.status, path)
	}
	res, err := http.Get(f.base + "/ui/")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "default-src 'self'")
	require.Contains(t, res.Header.Get("Content-Type"), "text/html")
}

// TestSessionCookieSecureUnderTLS: served with TLS, the cookie is Secure,
// and a write's Origin must be the https origin.
func TestSessionCookieSecureUnderTLS(t *testing.T) {
	f := start(t, nil)
	srv := httptest.NewUnstartedServer(f.server.Handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := srv.Client()
	post := func(path, origin string, body []byte, cookie *http.Cookie) *http.Response {
		req, err := http.NewRequest("POST", srv.URL+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", origin)
		if cookie != nil {
			req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
		}
		res, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		require.NoError(t, res.Body.Close())
		return res
	}
	res := post("/ui/session", srv.URL, []byte(`{"token":"admin"}`), nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	cookies := res.Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].Secure)
	require.True(t, cookies[0].HttpOnly)
	plain := "http://" + strings.TrimPrefix(srv.URL, "https://")
	require.Equal(t, http.StatusForbidden, post("/plugin/echo/poll", plain, nil, cookies[0]).StatusCode, "an http Origin on an https daemon")
	require.Equal(t, http.StatusAccepted, post("/plugin/echo/poll", srv.URL, nil, cookies[0]).StatusCode)
}
