package api

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/webui"
)

// SessionCookie is the name of the web page's session cookie (docs/ui.md).
const SessionCookie = "ductile_session"

// sessionTTL is how long a session lasts from sign-in; it is not extended
// by use, so a stolen cookie is worth at most this long.
const sessionTTL = 12 * time.Hour

// maxSessions bounds the sessions held at once: past it, signing in drops
// the sessions that expired, then the oldest.
const maxSessions = 1024

// session is a signed-in browser: the Authorization header of the token it
// signed in with, which each of its requests is checked with again (so a
// revoked token ends it), and when it ends.
type session struct {
	authorization string
	token         string // the token's name
	expires       time.Time
}

// sessions are the signed-in browsers, by cookie value. They live in the
// daemon's memory only: a restart signs every browser out.
type sessions struct {
	mu sync.Mutex
	m  map[string]session
}

// add records a session for authorization and answers its id: 32 random
// bytes, base64url.
func (ss *sessions) add(authorization, token string, now time.Time) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]session{}
	}
	if len(ss.m) >= maxSessions {
		ss.prune(now)
	}
	ss.m[id] = session{authorization: authorization, token: token, expires: now.Add(sessionTTL)}
	return id, nil
}

// prune drops the expired sessions, then the oldest while there are
// maxSessions or more. The caller holds mu.
func (ss *sessions) prune(now time.Time) {
	for id, s := range ss.m {
		if !now.Before(s.expires) {
			delete(ss.m, id)
		}
	}
	for len(ss.m) >= maxSessions {
		oldest, first := "", time.Time{}
		for id, s := range ss.m {
			if oldest == "" || s.expires.Before(first) {
				oldest, first = id, s.expires
			}
		}
		delete(ss.m, oldest)
	}
}

// get is the live session of id (an expired one is dropped).
func (ss *sessions) get(id string, now time.Time) (session, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.m[id]
	if ok && !now.Before(s.expires) {
		delete(ss.m, id)
		return session{}, false
	}
	return s, ok
}

// end drops the session id.
func (ss *sessions) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// sessionAuth lets a session cookie stand for its token: a request with no
// Authorization header and the cookie of a live session gets that token's
// Authorization header, so every route checks exactly that token's scopes.
// A request that is not GET or HEAD must also come from the page's own
// origin (its Origin header names this Host), so another site cannot make
// a signed-in browser write. A session whose token is no longer configured
// (revoked by a reload) ends.
func (s *Server) sessionAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Header.Get("Authorization") != "" {
			return next(c)
		}
		cookie, err := r.Cookie(SessionCookie)
		if err != nil || cookie.Value == "" {
			return next(c)
		}
		sess, ok := s.sessions.get(cookie.Value, s.opts.Now())
		if !ok {
			return next(c) // signed out or expired: the route answers 401
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := sameOrigin(r); err != nil {
				return err
			}
		}
		if err := s.authenticate(sess.authorization); err != nil {
			var apiErr *Error
			if errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized {
				s.sessions.end(cookie.Value) // the token was revoked
			}
			return next(c)
		}
		r.Header.Set("Authorization", sess.authorization)
		return next(c)
	}
}

// sameOrigin refuses a request whose Origin header is missing or names
// another site than the Host it was sent to.
func sameOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if origin == "" || err != nil || u.Scheme != scheme || !strings.EqualFold(u.Host, r.Host) {
		return newError(http.StatusForbidden,
			"send writes from the daemon's own page (/ui/), or with an Authorization header instead of the session cookie",
			"a write signed in by session cookie must come from this daemon's origin ("+scheme+"://"+r.Host+"); its Origin is "+quoteOr(origin, "missing"))
	}
	return nil
}

func quoteOr(s, none string) string {
	if s == "" {
		return none
	}
	return `"` + s + `"`
}

// signIn is the body of POST /ui/session.
type signIn struct {
	Token string `json:"token" form:"token"`
}

// mountSessions serves POST /ui/session (sign in with a token: sets the
// session cookie), GET /ui/session (who is signed in) and DELETE
// /ui/session (sign out).
func (s *Server) mountSessions() {
	s.echo.POST("/ui/session", func(c echo.Context) error {
		r := c.Request()
		if err := sameOrigin(r); err != nil && r.Header.Get("Origin") != "" {
			return err // a browser on another site; a script without Origin may sign in
		}
		var body signIn
		if err := c.Bind(&body); err != nil || strings.TrimSpace(body.Token) == "" {
			return newError(http.StatusBadRequest, `send {"token": "…"} (a token of the config's tokens file)`, "the sign-in names no token")
		}
		authorization := "Bearer " + strings.TrimSpace(body.Token)
		if err := s.authenticate(authorization); err != nil {
			return err
		}
		name := s.tokenName(authorization)
		id, err := s.sessions.add(authorization, name, s.opts.Now())
		if err != nil {
			return err
		}
		c.SetCookie(&http.Cookie{
			Name: SessionCookie, Value: id, Path: "/", MaxAge: int(sessionTTL / time.Second),
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		return c.JSON(http.StatusOK, map[string]any{"token": name, "expires_in": int(sessionTTL / time.Second)})
	})
	s.echo.GET("/ui/session", func(c echo.Context) error {
		cookie, err := c.Request().Cookie(SessionCookie)
		if err != nil {
			return newError(http.StatusUnauthorized, "sign in at /ui/ with a token", "not signed in")
		}
		sess, ok := s.sessions.get(cookie.Value, s.opts.Now())
		if !ok || s.authenticate(sess.authorization) != nil {
			s.sessions.end(cookie.Value)
			return newError(http.StatusUnauthorized, "sign in at /ui/ with a token", "the session ended (signed out, expired, restarted daemon, or its token was revoked)")
		}
		return c.JSON(http.StatusOK, map[string]any{"token": sess.token, "expires_at": sess.expires.UTC().Format(time.RFC3339)})
	})
	s.echo.DELETE("/ui/session", func(c echo.Context) error {
		if err := sameOrigin(c.Request()); err != nil {
			return err
		}
		if cookie, err := c.Request().Cookie(SessionCookie); err == nil {
			s.sessions.end(cookie.Value)
		}
		c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.Request().TLS != nil})
		return c.NoContent(http.StatusNoContent)
	})
}

// tokenName is the name of the token authorization carries ("" if the
// guard does not say).
func (s *Server) tokenName(authorization string) string {
	if s.opts.Guard == nil {
		return ""
	}
	name, _ := s.opts.Guard.Check(authorization, auth.All)
	return name
}

// mountUI serves the web page (package webui) at /ui/ and its sign-in.
func (s *Server) mountUI() {
	s.mountSessions()
	page := webui.Handler()
	s.echo.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusFound, webui.Prefix) })
	s.echo.GET("/ui/*", echo.WrapHandler(page))
}
