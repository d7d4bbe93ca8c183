package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Operators of a condition.
var (
	pathOps  = []string{"exists", "eq", "neq", "in", "gt", "gte", "lt", "lte", "contains", "startswith", "endswith", "regex"}
	groupOps = []string{"all", "any", "not"}
)

// Roots a condition's or template's path may start with.
var roots = []string{"payload", "context", "config"}

// condition compiles an if: {path, op, value}, or {all|any: [...]}, {not: {...}}.
func (b *build) condition(n *yaml.Node, path string) *Condition {
	const form = "write if: {path: payload.x, op: eq, value: 1}, or {all: [...]}, {any: [...]}, {not: {...}}"
	if n.Kind != yaml.MappingNode {
		b.fail(n, path, "must be a mapping: "+form)
		return nil
	}
	for _, op := range groupOps {
		v := value(n, op)
		if v == nil {
			continue
		}
		if len(n.Content) != 2 {
			b.fail(n, path, fmt.Sprintf("%s: takes no other key beside it: nest the other conditions inside it", op))
			return nil
		}
		c := &Condition{Op: op}
		if op == "not" {
			if inner := b.condition(v, path+".not"); inner != nil {
				c.Of = []*Condition{inner}
			}
			return c
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			b.fail(v, path+"."+op, "must be a non-empty list of conditions: "+form)
			return nil
		}
		for i, item := range v.Content {
			if inner := b.condition(item, fmt.Sprintf("%s.%s[%d]", path, op, i)); inner != nil {
				c.Of = append(c.Of, inner)
			}
		}
		return c
	}
	fields := b.keys(n, path, []string{"path", "op", "value"}, form)
	c := &Condition{}
	opNode, pathNode, valueNode := fields["op"], fields["path"], fields["value"]
	if opNode == nil {
		b.fail(n, path+".op", "missing: give one of "+strings.Join(append(slices.Clone(pathOps), groupOps...), ", "))
		return nil
	}
	c.Op = opNode.Value
	if !slices.Contains(pathOps, c.Op) {
		b.fail(opNode, path+".op", fmt.Sprintf("unknown operator %q%s: use one of %s (or all, any, not as keys)", c.Op, didYouMean(c.Op, pathOps), strings.Join(pathOps, ", ")))
		return nil
	}
	if pathNode == nil {
		b.fail(n, path+".path", "missing: give the value to test, e.g. path: payload.size (payload.*, context.* or config.*)")
		return nil
	}
	c.Path = b.refPath(pathNode, path+".path")
	if c.Op == "exists" {
		if valueNode != nil {
			b.fail(valueNode, path+".value", "exists takes no value: remove value:")
		}
		return c
	}
	if valueNode == nil {
		b.fail(n, path+".value", fmt.Sprintf("missing: %s compares the path with a value: give value:", c.Op))
		return nil
	}
	raw, err := toJSON(valueNode)
	if err != nil {
		b.fail(valueNode, path+".value", err.Error())
		return nil
	}
	c.Value = raw
	v := decode(raw)
	switch c.Op {
	case "in":
		if _, ok := v.([]any); !ok {
			b.fail(valueNode, path+".value", "in takes a list: write value: [a, b, c]")
		}
	case "gt", "gte", "lt", "lte":
		if !isNumber(v) && !isString(v) {
			b.fail(valueNode, path+".value", c.Op+" compares with a number (or a string, compared as text): give one")
		}
	case "startswith", "endswith":
		if !isString(v) {
			b.fail(valueNode, path+".value", c.Op+" takes a string: quote the value")
		}
	case "regex":
		s, ok := v.(string)
		if !ok {
			b.fail(valueNode, path+".value", "regex takes a string: quote the pattern")
			break
		}
		re, err := regexp.Compile(s)
		if err != nil {
			b.fail(valueNode, path+".value", fmt.Sprintf("invalid regex %q: %v: fix the pattern (Go RE2 syntax, see https://pkg.go.dev/regexp/syntax)", s, unwrapRegexpError(err)))
			break
		}
		c.re = re
	}
	return c
}

// unwrapRegexpError is the part of a regexp error after its "error parsing
// regexp: " prefix.
func unwrapRegexpError(err error) string {
	return strings.TrimPrefix(err.Error(), "error parsing regexp: ")
}

// refPath reads a path into the scope: payload.x.y, context.x or config.x.
func (b *build) refPath(n *yaml.Node, path string) string {
	s := b.str(n, path, "a path like payload.size, context.web.url or config.threshold")
	if s == "" {
		return ""
	}
	if !validRef(s) {
		b.fail(n, path, fmt.Sprintf("invalid path %q: start it with payload., context. or config. and separate keys with dots, e.g. payload.size", s))
		return ""
	}
	return s
}

// validRef reports whether s is root or root.key.key… with a known root.
func validRef(s string) bool {
	parts := strings.Split(s, ".")
	if !slices.Contains(roots, parts[0]) {
		return false
	}
	return !slices.Contains(parts[1:], "")
}

