package config

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/schedule"
)

// decode walks the merged tree into cfg, which holds the defaults, and
// records every problem. Unknown keys are errors everywhere except inside
// plugins.<name>.config and the sections kept raw.
func (l *loader) decode(root *yaml.Node, cfg *Config) {
	l.object(root, "", "", l.topLevel(cfg)...)
}

// topLevel is the known top-level keys and where each one's value goes.
func (l *loader) topLevel(cfg *Config) []field {
	return []field{
		{"state_dir", func(v *yaml.Node, path string) {
			cfg.StateDir, _ = l.path(v, path)
		}},
		{"plugin_roots", func(v *yaml.Node, path string) {
			if v.Kind != yaml.SequenceNode {
				l.fail(v, path, "must be a list of directories, e.g. plugin_roots: [./plugins]")
				return
			}
			for i, item := range v.Content {
				if p, ok := l.path(item, indexPath(path, i)); ok {
					cfg.PluginRoots = append(cfg.PluginRoots, p)
				}
			}
		}},
		{"service", func(v *yaml.Node, path string) { l.service(v, path, &cfg.Service) }},
		{"plugins", func(v *yaml.Node, path string) { l.plugins(v, path, cfg) }},
		{"routes", func(v *yaml.Node, path string) {
			if v.Kind != yaml.SequenceNode {
				l.fail(v, path, "must be a list of routes, e.g. - {from: echo, event_type: echo.done, to: notify}")
				return
			}
			for i, item := range v.Content {
				if r, ok := l.route(item, indexPath(path, i)); ok {
					cfg.Routes = append(cfg.Routes, r)
					cfg.routeNodes = append(cfg.routeNodes, item)
				}
			}
		}},
		{"pipelines", func(v *yaml.Node, _ string) { cfg.Pipelines = v }},
		{"topics", func(v *yaml.Node, path string) { l.topics(v, path, cfg) }},
		{"api", func(v *yaml.Node, path string) { l.apiServer(v, path, cfg) }},
		{"webhooks", func(v *yaml.Node, path string) { cfg.Webhooks = v; l.webhooks(v, path, cfg) }},
		{"tokens", func(v *yaml.Node, path string) { l.tokens(v, path, cfg) }},
		{"secrets", func(v *yaml.Node, path string) { l.secrets(v, path, cfg) }},
		{"include", func(*yaml.Node, string) {}}, // read as each file is loaded (loader.loadFile)
	}
}

// topLevelKeys lists the keys a config file may have at its top level, the
// x- prefix aside.
func topLevelKeys() []string {
	var names []string
	for _, f := range (&loader{}).topLevel(nil) {
		names = append(names, f.name)
	}
	return names
}

func (l *loader) service(n *yaml.Node, path string, s *Service) {
	l.object(n, path, "",
		field{"max_workers", func(v *yaml.Node, path string) {
			if i, ok := l.integer(v, path); ok {
				if i < 1 {
					l.fail(v, path, "must be ≥ 1, got %d (1 runs one job at a time; leave it out for the default)", i)
					return
				}
				s.MaxWorkers = i
			}
		}},
		field{"dedupe_ttl", func(v *yaml.Node, path string) { l.duration(v, path, &s.DedupeTTL) }},
		field{"job_log_retention", func(v *yaml.Node, path string) { l.duration(v, path, &s.JobLogRetention) }},
		field{"allow_symlinks", func(v *yaml.Node, path string) { l.boolean(v, path, &s.AllowSymlinks) }},
		field{"max_route_depth", func(v *yaml.Node, path string) {
			if i, ok := l.integer(v, path); ok {
				if i < 1 {
					l.fail(v, path, "must be ≥ 1, got %d (the deepest a routed job may be; a job enqueued by a producer is depth 0)", i)
					return
				}
				s.MaxRouteDepth = i
			}
		}},
		field{"max_hook_depth", func(v *yaml.Node, path string) {
			if i, ok := l.integer(v, path); ok {
				if i < 1 {
					l.fail(v, path, "must be ≥ 1, got %d (how many lifecycle hooks may chain; a job no hook started is depth 0)", i)
					return
				}
				s.MaxHookDepth = i
			}
		}},
		field{"lease_period", func(v *yaml.Node, path string) {
			var d time.Duration
			l.duration(v, path, &d)
			if d == 0 {
				return // refused by duration
			}
			if d < MinLeasePeriod || d > MaxLeasePeriod {
				l.fail(v, path, "must be between %s and %s, got %s (how long a remote worker's claim holds a job; workers renew every third of it)",
					formatDuration(MinLeasePeriod), formatDuration(MaxLeasePeriod), v.Value)
				return
			}
			s.LeasePeriod = d
		}},
	)
}

