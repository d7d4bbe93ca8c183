package config

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/schedule"
)

// RedactedValue replaces secrets in Redacted output.
const RedactedValue = "[redacted]"

// secretKey matches keys whose values Redacted hides. It is deliberately
// broad ("monkey" matches too): showing less is the safe mistake.
var secretKey = regexp.MustCompile(`(?i)token|secret|password|passwd|key|credential|auth`)

// Redacted returns a copy of c for printing (config show). In plugin config
// maps, schedules, pipelines, api and webhooks it replaces with RedactedValue
// every value under a key matching token, secret, password, passwd, key,
// credential or auth (case-insensitive), and every value filled from
// ${VAR}; inside every other string it hides credentials (see
// RedactString). The typed settings (paths, numbers, durations, routes) are
// shown as they are.
func (c *Config) Redacted() *Config {
	r := *c
	r.Files = slices.Clone(c.Files)
	r.FileHashes = slices.Clone(c.FileHashes)
	r.PluginRoots = slices.Clone(c.PluginRoots)
	r.Routes = slices.Clone(c.Routes)
	r.Plugins = make(map[string]PluginConfig, len(c.Plugins))
	r.pluginConfig = make(map[string]*yaml.Node, len(c.pluginConfig))
	r.schedules = make(map[string]*scheduleNodes, len(c.schedules))
	r.interpolated = nil // the copies below hold no interpolated nodes
	for name, p := range c.Plugins {
		if n := c.pluginConfig[name]; n != nil {
			rn := c.redact(n)
			r.pluginConfig[name] = rn
			p.Config, _ = toData(rn, "", func(*yaml.Node, string, string) {}).(map[string]any)
		} else {
			p.Config = maps.Clone(p.Config)
		}
		p.Schedules = r.redactSchedules(c, name, p.Schedules)
		r.Plugins[name] = p
	}
	r.Pipelines = c.redact(c.Pipelines)
	r.API = c.redact(c.API)
	r.Webhooks = c.redact(c.Webhooks)
	return &r
}

// redactSchedules returns a copy of entries, the schedules of plugin name
// in c, with their payloads redacted, and records where they were written
// in r.
func (r *Config) redactSchedules(c *Config, name string, entries []schedule.Entry) []schedule.Entry {
	nodes := c.schedules[name]
	if nodes == nil {
		return slices.Clone(entries)
	}
	out := slices.Clone(entries)
	rn := &scheduleNodes{list: nodes.list}
	for i, en := range nodes.entries {
		if pn := en.keys["payload"]; pn != nil {
			redacted := c.redact(pn)
			out[i].Payload, _ = toData(redacted, "", func(*yaml.Node, string, string) {}).(map[string]any)
			en.keys = maps.Clone(en.keys)
			en.keys["payload"] = redacted
		}
		rn.entries = append(rn.entries, en)
	}
	r.schedules[name] = rn
	return out
}

// redact returns a redacted deep copy of n.
func (c *Config) redact(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if c.interpolated[n] {
		return redactedNode(n)
	}
	cp := *n
	if n.Kind == yaml.ScalarNode {
		cp.Value = RedactString(n.Value)
	}
	cp.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		if n.Kind == yaml.MappingNode && i%2 == 1 && secretKey.MatchString(n.Content[i-1].Value) && !isNull(child) {
			cp.Content[i] = redactedNode(child)
			continue
		}
		cp.Content[i] = c.redact(child)
	}
	return &cp
}

// RedactString hides the credentials inside s and keeps the rest readable:
// the userinfo of every URL ("postgres://[redacted]@db/app": the user too,
// since tokens are often passed as the user), a whole value or word of the
// form user:password@host without a scheme, and the value of every
// name=value pair whose name matches the secret keys ("password=[redacted]"
// in a libpq DSN, "?api_key=[redacted]" in a query string).
func RedactString(s string) string {
	// Parameters first: hiding one can only remove text (a "://" inside
	// its value, say) that would change how the rest reads.
	if strings.Contains(s, "=") {
		s = secretParam.ReplaceAllString(s, "${1}${2}="+RedactedValue)
	}
	if strings.Contains(s, "@") {
		s = redactURLUserinfo(s)
		s = redactSchemelessUserinfo(s)
	}
	return s
}

