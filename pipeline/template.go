package pipeline

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// templatePattern finds {root.key…} references in a with: string. Braces
// around anything else ("{x}", "{ a }", JSON text) are left as they are.
var templatePattern = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*(?:\.[^{}\s.]+)*)\}`)

// with compiles a with: mapping: each value JSON, its templates checked.
func (b *build) with(n *yaml.Node, path string) map[string]json.RawMessage {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		b.fail(n, path, `must be a mapping of input keys to values, e.g. with: {url: "{payload.link}"}`)
		return nil
	}
	out := map[string]json.RawMessage{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		raw, err := toJSON(v)
		if err != nil {
			b.fail(v, path+"."+k.Value, err.Error())
			continue
		}
		for _, ref := range references(decode(raw)) {
			if !validRef(ref) {
				b.fail(v, path+"."+k.Value, fmt.Sprintf("template {%s} reads nothing: a template is {payload.x}, {context.x} or {config.x}", ref))
			}
		}
		out[k.Value] = raw
	}
	return out
}

// references lists the {…} references in the strings of v that look like
// dotted paths (those with a dot, or a bare root).
func references(v any) []string {
	var out []string
	switch x := v.(type) {
	case string:
		for _, m := range templatePattern.FindAllStringSubmatch(x, -1) {
			if strings.Contains(m[1], ".") || isRoot(m[1]) {
				out = append(out, m[1])
			}
		}
	case []any:
		for _, item := range x {
			out = append(out, references(item)...)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, references(x[k])...)
		}
	}
	return out
}

func isRoot(s string) bool { return s == "payload" || s == "context" || s == "config" }

// input builds the node's input payload from its with: templates.
func (n *Node) input(scope Scope) (json.RawMessage, error) {
	if n.With == nil {
		return scope.Payload, nil
	}
	out := make(map[string]any, len(n.With))
	for k, raw := range n.With {
		out[k] = render(decode(raw), scope)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("step %s: with: %w", n.ID, err)
	}
	return b, nil
}

// render fills the templates of v from scope: a string that is exactly one
// template takes the value as is (null when missing); templates inside a
// longer string are interpolated as text ("" when missing); lists and
// objects are rendered item by item; anything else is literal.
func render(v any, scope Scope) any {
	switch x := v.(type) {
	case string:
		if m := templatePattern.FindStringSubmatchIndex(x); m != nil && m[0] == 0 && m[1] == len(x) {
			ref := x[m[2]:m[3]]
			if validRef(ref) {
				got, _ := scope.lookup(ref)
				return got
			}
		}
		return templatePattern.ReplaceAllStringFunc(x, func(t string) string {
			ref := t[1 : len(t)-1]
			if !validRef(ref) {
				return t
			}
			got, found := scope.lookup(ref)
			if !found || got == nil {
				return ""
			}
			return text(got)
		})
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = render(item, scope)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			out[k] = render(item, scope)
		}
		return out
	}
	return v
}

// text is a value as it reads inside a string: strings and numbers as
// they are, anything else as JSON.
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}