// Eval evaluates c over scope.
func (c *Condition) eval(scope Scope) (bool, error) {
	switch c.Op {
	case "all":
		for _, o := range c.Of {
			if ok, err := o.eval(scope); err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case "any":
		for _, o := range c.Of {
			if ok, err := o.eval(scope); err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case "not":
		if len(c.Of) != 1 {
			return false, fmt.Errorf("condition not: takes one condition, has %d", len(c.Of))
		}
		ok, err := c.Of[0].eval(scope)
		return !ok, err
	}
	got, found := scope.lookup(c.Path)
	return c.test(got, found)
}

// test applies c's operator (not all/any/not) to the value at its path.
func (c *Condition) test(got any, found bool) (bool, error) {
	if c.Op == "exists" {
		return found && got != nil, nil
	}
	want := decode(c.Value)
	switch c.Op {
	case "eq":
		return found && equal(got, want), nil
	case "neq":
		return !found || !equal(got, want), nil
	case "in":
		list, ok := want.([]any)
		if !ok {
			return false, fmt.Errorf("condition %s in: value is not a list", c.Path)
		}
		return found && slices.ContainsFunc(list, func(w any) bool { return equal(got, w) }), nil
	case "gt", "gte", "lt", "lte":
		cmp, ok := compare(got, want)
		if !found || !ok {
			return false, nil
		}
		switch c.Op {
		case "gt":
			return cmp > 0, nil
		case "gte":
			return cmp >= 0, nil
		case "lt":
			return cmp < 0, nil
		default:
			return cmp <= 0, nil
		}
	case "contains":
		switch g := got.(type) {
		case string:
			w, ok := want.(string)
			return ok && strings.Contains(g, w), nil
		case []any:
			return slices.ContainsFunc(g, func(item any) bool { return equal(item, want) }), nil
		}
		return false, nil
	case "startswith", "endswith":
		g, ok1 := got.(string)
		w, ok2 := want.(string)
		if !ok1 || !ok2 {
			return false, nil
		}
		if c.Op == "startswith" {
			return strings.HasPrefix(g, w), nil
		}
		return strings.HasSuffix(g, w), nil
	case "regex":
		re := c.re
		if re == nil {
			pattern, _ := want.(string)
			var err error
			if re, err = regexp.Compile(pattern); err != nil {
				return false, fmt.Errorf("condition %s regex: %w", c.Path, err)
			}
		}
		g, ok := got.(string)
		return ok && re.MatchString(g), nil
	}
	return false, fmt.Errorf("condition on %s: unknown operator %q", c.Path, c.Op)
}

// String is the condition as one line: "payload.size gt 10", "all(…, …)".
func (c *Condition) String() string {
	switch c.Op {
	case "all", "any", "not":
		parts := make([]string, len(c.Of))
		for i, o := range c.Of {
			parts[i] = o.String()
		}
		return c.Op + "(" + strings.Join(parts, ", ") + ")"
	case "exists":
		return c.Path + " exists"
	}
	return c.Path + " " + c.Op + " " + string(c.Value)
}

// lookup returns the value at a dotted path (payload.a.b) of scope.
func (s Scope) lookup(path string) (any, bool) {
	parts := strings.Split(path, ".")
	cache := s.decoded
	if cache == nil {
		cache = &decodedScope{} // decoded for this read only
	}
	switch parts[0] {
	case "payload":
		return walk(cache.payload.of(s.Payload), parts[1:])
	case "context":
		return walk(cache.context.of(s.Context), parts[1:])
	case "config":
		return walk(cache.config.of(s.Config), parts[1:])
	}
	return nil, false
}

// decodedScope holds the decoded documents of a Scope.
type decodedScope struct {
	payload, context, config decodedDocument
}

// decodedDocument is one document's decoded form and the bytes it was
// decoded from (a Scope copied and given another document decodes again).
type decodedDocument struct {
	raw   json.RawMessage
	value any
	done  bool
}

// of returns raw decoded, from the cache when it holds raw's decoding.
func (d *decodedDocument) of(raw json.RawMessage) any {
	if d.done && sameBytes(d.raw, raw) {
		return d.value
	}
	d.raw, d.value, d.done = raw, decode(raw), true
	return d.value
}

// sameBytes says whether a and b are the same slice (not only equal bytes).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// withCache returns s with a cache of its decoded documents, shared by
// its copies.
func (s Scope) withCache() Scope {
	if s.decoded == nil {
		s.decoded = &decodedScope{}
	}
	return s
}

// walk follows keys into nested objects.
func walk(v any, keys []string) (any, bool) {
	if v == nil && len(keys) == 0 {
		return nil, false // an absent document
	}
	for _, k := range keys {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// decode parses JSON keeping numbers exact (json.Number); nil or invalid
// JSON is nil.
func decode(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	return v
}

func isNumber(v any) bool { _, ok := v.(json.Number); return ok }
func isString(v any) bool { _, ok := v.(string); return ok }

// compare orders two numbers numerically or two strings as text.
func compare(a, b any) (int, bool) {
	if x, ok := a.(json.Number); ok {
		if y, ok := b.(json.Number); ok {
			fx, okx := new(big.Float).SetString(x.String())
			fy, oky := new(big.Float).SetString(y.String())
			if okx && oky {
				return fx.Cmp(fy), true
			}
		}
		return 0, false
	}
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	}
	return 0, false
}

// equal compares two decoded JSON values; numbers compare numerically.
func equal(a, b any) bool {
	if cmp, ok := compare(a, b); ok {
		return cmp == 0
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, equal)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			if yv, ok := y[k]; !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	case json.Number, string:
		return false // compare said they differ in kind
	}
	return a == b
}

// UnmarshalJSON reads a condition as MarshalJSON's default form writes it
// and compiles a regex operand once, here, as the compiler does: a pipeline
// read back from the ledger does not compile it per evaluation. A pattern
// that does not compile is left for Eval to report.
func (c *Condition) UnmarshalJSON(data []byte) error {
	type plain Condition
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*c = Condition(p)
	if c.Op == "regex" {
		if pattern, ok := decode(c.Value).(string); ok {
			c.re, _ = regexp.Compile(pattern)
		}
	}
	return nil
}
