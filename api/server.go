// Package api is the daemon's HTTP API (spec §9): handlers that parse a
// request, call the shared read side (views) or a command, and format the
// answer. Its OpenAPI 3.1 document is generated from the registered
// operations (huma on echo).
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humaecho"
	"github.com/labstack/echo/v4"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/schedule"
)

// Options configure a Server.
type Options struct {
	Ledger    *ledger.Ledger
	Projector *projections.Projector // optional: /healthz reports its lag
	// Engine is the runtime of the config the daemon runs now (a reload
	// swaps it): every write the API is asked for is one of its intents.
	Engine func() *engine.Engine
	// Settings are the listener's settings (config.APIServer); zero
	// fields take config.DefaultAPIServer's.
	Settings config.APIServer
	// Guard checks bearer tokens; nil: every authenticated route answers
	// 401 with a hint on making a token.
	Guard   auth.Guard
	Events  http.Handler // GET /events (SSE); nil: 404
	Metrics http.Handler // GET /metrics; nil: 404
	// Workers counts what remote workers do through the worker routes
	// (metrics.Metrics); nil: not counted.
	Workers WorkerObserver
	// Topics counts what the topic routes do (metrics.Metrics); nil: not
	// counted.
	Topics TopicObserver
	// Schedules are the schedules the daemon's scheduler runs now (GET
	// /schedules); nil: none.
	Schedules func() []schedule.Schedule
	Logger    *slog.Logger
	Now       func() time.Time
	Started   time.Time // when the daemon started, for /healthz
}

// Server is the HTTP API.
type Server struct {
	opts    Options
	echo    *echo.Echo
	api     huma.API
	http    *http.Server
	streams context.Context // canceled when Shutdown begins: ends long streams
	stop    context.CancelFunc
	// hosts are the Host names served, set by Serve (api/hosts.go); nil
	// before it: the zero policy, every host. Atomic: the handler may be
	// served elsewhere as well (a test's TLS server) while Serve starts.
	hosts atomic.Pointer[hostPolicy]
	// syncSlots holds one token per synchronous pipeline caller waiting
	// (api.max_concurrent_sync).
	syncSlots chan struct{}
	// streamsOpen counts the event streams open per token
	// (api.max_streams_per_token).
	streamsMu   sync.Mutex
	streamsOpen map[string]int
	// sessions are the web page's signed-in browsers (api/session.go).
	sessions sessions
}

// New builds the API's routes.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Started.IsZero() {
		opts.Started = opts.Now()
	}
	opts.Settings = withDefaults(opts.Settings)
	s := &Server{opts: opts, echo: echo.New(), streamsOpen: map[string]int{}}
	s.streams, s.stop = context.WithCancel(context.Background())
	s.echo.HideBanner, s.echo.HidePort = true, true
	s.echo.HTTPErrorHandler = s.echoError
	s.echo.Pre(s.checkHost, s.capBody, s.sessionAuth)

	useHumaErrors()
	cfg := huma.DefaultConfig("Ductile API", "1")
	cfg.Info.Description = "Enqueue plugin commands and read jobs of a Ductile daemon (spec §9)."
	cfg.DocsPath, cfg.SchemasPath, cfg.CreateHooks = "", "", nil
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		bearerScheme: {Type: "http", Scheme: "bearer", Description: "A token of the config's tokens file"},
	}
	s.api = humaecho.New(s.echo, cfg)
	s.api.UseMiddleware(s.authorize)
	s.register()
	s.mount("/events", auth.EventsRO, opts.Events, true, nil)
	s.mount("/metrics", auth.JobsRO, opts.Metrics, false, nil)
	s.mountRunStreams()
	s.document()
	s.mountMCP()
	s.mountUI()

	set := opts.Settings
	s.http = &http.Server{
		Handler: s.echo, ReadHeaderTimeout: set.ReadHeaderTimeout, ReadTimeout: set.ReadTimeout,
		WriteTimeout: set.WriteTimeout, IdleTimeout: set.IdleTimeout,
		ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	s.http.RegisterOnShutdown(s.stop)
	return s
}

func withDefaults(s config.APIServer) config.APIServer {
	d := config.DefaultAPIServer()
	if s.Listen == "" {
		s.Listen = d.Listen
	}
	if s.MaxBodySize <= 0 {
		s.MaxBodySize = d.MaxBodySize
	}
	if s.MaxConcurrentSync <= 0 {
		s.MaxConcurrentSync = d.MaxConcurrentSync
	}
	if s.MaxStreamsPerToken <= 0 {
		s.MaxStreamsPerToken = d.MaxStreamsPerToken
	}
	for _, pair := range []struct{ set, def *time.Duration }{
		{&s.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&s.ReadTimeout, &d.ReadTimeout},
		{&s.WriteTimeout, &d.WriteTimeout}, {&s.IdleTimeout, &d.IdleTimeout}, {&s.MaxSyncTimeout, &d.MaxSyncTimeout},
	} {
		if *pair.set <= 0 {
			*pair.set = *pair.def
		}
	}
	return s
}

