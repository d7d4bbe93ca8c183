package config

import (
	"net"
	"time"

	"go.yaml.in/yaml/v3"
)

// API defaults.
const (
	DefaultAPIListen             = "127.0.0.1:8080"
	DefaultAPIMaxBodySize        = 1 << 20 // 1 MiB
	DefaultAPIReadHeaderTimeout  = 5 * time.Second
	DefaultAPIReadTimeout        = 30 * time.Second
	DefaultAPIWriteTimeout       = 30 * time.Second
	DefaultAPIIdleTimeout        = 120 * time.Second
	DefaultAPIMaxConcurrentSync  = 10
	DefaultAPIMaxSyncTimeout     = 5 * time.Minute
	DefaultAPIMaxStreamsPerToken = 8
)

// APIServer holds the HTTP API's settings (the api: section). The API is
// on by default (api.enabled: false turns it off).
type APIServer struct {
	Enabled bool
	Listen  string // host:port
	// ListenSet says api.listen was written: a daemon that cannot listen
	// there fails to start, while one on the default address runs on
	// without the API (and says so).
	ListenSet         bool
	MaxBodySize       int64 // bytes
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxConcurrentSync is how many callers of a synchronous pipeline may
	// wait at once; one more is answered 503.
	MaxConcurrentSync int
	// MaxSyncTimeout caps how long a synchronous caller waits (a
	// pipeline's own timeout may be shorter).
	MaxSyncTimeout time.Duration
	// MaxStreamsPerToken is how many event streams (GET /events) one token
	// may hold open at once; one more is answered 429.
	MaxStreamsPerToken int
	// TLS is api.tls: off unless both files are given (config/api_tls.go).
	TLS APITLS
	// InsecurePlaintext (api.insecure_plaintext) lets a non-loopback
	// Listen serve without TLS; without it such a config is refused.
	InsecurePlaintext bool
	// Hosts (api.hosts) are the names the API answers to beyond loopback
	// ones, lower case; see api's Host check.
	Hosts []string
}

// DefaultAPIServer returns the API's settings with every default, enabled.
func DefaultAPIServer() APIServer {
	return APIServer{
		Enabled: true, Listen: DefaultAPIListen, MaxBodySize: DefaultAPIMaxBodySize,
		ReadHeaderTimeout: DefaultAPIReadHeaderTimeout, ReadTimeout: DefaultAPIReadTimeout,
		WriteTimeout: DefaultAPIWriteTimeout, IdleTimeout: DefaultAPIIdleTimeout,
		MaxConcurrentSync: DefaultAPIMaxConcurrentSync, MaxSyncTimeout: DefaultAPIMaxSyncTimeout,
		MaxStreamsPerToken: DefaultAPIMaxStreamsPerToken,
	}
}

// apiServer reads the api: section into cfg.APIServer.
func (l *loader) apiServer(n *yaml.Node, path string, cfg *Config) {
	cfg.API = n
	s := DefaultAPIServer()
	var listen *yaml.Node
	l.object(n, path, "",
		field{"enabled", func(v *yaml.Node, path string) { l.boolean(v, path, &s.Enabled) }},
		field{"listen", func(v *yaml.Node, path string) {
			listen = v
			addr, ok := l.str(v, path)
			if !ok {
				return
			}
			if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
				l.fail(v, path, "must be host:port, like 127.0.0.1:8080, got %q", addr)
				return
			}
			s.Listen, s.ListenSet = addr, true
		}},
		field{"max_body_size", func(v *yaml.Node, path string) {
			if v.Kind != yaml.ScalarNode {
				l.fail(v, path, "must be a size like 1MiB, 512KB or 1048576")
				return
			}
			size, err := ParseSize(v.Value)
			if err != nil {
				l.fail(v, path, "%v", err)
				return
			}
			s.MaxBodySize = size
		}},
		field{"read_header_timeout", func(v *yaml.Node, path string) { l.duration(v, path, &s.ReadHeaderTimeout) }},
		field{"read_timeout", func(v *yaml.Node, path string) { l.duration(v, path, &s.ReadTimeout) }},
		field{"write_timeout", func(v *yaml.Node, path string) { l.duration(v, path, &s.WriteTimeout) }},
		field{"idle_timeout", func(v *yaml.Node, path string) { l.duration(v, path, &s.IdleTimeout) }},
		field{"max_concurrent_sync", func(v *yaml.Node, path string) {
			if i, ok := l.integer(v, path); ok {
				if i < 1 {
					l.fail(v, path, "must be ≥ 1, got %d (how many callers of synchronous pipelines may wait at once)", i)
					return
				}
				s.MaxConcurrentSync = i
			}
		}},
		field{"max_sync_timeout", func(v *yaml.Node, path string) { l.duration(v, path, &s.MaxSyncTimeout) }},
		field{"max_streams_per_token", func(v *yaml.Node, path string) {
			if i, ok := l.integer(v, path); ok {
				if i < 1 {
					l.fail(v, path, "must be ≥ 1, got %d (how many event streams one token may hold open at once)", i)
					return
				}
				s.MaxStreamsPerToken = i
			}
		}},
		field{"tls", func(v *yaml.Node, path string) { l.apiTLS(v, path, &s) }},
		field{"insecure_plaintext", func(v *yaml.Node, path string) { l.boolean(v, path, &s.InsecurePlaintext) }},
		field{"hosts", func(v *yaml.Node, path string) { l.apiHosts(v, path, &s) }},
	)
	l.checkPlaintext(listen, s)
	cfg.APIServer = s
}