func (l *loader) plugins(n *yaml.Node, path string, cfg *Config) {
	if n.Kind != yaml.MappingNode {
		l.fail(n, path, "must be a mapping of plugin name to settings, e.g. plugins: {echo: {enabled: true}}")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		ppath := joinPath(path, name)
		if k.Kind != yaml.ScalarNode || name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			l.fail(k, ppath, "invalid plugin name %q: use the plugin's directory name", name)
			continue
		}
		p := DefaultPlugin()
		cfg.pluginKeys[name] = k
		l.object(v, ppath, "settings for the plugin itself go under config:",
			field{"enabled", func(v *yaml.Node, path string) { l.boolean(v, path, &p.Enabled) }},
			field{"parallelism", func(v *yaml.Node, path string) {
				if i, ok := l.integer(v, path); ok {
					if i < 0 {
						l.fail(v, path, "must be ≥ 0, got %d (0 means no cap beyond service.max_workers)", i)
						return
					}
					p.Parallelism = i
				}
			}},
			field{"retry", func(v *yaml.Node, path string) {
				l.object(v, path, "",
					field{"max_attempts", func(v *yaml.Node, path string) {
						if i, ok := l.integer(v, path); ok {
							if i < 1 {
								l.fail(v, path, "must be ≥ 1, got %d (it counts the first attempt; 1 means no retries)", i)
								return
							}
							p.Retry.MaxAttempts = i
						}
					}},
					field{"backoff_base", func(v *yaml.Node, path string) { l.duration(v, path, &p.Retry.BackoffBase) }},
				)
			}},
			field{"timeouts", func(v *yaml.Node, path string) {
				l.object(v, path, "commands other than poll, health and init use handle's timeout",
					field{"poll", func(v *yaml.Node, path string) { l.duration(v, path, &p.Timeouts.Poll) }},
					field{"handle", func(v *yaml.Node, path string) { l.duration(v, path, &p.Timeouts.Handle) }},
					field{"health", func(v *yaml.Node, path string) { l.duration(v, path, &p.Timeouts.Health) }},
					field{"init", func(v *yaml.Node, path string) { l.duration(v, path, &p.Timeouts.Init) }},
				)
			}},
			field{"config", func(v *yaml.Node, path string) {
				if v.Kind != yaml.MappingNode {
					l.fail(v, path, "must be a mapping of settings passed to the plugin, e.g. config: {mode: ok}")
					return
				}
				m, _ := toData(v, path, func(n *yaml.Node, path, msg string) { l.fail(n, path, "%s", msg) }).(map[string]any)
				p.Config = m
				cfg.pluginConfig[name] = v
			}},
			field{"max_outstanding_polls", func(v *yaml.Node, path string) {
				if i, ok := l.integer(v, path); ok {
					if i < 1 {
						l.fail(v, path, "must be ≥ 1, got %d (how many poll jobs of the plugin may be queued or running at once; the scheduler adds none beyond it)", i)
						return
					}
					p.MaxOutstandingPolls = i
				}
			}},
			field{"schedules", func(v *yaml.Node, path string) { l.schedules(v, path, name, &p, cfg) }},
			field{"circuit_breaker", func(v *yaml.Node, path string) { l.circuitBreaker(v, path, &p.CircuitBreaker) }},
			field{"notify_on_complete", func(v *yaml.Node, path string) { l.boolean(v, path, &p.NotifyOnComplete) }},
			field{"runs_on", func(v *yaml.Node, path string) {
				if s, ok := l.str(v, path); ok {
					switch RunsOn(s) {
					case RunsLocal, RunsRemote, RunsAny:
						p.RunsOn = RunsOn(s)
					default:
						l.fail(v, path, "must be local, remote or any, got %q (local: the daemon's own workers; remote: workers that claim over the API; any: both)", s)
					}
				}
			}},
		)
		l.checkPollGuard(ppath, p, cfg.schedules[name])
		cfg.Plugins[name] = p
	}
}