// Handler is the API as an http.Handler (the Host check needs Serve's
// listener; without it any Host is served).
func (s *Server) Handler() http.Handler { return s.echo }

// OpenAPI is the generated OpenAPI document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Serve answers requests on ln until Shutdown; it returns nil after
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.allowHosts(ln.Addr())
	err := s.http.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, ends the event streams and waits
// for the requests under way to finish, or for ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	s.stop()
	return err
}

// mount serves handler at path (GET, echo's form: /runs/:id/…) behind the
// guard; stream counts the response against its token's
// api.max_streams_per_token, lifts the request's write timeout (the
// handler sets one per write) and ends the response when Shutdown begins.
// The path's parameters are the request's path values; prepare, if not
// nil, checks the request first (and may change it): its error is the
// answer.
func (s *Server) mount(path string, need auth.Scope, handler http.Handler, stream bool, prepare func(*http.Request) (*http.Request, error)) {
	s.echo.GET(path, func(c echo.Context) error {
		token, err := s.check(c.Request().Header.Get("Authorization"), need)
		if err != nil {
			return err
		}
		if handler == nil {
			return newError(http.StatusNotFound, "this daemon serves no "+c.Path(), "GET "+c.Path()+" is not available")
		}
		w, r := c.Response().Writer, c.Request()
		for i, name := range c.ParamNames() {
			r.SetPathValue(name, c.ParamValues()[i])
		}
		if prepare != nil {
			if r, err = prepare(r); err != nil {
				return err
			}
		}
		if stream {
			release, err := s.openStream(token)
			if err != nil {
				return err
			}
			defer release()
			_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(s.streams, cancel)()
			r = r.WithContext(ctx)
		}
		handler.ServeHTTP(w, r)
		return nil
	})
}

// openStream counts one more event stream of token, or refuses it with a
// 429 too_many_streams once the token has api.max_streams_per_token open.
// release ends the count.
func (s *Server) openStream(token string) (release func(), err error) {
	limit := s.opts.Settings.MaxStreamsPerToken
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.streamsOpen[token] >= limit {
		return nil, &Error{Status: http.StatusTooManyRequests, Code: errcode.TooManyStreams,
			Message: fmt.Sprintf("token %q has %d event streams open already (api.max_streams_per_token)", token, limit),
			Hint: "close a stream of this token first (resume a new one with Last-Event-ID), use another token, " +
				"or raise api.max_streams_per_token in the config and reload"}
	}
	s.streamsOpen[token]++
	return func() {
		s.streamsMu.Lock()
		defer s.streamsMu.Unlock()
		if s.streamsOpen[token]--; s.streamsOpen[token] == 0 {
			delete(s.streamsOpen, token)
		}
	}, nil
}

// echoError writes errors of echo's router and of mounted routes in the
// API's error shape.
func (s *Server) echoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	apiErr := errorOf(err)
	if errors.As(err, &he) {
		msg, _ := he.Message.(string)
		apiErr = newError(he.Code, "", msg)
		if he.Code == http.StatusNotFound {
			apiErr.Hint = "the routes are listed at /openapi.json"
		}
	}
	if apiErr.Status >= 500 {
		s.opts.Logger.Error("api: request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	_ = c.JSON(apiErr.Status, apiErr)
}

// capBody bounds every request's body (huma bounds its operations' too).
func (s *Server) capBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > s.opts.Settings.MaxBodySize {
			return newError(http.StatusRequestEntityTooLarge, "send a smaller body, or raise api.max_body_size in the config",
				"the request body is larger than api.max_body_size")
		}
		r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, s.opts.Settings.MaxBodySize)
		return next(c)
	}
}

// allowHosts sets the Host names served by a listener on addr: loopback
// names and api.hosts (hostPolicy).
func (s *Server) allowHosts(addr net.Addr) {
	p := newHostPolicy(addr, s.opts.Settings.Hosts)
	s.hosts.Store(&p)
}

// checkHost refuses a request whose Host is not served (hostPolicy).
func (s *Server) checkHost(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p := s.hosts.Load(); p != nil && !p.serves(c.Request().Host) {
			return newError(http.StatusForbidden, "call the API as localhost or 127.0.0.1, or by a name in api.hosts (add it there and restart the daemon to serve it)",
				"host "+c.Request().Host+" is not served: it is not a loopback name nor in api.hosts")
		}
		return next(c)
	}
}

// loopbackHost reports whether host (host[:port]) names the loopback.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
