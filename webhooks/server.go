package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits of the listener: slow or huge requests cannot hold it.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	MaxHeaderBytes    = 64 << 10
	// ShutdownTimeout is how long Close lets requests in flight finish.
	ShutdownTimeout = 10 * time.Second
)

// Server serves a handler on one listener; it owns its goroutine.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	log  *slog.Logger
	done sync.WaitGroup
}

// Listen binds addr (host:port; port 0 picks one) and serves h on it until
// Close.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhooks: listen on %s: %w", addr, err)
	}
	s := &Server{ln: ln, log: log.With("component", "webhooks"), srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	s.done.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("webhook listener stopped", "err", err.Error())
		}
	})
	return s, nil
}

// Addr is the address the listener is bound to.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting requests, lets those in flight finish (at most
// ShutdownTimeout, then closes them) and waits for the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	s.done.Wait()
	return err
}