func (l *loader) route(n *yaml.Node, path string) (Route, bool) {
	r := Route{Command: DefaultRouteCommand}
	set := map[string]bool{}
	str := func(dst *string, fix string) func(v *yaml.Node, path string) {
		return func(v *yaml.Node, path string) {
			set[path] = true
			s, ok := l.str(v, path)
			if ok && s == "" {
				l.fail(v, path, "must not be empty: %s", fix)
				return
			}
			*dst = s
		}
	}
	const (
		fromFix  = "name the plugin that emits the event"
		eventFix = "give the event type to match exactly, e.g. echo.done"
		toFix    = "name the plugin that receives the event"
	)
	l.object(n, path, "",
		field{"from", str(&r.From, fromFix)},
		field{"event_type", str(&r.EventType, eventFix)},
		field{"to", str(&r.To, toFix)},
		field{"command", str(&r.Command, `leave it out for "handle"`)},
	)
	if n.Kind != yaml.MappingNode {
		return r, false
	}
	ok := true
	if topic, isTopic := strings.CutPrefix(r.From, TopicRoutePrefix); isTopic {
		// A route from a topic: its messages' publications (docs/topics.md).
		if !TopicName.MatchString(topic) {
			l.fail(fieldValue(n, "from"), joinPath(path, "from"), "invalid topic %q after topic:: 1 to 200 of A-Z a-z 0-9 . _ : -", topic)
			ok = false
		}
		switch r.EventType {
		case "":
			r.EventType = TopicRouteEvent
		case TopicRouteEvent:
		default:
			l.fail(fieldValue(n, "event_type"), joinPath(path, "event_type"), "a route from a topic matches its messages: leave event_type out (or %s)", TopicRouteEvent)
			ok = false
		}
	}
	if topic, isTopic := strings.CutPrefix(r.To, TopicRoutePrefix); isTopic && !TopicName.MatchString(topic) {
		l.fail(fieldValue(n, "to"), joinPath(path, "to"), "invalid topic %q after topic:: 1 to 200 of A-Z a-z 0-9 . _ : -", topic)
		ok = false
	}
	for _, req := range []struct{ key, val, fix string }{
		{"from", r.From, fromFix},
		{"event_type", r.EventType, eventFix},
		{"to", r.To, toFix},
	} {
		if req.val == "" {
			ok = false
			if p := joinPath(path, req.key); !set[p] {
				l.fail(n, p, "missing: %s", req.fix)
			}
		}
	}
	return r, ok && r.Command != ""
}

// field is one known key of a mapping and what to do with its value.
type field struct {
	name string
	set  func(v *yaml.Node, path string)
}

// object checks that n is a mapping of known keys and hands each non-empty
// value to its field. An empty (null) value keeps the default. hint is added
// to unknown-key errors.
func (l *loader) object(n *yaml.Node, path, hint string, fields ...field) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fail(n, path, "must be a mapping with keys %s", strings.Join(names, ", "))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if path == "" && strings.HasPrefix(k.Value, "x-") {
			continue // top-level x- keys hold YAML anchors for reuse
		}
		kpath := joinPath(path, k.Value)
		j := slices.Index(names, k.Value)
		if j < 0 {
			msg := "unknown key"
			if s := Suggest(k.Value, names); s != "" {
				msg += fmt.Sprintf(": did you mean %s?", s)
			}
			sorted := slices.Sorted(slices.Values(names))
			msg += fmt.Sprintf(" (valid keys: %s)", strings.Join(sorted, ", "))
			if hint != "" {
				msg += "; " + hint
			}
			l.fail(k, kpath, "%s", msg)
			continue
		}
		if isNull(v) {
			continue
		}
		fields[j].set(v, kpath)
	}
}

func (l *loader) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		l.fail(n, path, "must be a string")
		return "", false
	}
	return n.Value, true
}

// path reads a directory path: ~ expanded, relative to the config directory.
func (l *loader) path(n *yaml.Node, path string) (string, bool) {
	s, ok := l.str(n, path)
	if !ok {
		return "", false
	}
	if s == "" {
		l.fail(n, path, "must not be empty: give a directory, absolute or relative to the config file's directory")
		return "", false
	}
	p, err := expandHome(s)
	if err != nil {
		l.fail(n, path, "%v", err)
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(l.dir, p)
	}
	return filepath.Clean(p), true
}

