package config

import (
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Webhook defaults (spec §10).
const (
	DefaultWebhookListen            = "127.0.0.1:8081"
	DefaultWebhookCommand           = "handle"
	DefaultSignatureHeader          = "X-Hub-Signature-256"
	DefaultMaxBodySize        int64 = 1 << 20
	DefaultTimestampTolerance       = 5 * time.Minute
	// MaxWebhookBodySize bounds max_body_size: a body becomes a job's
	// payload, held in the ledger.
	MaxWebhookBodySize int64 = 64 << 20
	// WebhookHealthPath is served on the webhook listener (spec §10.3), so
	// no endpoint may take it.
	WebhookHealthPath = "/healthz"
)

// WebhookSettings is the webhooks: section: one listener and its endpoints.
type WebhookSettings struct {
	// Listen is the host:port of the webhook listener.
	Listen string
	// Endpoints are in the order written; nil when none (then no listener
	// opens).
	Endpoints []WebhookEndpoint
}

// WebhookEndpoint is one path that turns signed POSTs into jobs.
type WebhookEndpoint struct {
	// Path is absolute and clean, e.g. /hook/github; unique.
	Path    string
	Plugin  string
	Command string
	// SecretRef names the secret the signature is made with.
	SecretRef string
	// SignatureHeader holds HMAC-SHA256 of the signed content, as
	// sha256=<hex> or bare hex; canonical form (X-Hub-Signature-256).
	SignatureHeader string
	// MaxBodySize is the largest body accepted, in bytes.
	MaxBodySize int64
	// DeliveryIDHeader, if set, names a header whose value is deduplicated
	// for 24 hours: a repeated delivery enqueues nothing.
	DeliveryIDHeader string
	// TimestampHeader, if set, names a header holding the Unix time of the
	// delivery in seconds; the signature is then over "<timestamp>.<body>",
	// and a delivery more than Tolerance away from now is refused.
	TimestampHeader string
	Tolerance       time.Duration
}

// Endpoint returns the endpoint at path.
func (w WebhookSettings) Endpoint(path string) (WebhookEndpoint, bool) {
	for _, e := range w.Endpoints {
		if e.Path == path {
			return e, true
		}
	}
	return WebhookEndpoint{}, false
}

// webhookKeys are the keys of an endpoint entry.
var webhookKeys = []string{"path", "plugin", "command", "secret_ref", "signature_header", "max_body_size",
	"delivery_id_header", "timestamp_header", "tolerance"}

// webhooks decodes the webhooks: section into cfg.WebhookSettings.
func (l *loader) webhooks(n *yaml.Node, p string, cfg *Config) {
	l.object(n, p, "",
		field{"listen", func(v *yaml.Node, p string) {
			s, ok := l.str(v, p)
			if !ok {
				return
			}
			host, port, err := net.SplitHostPort(s)
			if err != nil || port == "" {
				l.fail(v, p, "invalid address %q: give host:port, e.g. 127.0.0.1:8081", s)
				return
			}
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				l.fail(v, p, "invalid port %q: give a number from 0 to 65535, e.g. 127.0.0.1:8081", port)
				return
			}
			_ = host // "" listens on every interface: allowed, the operator's choice
			cfg.WebhookSettings.Listen = s
		}},
		field{"endpoints", func(v *yaml.Node, p string) {
			if v.Kind != yaml.SequenceNode {
				l.fail(v, p, "must be a list of endpoints, e.g. - {path: /hook/github, plugin: github, secret_ref: github_secret}")
				return
			}
			seen := map[string]string{}
			for i, item := range v.Content {
				ipath := indexPath(p, i)
				e, keys, ok := l.webhookEndpoint(item, ipath)
				if !ok {
					continue
				}
				if first, dup := seen[e.Path]; dup {
					l.fail(keys["path"], ipath+".path", "path %q is already used by %s: give each endpoint its own path", e.Path, first)
					continue
				}
				seen[e.Path] = ipath
				cfg.WebhookSettings.Endpoints = append(cfg.WebhookSettings.Endpoints, e)
				cfg.webhookNodes = append(cfg.webhookNodes, webhookNodes{path: ipath, entry: item, keys: keys})
			}
		}},
	)
}

// webhookNodes is where one endpoint was written, for Check.
type webhookNodes struct {
	path  string
	entry *yaml.Node
	keys  map[string]*yaml.Node
}

