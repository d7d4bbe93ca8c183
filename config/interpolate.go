package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Interpolation runs on parsed string scalars, never on the file's text: a
// value from the environment can hold newlines, colons or braces and still
// only ever be that one string. It cannot add keys or change types.

// interpolate replaces placeholders in every string value under n (keys are
// left alone), marks the scalars it changed, and reports problems.
func (l *loader) interpolate(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if path == "" && strings.HasPrefix(key, "x-") {
				continue // anchors only: their aliases were copied and are interpolated where used
			}
			l.interpolate(n.Content[i+1], joinPath(path, key))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			l.interpolate(c, indexPath(path, i))
		}
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" || !strings.Contains(n.Value, "${") {
			return
		}
		out, expanded, unset, problems := expand(n.Value, l.lookupEnv)
		for _, p := range problems {
			l.fail(n, path, "%s", p)
		}
		if len(problems) > 0 {
			return
		}
		if len(unset) > 0 {
			// The message quotes only the variable's name: not redacted
			// (l.fail would hide "NAME=…" as if it were a credential).
			deferred := l.deferEnv && !neededEverywhere(path)
			for _, name := range unset {
				v := unsetVar{FieldError{File: l.origin[n], Line: n.Line, Path: path}, name}
				if deferred {
					l.unset = append(l.unset, v)
				} else {
					l.errs = append(l.errs, v.err())
				}
			}
			if deferred {
				// Left as written; from the environment, as far as the
				// checks are concerned, and not checked (l.fail).
				l.interpolated[n], l.unresolved[n] = true, true
			}
			return
		}
		n.Value = out
		if expanded {
			// The environment is text: a value from it stays a string
			// (no "007" becoming 7), whatever it looks like.
			n.Tag = "!!str"
			l.interpolated[n] = true
		}
	}
}

// unsetVar is a placeholder whose variable, name, is not set: where it
// is (at, without a message).
type unsetVar struct {
	at   FieldError
	name string
}

// err is the error Load gives for v.
func (v unsetVar) err() FieldError {
	fe := v.at
	fe.Msg = fmt.Sprintf("environment variable %s is not set: export %s=… or use ${%s:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)", v.name, v.name, v.name)
	return fe
}

// Unset lists the ${VAR} placeholders LoadDeferred left as written because
// their variable is not set in this process's environment, each as the
// error Load gives for it; none after Load, which refuses them.
func (c *Config) Unset() []FieldError {
	out := make([]FieldError, len(c.unset))
	for i, v := range c.unset {
		out[i] = v.err()
	}
	return out
}

// UnsetWarnings are the placeholders of Unset as warnings for a process
// that only checks the config (config check): the daemon is the one that
// needs them, in its own environment.
func (c *Config) UnsetWarnings() []FieldError {
	out := make([]FieldError, len(c.unset))
	for i, v := range c.unset {
		out[i] = v.at
		out[i].Msg = fmt.Sprintf("environment variable %s is not set in this shell: the daemon needs it in its own environment (with systemd: EnvironmentFile=, see docs/running-as-a-service.md); a daemon started from this shell would refuse the config", v.name)
	}
	return out
}

// UnsetFor is Unset without the placeholders a process running jobs of the
// named plugins does not use: those of the secrets, tokens, webhooks and api
// sections (only the daemon's listeners use them) and of other plugins'
// entries. What is left must be set before this process runs those jobs.
func (c *Config) UnsetFor(plugins ...string) []FieldError {
	var out []FieldError
	for _, v := range c.unset {
		if usedBy(v.at.Path, plugins) {
			out = append(out, v.err())
		}
	}
	return out
}

// UnsetBehind names the variables of Unset whose values a Settings path
// (a Difference's) depends on: a difference there may be only that this
// process does not know them (the daemon applied their values).
func (c *Config) UnsetBehind(settingsPath string) []string {
	var names []string
	for _, v := range c.unset {
		p := settingsPathOf(v.at.Path)
		if (settingsPath == p || strings.HasPrefix(settingsPath, p+".") || strings.HasPrefix(settingsPath, p+"[") ||
			strings.HasPrefix(p, settingsPath+".") || strings.HasPrefix(p, settingsPath+"[")) && !slices.Contains(names, v.name) {
			names = append(names, v.name)
		}
	}
	return names
}

// settingsPathOf is where Settings records the value at a config path:
// the sections, the tokens' keys and plugins' config maps by hash.
func settingsPathOf(path string) string {
	switch section := topKey(path); section {
	case "secrets", "tokens", "webhooks", "api", "pipelines":
		return "sections." + section
	case "plugins":
		if before, _, ok := strings.Cut(path, ".config."); ok {
			return before + ".config_hash"
		}
	}
	return path
}

// topKey is the top-level key of a dotted config path.
func topKey(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// usedBy reports whether the value at path is used by a process that runs
// jobs of plugins (and is not the daemon).
func usedBy(path string, plugins []string) bool {
	switch topKey(path) {
	case "secrets", "tokens", "webhooks", "api":
		return false
	case "plugins":
		return slices.ContainsFunc(plugins, func(name string) bool {
			return path == "plugins."+name || strings.HasPrefix(path, "plugins."+name+".")
		})
	}
	return true
}

// neededEverywhere reports whether the value at path is needed by every
// command that loads the config, so its variables must be set even where
// the others are deferred: the state directory, the plugin roots and the
// includes say where everything else is.
func neededEverywhere(path string) bool {
	for _, key := range []string{"state_dir", "plugin_roots", "include"} {
		if path == key || strings.HasPrefix(path, key+"[") {
			return true
		}
	}
	return false
}

// expand replaces ${VAR} with the variable's value and ${VAR:-default} with
// the value, or default when the variable is unset or empty. "$${" is a
// literal "${". It reports whether any variable was expanded, the names of
// the variables that are not set, and a ready-to-print problem for each
// placeholder that is not well formed.
func expand(s string, lookupEnv func(string) (string, bool)) (out string, expanded bool, unset, problems []string) {
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			problems = append(problems, `unterminated "${": close it with "}", or write "$${" for a literal "${"`)
			break
		}
		expr := s[i+2 : i+2+end]
		i += 2 + end + 1
		name, def, hasDef := strings.Cut(expr, ":-")
		switch {
		case !validVarName(name):
			problems = append(problems, fmt.Sprintf("invalid placeholder \"${%s}\": write ${NAME} or ${NAME:-default}, NAME being letters, digits and _ not starting with a digit (\"$${\" for a literal \"${\")", expr))
			continue
		case hasDef && strings.Contains(def, "${"):
			problems = append(problems, fmt.Sprintf("placeholder \"${%s}\": a default cannot contain another ${…}; use a literal default", name))
			continue
		}
		v, ok := lookupEnv(name)
		if hasDef && v == "" {
			v, ok = def, true
		}
		if !ok {
			unset = append(unset, name)
			continue
		}
		b.WriteString(v)
		expanded = true
	}
	return b.String(), expanded, unset, problems
}

// escapePlaceholders writes s so that expand gives it back as it is: every
// "${" becomes "$${".
func escapePlaceholders(s string) string { return strings.ReplaceAll(s, "${", "$${") }

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'A' <= r && r <= 'Z', 'a' <= r && r <= 'z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