// secretParam matches name=value where name contains a secret key; the
// value ends at whitespace, &, ; or , outside a leading quoted part.
var secretParam = regexp.MustCompile(`(?i)(^|[\s?&;,])([\w.-]*(?:token|secret|password|passwd|key|credential|auth)[\w.-]*)=(?:'[^']*'|"[^"]*")?[^\s&;,]*`)

// urlScheme matches the scheme and "://" of a URL.
var urlScheme = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)

// redactURLUserinfo replaces the userinfo of every URL in s. The authority
// ends at the first /, ? or # (or the end of the word); its userinfo is
// what precedes its last @. A password holding a raw /, ? or # leaves an
// authority like "user:pa" with no @ but an @ later in the word: then
// everything up to that @ is hidden.
func redactURLUserinfo(s string) string {
	var b strings.Builder
	rest := s
	for {
		loc := urlScheme.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			return b.String()
		}
		start := loc[1]
		b.WriteString(rest[:start])
		word := rest[start:]
		if i := strings.IndexFunc(word, endsWord); i >= 0 {
			word = word[:i]
		}
		authority := word
		if i := strings.IndexAny(word, "/?#"); i >= 0 {
			authority = word[:i]
		}
		// Where the authority has userinfo, or could hold part of a
		// password cut short by a '/', '?' or '#' in it, the userinfo ends
		// at the word's last '@': a path with an '@' after a userinfo is
		// redacted too, which costs a little of the path and never a
		// part of the password.
		userinfo := -1
		if strings.Contains(authority, "@") || strings.Contains(word, "@") && !plainHostPort(authority) {
			userinfo = strings.LastIndexByte(word, '@')
		}
		if userinfo > 0 {
			b.WriteString(RedactedValue)
			rest = rest[start+userinfo:]
			continue
		}
		rest = rest[start:]
	}
}

// plainHostPort reports whether authority is a host with at most a numeric
// port, so that no part of a password can be in it.
func plainHostPort(authority string) bool {
	if strings.HasPrefix(authority, "[") { // an IPv6 literal
		end := strings.IndexByte(authority, ']')
		if end < 0 {
			return false
		}
		authority = "h" + authority[end+1:]
	}
	_, port, ok := strings.Cut(authority, ":")
	return !ok || strings.Trim(port, "0123456789") == ""
}

// redactSchemelessUserinfo replaces "user:password" in every word of s of
// the form user:password@host (a proxy or a DSN written without a scheme).
// A word without the colon (git@github.com:o/r, an email address) is kept.
func redactSchemelessUserinfo(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		end := strings.IndexFunc(s, endsWord)
		if end < 0 {
			end = len(s)
		}
		w := s[:end]
		at := strings.LastIndexByte(w, '@')
		colon := strings.IndexByte(w, ':')
		if at > 0 && at < len(w)-1 && colon > 0 && colon < at && !strings.Contains(w, "://") &&
			!strings.ContainsAny(w[:colon], "/@") {
			w = RedactedValue + w[at:]
		}
		b.WriteString(w)
		if end < len(s) {
			_, size := utf8.DecodeRuneInString(s[end:])
			b.WriteString(s[end : end+size])
			end += size
		}
		s = s[end:]
	}
	return b.String()
}

// endsWord reports whether r ends a word that may hold a URL.
func endsWord(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune(`"'<>`, r)
}

func redactedNode(n *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: RedactedValue, Line: n.Line, Column: n.Column}
}

// MarshalJSON writes the config in the config file's own schema (durations as
// "30s", paths resolved): the output of config show --json.
func (c *Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(c.view())
}

// MarshalYAML writes the config in the config file's own schema; the output
// loads back as an equivalent config (a literal "${" in a value is written
// "$${", so that loading it does not expand it).
func (c *Config) MarshalYAML() (any, error) {
	var n yaml.Node
	if err := n.Encode(c.view()); err != nil {
		return nil, err
	}
	escapeValues(&n)
	return &n, nil
}

// escapeValues escapes placeholders in every string value under n; keys
// are left alone, as interpolation leaves them.
func escapeValues(n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			escapeValues(n.Content[i])
		}
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			escapeValues(c)
		}
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			n.Value = escapePlaceholders(n.Value)
		}
	}
}