// webhookEndpoint decodes one endpoint; false when it is not valid (the
// problems are recorded).
func (l *loader) webhookEndpoint(n *yaml.Node, p string) (WebhookEndpoint, map[string]*yaml.Node, bool) {
	e := WebhookEndpoint{Command: DefaultWebhookCommand, SignatureHeader: DefaultSignatureHeader, MaxBodySize: DefaultMaxBodySize}
	keys := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		l.fail(n, p, "must be a mapping, e.g. {path: /hook/github, plugin: github, secret_ref: github_secret}")
		return e, keys, false
	}
	before := len(l.errs)
	str := func(dst *string, fix string) func(v *yaml.Node, p string) {
		return func(v *yaml.Node, p string) {
			s, ok := l.str(v, p)
			if ok && s == "" {
				l.fail(v, p, "must not be empty: %s", fix)
				return
			}
			*dst = s
		}
	}
	header := func(dst *string) func(v *yaml.Node, p string) {
		return func(v *yaml.Node, p string) {
			s, ok := l.str(v, p)
			if !ok {
				return
			}
			if !validHeaderName(s) {
				l.fail(v, p, "invalid header name %q: use letters, digits and -, e.g. X-Hub-Signature-256", s)
				return
			}
			*dst = http.CanonicalHeaderKey(s)
		}
	}
	fields := map[string]func(v *yaml.Node, p string){
		"path": func(v *yaml.Node, p string) {
			s, ok := l.str(v, p)
			if !ok {
				return
			}
			switch {
			case !strings.HasPrefix(s, "/"):
				l.fail(v, p, "must start with /, e.g. /hook/github")
			case s == WebhookHealthPath:
				l.fail(v, p, "%s is the listener's health check: choose another path", WebhookHealthPath)
			case path.Clean(s) != s:
				l.fail(v, p, "must be a clean path (no //, /./, /../ or trailing /): write %s", path.Clean(s))
			case strings.ContainsAny(s, "?# \t%"):
				l.fail(v, p, "must be a plain path without ?, #, %% or spaces, e.g. /hook/github")
			default:
				e.Path = s
			}
		},
		"plugin":             str(&e.Plugin, "name the plugin that receives the deliveries"),
		"command":            str(&e.Command, `leave it out for "handle"`),
		"secret_ref":         str(&e.SecretRef, "name the secret (under secrets:) the sender signs with"),
		"signature_header":   header(&e.SignatureHeader),
		"delivery_id_header": header(&e.DeliveryIDHeader),
		"timestamp_header":   header(&e.TimestampHeader),
		"tolerance":          func(v *yaml.Node, p string) { l.duration(v, p, &e.Tolerance) },
		"max_body_size": func(v *yaml.Node, p string) {
			s, ok := l.str(v, p)
			if !ok {
				return
			}
			size, err := ParseSize(s)
			switch {
			case err != nil:
				l.fail(v, p, "%v", err)
			case size < 1 || size > MaxWebhookBodySize:
				l.fail(v, p, "must be from 1 byte to 64MiB, got %s", s)
			default:
				e.MaxBodySize = size
			}
		},
	}
	list := make([]field, len(webhookKeys))
	for i, key := range webhookKeys {
		list[i] = field{key, func(v *yaml.Node, p string) {
			keys[key] = v
			fields[key](v, p)
		}}
	}
	l.object(n, p, "", list...)
	for _, req := range []struct{ key, val, fix string }{
		{"path", e.Path, "give the URL path it receives, e.g. path: /hook/github"},
		{"plugin", e.Plugin, "name the plugin that receives the deliveries"},
		{"secret_ref", e.SecretRef, "name the secret the sender signs with (every endpoint checks a signature)"},
	} {
		if req.val == "" && keys[req.key] == nil {
			l.fail(n, joinPath(p, req.key), "missing: %s", req.fix)
		}
	}
	switch {
	case e.Tolerance > 0 && e.TimestampHeader == "":
		l.fail(keys["tolerance"], p+".tolerance", "applies only with timestamp_header: name the header holding the signed timestamp, or leave tolerance out")
	case e.TimestampHeader != "" && e.Tolerance == 0:
		e.Tolerance = DefaultTimestampTolerance
	}
	return e, keys, len(l.errs) == before
}

// validHeaderName reports whether s is an HTTP header name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// checkWebhooks checks each endpoint's plugin and command against the
// plugins loaded, and its secret_ref against secrets: when the config has
// one. missing says that a plugin is not loaded, so what follows.
func (c *Config) checkWebhooks(installed map[string]InstalledPlugin, at func(*yaml.Node, string, string, ...any) FieldError,
	missing func(name, so string) string) (errs, warnings []FieldError) {
	for i, e := range c.WebhookSettings.Endpoints {
		if i >= len(c.webhookNodes) {
			break
		}
		en := c.webhookNodes[i]
		node := func(key string) *yaml.Node {
			if v := en.keys[key]; v != nil {
				return v
			}
			return en.entry
		}
		plugin, ok := installed[e.Plugin]
		switch {
		case !ok:
			errs = append(errs, at(node("plugin"), en.path+".plugin", "%s", missing(e.Plugin, "every delivery would make a job that fails at once")))
		case !slices.Contains(plugin.Commands, e.Command):
			if en.keys["command"] == nil {
				errs = append(errs, at(en.entry, en.path, "plugin %q has no command %s (the default command): set command: to one of its commands (%s)",
					e.Plugin, e.Command, strings.Join(plugin.Commands, ", ")))
				break
			}
			errs = append(errs, at(node("command"), en.path+".command", "plugin %q has no command %q%s (its commands: %s)",
				e.Plugin, e.Command, didYouMean(e.Command, plugin.Commands), strings.Join(plugin.Commands, ", ")))
		case !c.Plugin(e.Plugin).Enabled:
			warnings = append(warnings, at(node("plugin"), en.path+".plugin", "plugin %q is disabled (plugins.%s.enabled: false): jobs this endpoint makes fail at once", e.Plugin, e.Plugin))
		}
		if c.Secrets != nil {
			if _, ok := c.Secrets[e.SecretRef]; !ok {
				names := make([]string, 0, len(c.Secrets))
				for name := range c.Secrets {
					names = append(names, name)
				}
				errs = append(errs, at(node("secret_ref"), en.path+".secret_ref", "no secret named %q in secrets:%s; add it (e.g. %s: ${ENV_VAR}), or name one that exists",
					e.SecretRef, didYouMean(e.SecretRef, names), e.SecretRef))
			}
		}
	}
	return errs, warnings
}
