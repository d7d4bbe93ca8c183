package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// InstalledPlugin is what plugin discovery found about one loaded plugin,
// for Check.
type InstalledPlugin struct {
	// Commands are the commands its manifest declares.
	Commands []string
	// ConfigKeys are the config keys its manifest declares, required and
	// optional; nil when it declares none (then any key may be right).
	ConfigKeys []string
	// Emits are the event types its manifest says its commands emit; nil
	// when it says none (then any event type may be right).
	Emits []string
}

// Check cross-checks c against the plugins discovery loaded (installed, by
// name) and the names of those it skipped. Errors are what would fail when
// the daemon runs: a route from or to a plugin that is not loaded, a route
// to a command its plugin lacks, a plugins: entry for a plugin that does
// not exist (unless its runs_on says remote workers serve it). Warnings are what is probably a mistake but may be meant: a
// route from or to a disabled plugin or for an event type the plugin does
// not declare, a config key the plugin does not declare, a disabled entry
// for a plugin that does not exist. Both come sorted by file and line.
func (c *Config) Check(installed map[string]InstalledPlugin, skipped []string) (errs, warnings []FieldError) {
	loaded := make([]string, 0, len(installed))
	for name := range installed {
		loaded = append(loaded, name)
	}
	sort.Strings(loaded)
	at := func(n *yaml.Node, path, format string, args ...any) FieldError {
		fe := FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
		if n != nil {
			fe.File, fe.Line = c.origin[n], n.Line
		}
		return fe
	}
	// missing says that no plugin named name is loaded, so what follows.
	missing := func(name, so string) string {
		if slices.Contains(skipped, name) {
			return fmt.Sprintf("plugin %q was skipped (the reason is among the errors), so %s", name, so)
		}
		return fmt.Sprintf("no plugin named %q was found, so %s%s (see: ductile plugin list)", name, so, didYouMean(name, loaded))
	}

	for i, r := range c.Routes {
		var n *yaml.Node
		if i < len(c.routeNodes) {
			n = c.routeNodes[i]
		}
		path := indexPath("routes", i)
		from, fromOK := installed[r.From]
		switch {
		case strings.HasPrefix(r.From, TopicRoutePrefix):
			// A route from a topic: any message published to it fires it.
		case !fromOK && c.Plugin(r.From).RunsOn.Remote():
			// Served by remote workers: known from their registrations.
		case !fromOK:
			errs = append(errs, at(fieldValue(n, "from"), path+".from", "%s", missing(r.From, "this route can never fire")))
		case !c.Plugin(r.From).Enabled:
			warnings = append(warnings, at(fieldValue(n, "from"), path+".from", "plugin %q is disabled (plugins.%s.enabled: false): the route cannot fire until it is enabled", r.From, r.From))
		case from.Emits != nil && !slices.Contains(from.Emits, r.EventType):
			warnings = append(warnings, at(fieldValue(n, "event_type"), path+".event_type", "plugin %q does not declare emitting %q%s (its manifest declares: %s)", r.From, r.EventType, didYouMean(r.EventType, from.Emits), strings.Join(from.Emits, ", ")))
		}
		to, toOK := installed[r.To]
		switch {
		case strings.HasPrefix(r.To, TopicRoutePrefix):
			// A route to a topic: the event's payload is published as a message.
		case !toOK && c.Plugin(r.To).RunsOn.Remote():
			// Served by remote workers: the route's command is checked against
			// their registrations when it fires.
		case !toOK:
			errs = append(errs, at(fieldValue(n, "to"), path+".to", "%s", missing(r.To, "every event this route matches would make a job that fails at once")))
		case !slices.Contains(to.Commands, r.Command):
			errs = append(errs, at(fieldValue(n, "command"), path+".command", "plugin %q has no command %q%s (its commands: %s)", r.To, r.Command, didYouMean(r.Command, to.Commands), strings.Join(to.Commands, ", ")))
		case !c.Plugin(r.To).Enabled:
			warnings = append(warnings, at(fieldValue(n, "to"), path+".to", "plugin %q is disabled (plugins.%s.enabled: false): jobs this route makes fail at once", r.To, r.To))
		}
	}

	warnings = append(warnings, c.cycleWarnings(at)...)
	webhookErrs, webhookWarnings := c.checkWebhooks(installed, at, missing)
	errs, warnings = append(errs, webhookErrs...), append(warnings, webhookWarnings...)

	names := make([]string, 0, len(c.Plugins))
	for name := range c.Plugins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, path := c.Plugins[name], joinPath("plugins", name)
		plugin, ok := installed[name]
		switch {
		case !ok && slices.Contains(skipped, name):
			// Reported with the skipped plugins.
		case !ok && p.RunsOn.Remote():
			// runs_on: remote or any: remote workers serve it; it need not be
			// installed here.
		case !ok && p.Enabled:
			errs = append(errs, at(c.pluginKeys[name], path, "%s", missing(name, "these settings apply to nothing")))
		case !ok:
			warnings = append(warnings, at(c.pluginKeys[name], path, "%s", missing(name, "this entry does nothing (it is disabled: harmless)")))
		default:
			if plugin.ConfigKeys != nil {
				warnings = append(warnings, c.undeclaredKeys(name, plugin.ConfigKeys, at)...)
			}
			e, w := c.checkSchedules(name, plugin, at)
			errs, warnings = append(errs, e...), append(warnings, w...)
		}
	}
	sortFieldErrors(errs, c.Files, c.Dir)
	sortFieldErrors(warnings, c.Files, c.Dir)
	return errs, warnings
}