// The view types give the marshalled form its keys and order. Source and
// Files are left out so that the output is itself a valid config file.
type configView struct {
	StateDir    string                `json:"state_dir,omitempty" yaml:"state_dir,omitempty"`
	PluginRoots []string              `json:"plugin_roots" yaml:"plugin_roots"`
	Service     serviceView           `json:"service" yaml:"service"`
	Plugins     map[string]pluginView `json:"plugins" yaml:"plugins"`
	Routes      []routeView           `json:"routes" yaml:"routes"`
	Topics      map[string]topicView  `json:"topics,omitempty" yaml:"topics,omitempty"`
	Pipelines   any                   `json:"pipelines,omitempty" yaml:"pipelines,omitempty"`
	API         any                   `json:"api,omitempty" yaml:"api,omitempty"`
	Webhooks    any                   `json:"webhooks,omitempty" yaml:"webhooks,omitempty"`
}

type serviceView struct {
	MaxWorkers      int    `json:"max_workers" yaml:"max_workers"`
	DedupeTTL       string `json:"dedupe_ttl" yaml:"dedupe_ttl"`
	JobLogRetention string `json:"job_log_retention" yaml:"job_log_retention"`
	AllowSymlinks   bool   `json:"allow_symlinks" yaml:"allow_symlinks"`
	MaxRouteDepth   int    `json:"max_route_depth" yaml:"max_route_depth"`
	MaxHookDepth    int    `json:"max_hook_depth" yaml:"max_hook_depth"`
	// LeasePeriod is empty only when rebuilt from settings recorded before
	// the key existed (FromSettings): the default then.
	LeasePeriod string `json:"lease_period,omitempty" yaml:"lease_period,omitempty"`
}

type pluginView struct {
	Enabled             bool               `json:"enabled" yaml:"enabled"`
	Parallelism         int                `json:"parallelism" yaml:"parallelism"`
	MaxOutstandingPolls int                `json:"max_outstanding_polls" yaml:"max_outstanding_polls"`
	Retry               retryView          `json:"retry" yaml:"retry"`
	Timeouts            timeoutsView       `json:"timeouts" yaml:"timeouts"`
	CircuitBreaker      circuitBreakerView `json:"circuit_breaker" yaml:"circuit_breaker"`
	NotifyOnComplete    bool               `json:"notify_on_complete" yaml:"notify_on_complete"`
	RunsOn              string             `json:"runs_on,omitempty" yaml:"runs_on,omitempty"`
	Config              map[string]any     `json:"config" yaml:"config"`
	Schedules           []scheduleView     `json:"schedules,omitempty" yaml:"schedules,omitempty"`
}

// scheduleView is one schedule entry with every default filled in; the
// lists are left out when empty.
type scheduleView struct {
	ID              string         `json:"id" yaml:"id"`
	Command         string         `json:"command" yaml:"command"`
	Payload         map[string]any `json:"payload,omitempty" yaml:"payload,omitempty"`
	Every           string         `json:"every,omitempty" yaml:"every,omitempty"`
	Cron            string         `json:"cron,omitempty" yaml:"cron,omitempty"`
	At              string         `json:"at,omitempty" yaml:"at,omitempty"`
	After           string         `json:"after,omitempty" yaml:"after,omitempty"`
	Jitter          string         `json:"jitter" yaml:"jitter"`
	OnlyBetween     []string       `json:"only_between,omitempty" yaml:"only_between,omitempty"`
	PreferredWindow []string       `json:"preferred_window,omitempty" yaml:"preferred_window,omitempty"`
	NotOn           []string       `json:"not_on,omitempty" yaml:"not_on,omitempty"`
	Timezone        string         `json:"timezone" yaml:"timezone"`
	CatchUp         string         `json:"catch_up" yaml:"catch_up"`
	IfRunning       string         `json:"if_running" yaml:"if_running"`
}

