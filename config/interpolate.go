package config

import (
	"fmt"
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
		out, expanded, problems := expand(n.Value, l.lookupEnv)
		for _, p := range problems {
			l.fail(n, path, "%s", p)
		}
		if len(problems) > 0 {
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

// expand replaces ${VAR} with the variable's value and ${VAR:-default} with
// the value, or default when the variable is unset or empty. "$${" is a
// literal "${". It reports whether any variable was expanded, and a
// ready-to-print problem for each placeholder it could not replace.
func expand(s string, lookupEnv func(string) (string, bool)) (out string, expanded bool, problems []string) {
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
			problems = append(problems, fmt.Sprintf("environment variable %s is not set: export %s=… or use ${%s:-default} (a running daemon reads the environment it was started with: set it there and restart the daemon; exporting it in this shell does not reach it)", name, name, name))
			continue
		}
		b.WriteString(v)
		expanded = true
	}
	return b.String(), expanded, problems
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