// checkSchedules checks the schedule entries of plugin name against its
// manifest: a command it does not declare is an error; schedules of a
// disabled plugin are a warning.
func (c *Config) checkSchedules(name string, plugin InstalledPlugin, at func(*yaml.Node, string, string, ...any) FieldError) (errs, warnings []FieldError) {
	nodes, p := c.schedules[name], c.Plugins[name]
	if nodes == nil || len(p.Schedules) == 0 {
		return nil, nil
	}
	if !p.Enabled {
		warnings = append(warnings, at(nodes.list, joinPath(joinPath("plugins", name), "schedules"),
			"plugin %q is disabled (plugins.%s.enabled: false): its schedules do not fire until it is enabled", name, name))
	}
	for i, e := range p.Schedules {
		if slices.Contains(plugin.Commands, e.Command) {
			continue
		}
		en := nodes.entries[i]
		if en.keys["command"] == nil {
			errs = append(errs, at(en.entry, en.path, "runs %s (the default command), but plugin %q has no command %s (its commands: %s): set command: to one of them",
				e.Command, name, e.Command, strings.Join(plugin.Commands, ", ")))
			continue
		}
		errs = append(errs, at(en.keys["command"], en.path+".command", "plugin %q has no command %q%s (its commands: %s)",
			name, e.Command, didYouMean(e.Command, plugin.Commands), strings.Join(plugin.Commands, ", ")))
	}
	return errs, warnings
}

// undeclaredKeys warns of each key of plugins.<name>.config that the
// plugin's manifest does not declare.
func (c *Config) undeclaredKeys(name string, declared []string, at func(*yaml.Node, string, string, ...any) FieldError) []FieldError {
	n := c.pluginConfig[name]
	if n == nil {
		return nil
	}
	var out []FieldError
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if slices.Contains(declared, k.Value) {
			continue
		}
		out = append(out, at(k, joinPath(joinPath("plugins", name), "config")+"."+k.Value,
			"plugin %q does not declare this key%s (its config_keys: %s); it is passed on, but the plugin may never read it",
			name, didYouMean(k.Value, declared), strings.Join(declared, ", ")))
	}
	return out
}

// Unused returns a warning for each section the config sets that nothing
// in this version reads yet. There is none now (pipelines are compiled by
// package pipeline, and config check reports their errors); it stays for
// the sections the spec adds before their features.
func (c *Config) Unused() []FieldError {
	return nil
}

// didYouMean is ": did you mean X?" for the name in names closest to word,
// or "".
func didYouMean(word string, names []string) string {
	if s := Suggest(word, names); s != "" {
		return fmt.Sprintf(": did you mean %s?", s)
	}
	return ""
}

// fieldValue returns the value of key in mapping n, else n itself.
func fieldValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return n
}

// sortFieldErrors orders errs by file in load order, then line.
func sortFieldErrors(errs []FieldError, files []string, dir string) {
	order := map[string]int{}
	for i, f := range files {
		order[displayPath(dir, f)] = i
	}
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i], errs[j]
		if oa, ob := order[a.File], order[b.File]; oa != ob {
			return oa < ob
		}
		return a.Line < b.Line
	})
}