func newScheduleView(e schedule.Entry) scheduleView {
	v := scheduleView{
		ID:        e.ID,
		Command:   e.Command,
		Payload:   e.Payload,
		Jitter:    formatDuration(e.Jitter),
		Timezone:  e.Timezone,
		CatchUp:   string(e.CatchUp),
		IfRunning: string(e.IfRunning),
	}
	switch e.Kind {
	case schedule.KindEvery:
		v.Every = e.Rule.String()
	case schedule.KindCron:
		v.Cron = e.Rule.String()
	case schedule.KindAt:
		v.At = e.At.Format(time.RFC3339Nano)
	case schedule.KindAfter:
		v.After = formatDuration(e.After)
	}
	for _, w := range e.OnlyBetween {
		v.OnlyBetween = append(v.OnlyBetween, w.String())
	}
	for _, w := range e.PreferredWindow {
		v.PreferredWindow = append(v.PreferredWindow, w.String())
	}
	for _, d := range e.NotOn {
		v.NotOn = append(v.NotOn, schedule.Weekdays[d])
	}
	return v
}

type retryView struct {
	MaxAttempts int    `json:"max_attempts" yaml:"max_attempts"`
	BackoffBase string `json:"backoff_base" yaml:"backoff_base"`
}

type timeoutsView struct {
	Poll   string `json:"poll" yaml:"poll"`
	Handle string `json:"handle" yaml:"handle"`
	Health string `json:"health" yaml:"health"`
	Init   string `json:"init" yaml:"init"`
}

// topicView is one topic's settings, defaults filled in.
type topicView struct {
	MaxAttempts int    `json:"max_attempts" yaml:"max_attempts"`
	Backoff     string `json:"backoff" yaml:"backoff"`
}

type routeView struct {
	From      string `json:"from" yaml:"from"`
	EventType string `json:"event_type" yaml:"event_type"`
	To        string `json:"to" yaml:"to"`
	Command   string `json:"command" yaml:"command"`
}

func (c *Config) view() configView {
	v := configView{
		StateDir:    c.StateDir,
		PluginRoots: append([]string{}, c.PluginRoots...),
		Service: serviceView{
			MaxWorkers:      c.Service.MaxWorkers,
			DedupeTTL:       formatDuration(c.Service.DedupeTTL),
			JobLogRetention: formatDuration(c.Service.JobLogRetention),
			AllowSymlinks:   c.Service.AllowSymlinks,
			MaxRouteDepth:   c.Service.MaxRouteDepth,
			MaxHookDepth:    c.Service.MaxHookDepth,
			LeasePeriod:     formatDuration(c.Service.LeasePeriod),
		},
		Plugins:   make(map[string]pluginView, len(c.Plugins)),
		Routes:    make([]routeView, 0, len(c.Routes)),
		Pipelines: rawData(c.Pipelines),
		API:       rawData(c.API),
		Webhooks:  rawData(c.Webhooks),
	}
	for name, p := range c.Plugins {
		conf := p.Config
		if conf == nil {
			conf = map[string]any{}
		}
		pv := pluginView{
			Enabled:             p.Enabled,
			Parallelism:         p.Parallelism,
			MaxOutstandingPolls: p.MaxOutstandingPolls,
			Retry:               retryView{MaxAttempts: p.Retry.MaxAttempts, BackoffBase: formatDuration(p.Retry.BackoffBase)},
			Timeouts: timeoutsView{
				Poll:   formatDuration(p.Timeouts.Poll),
				Handle: formatDuration(p.Timeouts.Handle),
				Health: formatDuration(p.Timeouts.Health),
				Init:   formatDuration(p.Timeouts.Init),
			},
			CircuitBreaker:   newCircuitBreakerView(p.CircuitBreaker),
			NotifyOnComplete: p.NotifyOnComplete,
			RunsOn:           string(p.RunsOn),
			Config:           conf,
		}
		for _, e := range p.Schedules {
			pv.Schedules = append(pv.Schedules, newScheduleView(e))
		}
		v.Plugins[name] = pv
	}
	for _, r := range c.Routes {
		v.Routes = append(v.Routes, routeView(r))
	}
	if len(c.Topics) > 0 {
		v.Topics = make(map[string]topicView, len(c.Topics))
		for name, t := range c.Topics {
			v.Topics[name] = topicView{MaxAttempts: t.MaxAttempts, Backoff: formatDuration(t.Backoff)}
		}
	}
	return v
}

func rawData(n *yaml.Node) any {
	if n == nil {
		return nil
	}
	return toData(n, "", func(*yaml.Node, string, string) {})
}