// integer reads a whole number. A value from ${VAR} is a string and is
// parsed here.
func (l *loader) integer(n *yaml.Node, path string) (int, bool) {
	if n.Kind == yaml.ScalarNode {
		switch {
		case n.ShortTag() == "!!int":
			var i int
			if err := n.Decode(&i); err == nil {
				return i, true
			}
		case l.interpolated[n]:
			if i, err := strconv.Atoi(n.Value); err == nil {
				return i, true
			}
		}
	}
	l.fail(n, path, "must be a whole number, got %s", show(n))
	return 0, false
}

func (l *loader) boolean(n *yaml.Node, path string, dst *bool) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!bool" || l.interpolated[n]) {
		switch strings.ToLower(n.Value) {
		case "true":
			*dst = true
			return
		case "false":
			*dst = false
			return
		}
	}
	l.fail(n, path, "must be true or false, got %s", show(n))
}

// duration reads a positive duration: Go syntax, or days ("30d").
func (l *loader) duration(n *yaml.Node, path string, dst *time.Duration) {
	if n.Kind != yaml.ScalarNode {
		l.fail(n, path, "must be a duration like 90s, 15m, 2h30m or 7d")
		return
	}
	if tag := n.ShortTag(); tag == "!!int" || tag == "!!float" {
		l.fail(n, path, "must be a duration with a unit, like %ss, got %s", n.Value, n.Value)
		return
	}
	d, err := schedule.ParseDuration(n.Value)
	if err != nil {
		l.fail(n, path, "invalid duration %q: use a Go duration like 90s, 15m or 2h30m, or days like 7d", n.Value)
		return
	}
	if d <= 0 {
		l.fail(n, path, "must be greater than 0, got %s", n.Value)
		return
	}
	*dst = d
}

// show quotes a scalar for an error message, or names the node's kind.
func show(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(RedactString(n.Value))
}

// toData converts a parsed mapping, list or scalar into plain Go values
// (map[string]any, []any, string, bool, int, float64, nil) that encode to
// JSON for the plugin. Timestamps stay as written. report is called for
// values JSON cannot carry.
func toData(n *yaml.Node, path string, report func(n *yaml.Node, path, msg string)) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				report(k, path, "keys must be plain strings")
				continue
			}
			m[k.Value] = toData(v, joinPath(path, k.Value), report)
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = toData(c, indexPath(path, i), report)
		}
		return s
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!str", "!!timestamp":
			return n.Value
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return n.Value
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			report(n, path, fmt.Sprintf("%s cannot be passed to a plugin as JSON: quote it to pass a string", n.Value))
			return nil
		}
		return v
	}
	return nil
}

// Suggest returns the name in names that word is most likely a misspelling
// of, or "" when none is close enough to say "did you mean". In order: the
// same name but for case, - for _ or a plural (Retries, max-workers and
// retries all mean retry or max_workers); then the nearest name within two
// edits, a swap of neighbours counting as one (at most one edit for a word
// of three letters or fewer); then a name of which word is one whole part,
// when only one name has it (workers: max_workers).
func Suggest(word string, names []string) string {
	w := normalizeName(word)
	if w == "" {
		return ""
	}
	for _, name := range names {
		if normalizeName(name) == w {
			return name
		}
	}
	best, bestDist := "", 3
	for _, name := range names {
		if d := editDistance(w, normalizeName(name)); d < bestDist && 2*d <= len(w) {
			best, bestDist = name, d
		}
	}
	if best != "" {
		return best
	}
	var part string
	for _, name := range names {
		if len(w) >= 3 && slices.Contains(strings.Split(normalizeName(name), "_"), w) {
			if part != "" {
				return "" // a part of several names: no one guess
			}
			part = name
		}
	}
	return part
}

// normalizeName folds what does not tell names apart: case, - versus _,
// and a plural ending on each _-separated part.
func normalizeName(s string) string {
	parts := strings.Split(strings.ReplaceAll(strings.ToLower(s), "-", "_"), "_")
	for i, p := range parts {
		switch {
		case len(p) > 4 && strings.HasSuffix(p, "ies"):
			parts[i] = p[:len(p)-3] + "y"
		case len(p) > 3 && strings.HasSuffix(p, "s") && !strings.HasSuffix(p, "ss"):
			parts[i] = p[:len(p)-1]
		}
	}
	return strings.Join(parts, "_")
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbouring bytes.
func editDistance(a, b string) int {
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			rows[i][j] = min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				rows[i][j] = min(rows[i][j], rows[i-2][j-2]+1)
			}
		}
	}
	return rows[len(a)][len(b)]
}
