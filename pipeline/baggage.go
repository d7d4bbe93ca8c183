package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// baggage compiles a baggage: mapping: path: source claims, or the bulk
// form {from: payload.x, namespace: name}.
func (b *build) baggage(n *yaml.Node, path string) []Claim {
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		b.fail(n, path, "must be a mapping of context paths to sources (baggage: {web.url: payload.url}) or {from: payload.x, namespace: name}")
		return nil
	}
	from, namespace := value(n, "from"), value(n, "namespace")
	if from != nil || namespace != nil {
		fields := b.keys(n, path, []string{"from", "namespace"}, "bulk baggage is {from: payload.x, namespace: name}; claim single paths in a baggage: of their own form")
		if fields["namespace"] == nil {
			b.fail(n, path+".namespace", "missing: bulk baggage imports an object under a namespace you name: add namespace: <name> (it becomes context.<name>)")
			return nil
		}
		if fields["from"] == nil {
			b.fail(n, path+".from", "missing: say which object to import, e.g. from: payload.metadata")
			return nil
		}
		claim := Claim{From: b.source(fields["from"], path+".from"), Namespace: fields["namespace"].Value}
		if !validContextPath(claim.Namespace) {
			b.fail(fields["namespace"], path+".namespace", fmt.Sprintf("invalid namespace %q: use a name like whisper (dots nest: a.b)", claim.Namespace))
		}
		return []Claim{claim}
	}
	var out []Claim
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !validContextPath(k.Value) || strings.HasPrefix(k.Value, "context.") {
			b.fail(k, path+"."+k.Value, fmt.Sprintf("invalid context path %q: name the path under context without the prefix, e.g. web.url: payload.url", k.Value))
			continue
		}
		out = append(out, Claim{Path: k.Value, From: b.source(v, path+"."+k.Value)})
	}
	return out
}

// source reads where a claim takes its value: payload.x or context.x.
func (b *build) source(n *yaml.Node, path string) string {
	s := b.str(n, path, "a source like payload.url or context.web.url")
	if s != "" && !strings.HasPrefix(s, "payload.") && !strings.HasPrefix(s, "context.") && s != "payload" {
		b.fail(n, path, fmt.Sprintf("invalid source %q: claim a value of payload.* (the incoming event) or context.* (the inherited baggage), e.g. payload.url", s))
		return ""
	}
	if s != "" && !validRef(s) {
		b.fail(n, path, fmt.Sprintf("invalid source %q: separate keys with single dots", s))
	}
	return s
}

// validContextPath reports whether s is key(.key)* with no empty key.
func validContextPath(s string) bool {
	if s == "" {
		return false
	}
	for _, k := range strings.Split(s, ".") {
		if k == "" || strings.ContainsAny(k, " \t{}") {
			return false
		}
	}
	return true
}

// accrete applies the node's claims to scope.Context.
func (n *Node) accrete(scope Scope) (json.RawMessage, error) {
	if len(n.Baggage) == 0 {
		return scope.Context, nil
	}
	ctx, err := contextObject(scope.Context)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", n.ID, err)
	}
	for _, c := range n.Baggage {
		v, found := scope.lookup(c.From)
		if !found {
			continue // nothing to claim: the path is not in this event
		}
		path := c.Path
		if c.Namespace != "" {
			path = c.Namespace
		}
		if err := put(ctx, strings.Split(path, "."), v, n.ID, ""); err != nil {
			return nil, err
		}
	}
	return json.Marshal(ctx)
}

// contextObject decodes a context (nil: {}); it must be an object.
func contextObject(raw json.RawMessage) (map[string]any, error) {
	v := decode(raw)
	if v == nil {
		return map[string]any{}, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("context is not a JSON object: %s", raw)
	}
	return obj, nil
}

// put deep-accretes v at keys of ctx: a new path is added, objects merge
// key by key, the same value again is fine, another value for a path that
// is there is a *BaggageError (prefix is the path down to ctx).
func put(ctx map[string]any, keys []string, v any, node, prefix string) error {
	key := keys[0]
	path := key
	if prefix != "" {
		path = prefix + "." + key
	}
	old, there := ctx[key]
	if len(keys) > 1 {
		if !there {
			old = map[string]any{}
			ctx[key] = old
		}
		obj, ok := old.(map[string]any)
		if !ok {
			return baggageError(node, path, old, map[string]any{strings.Join(keys[1:], "."): v})
		}
		return put(obj, keys[1:], v, node, path)
	}
	if !there {
		ctx[key] = v
		return nil
	}
	oldObj, ok1 := old.(map[string]any)
	newObj, ok2 := v.(map[string]any)
	if ok1 && ok2 {
		for _, k := range sortedKeys(newObj) {
			if err := put(oldObj, []string{k}, newObj[k], node, path); err != nil {
				return err
			}
		}
		return nil
	}
	if !equal(old, v) {
		return baggageError(node, path, old, v)
	}
	return nil
}

func baggageError(node, path string, old, v any) *BaggageError {
	o, _ := json.Marshal(old)
	n, _ := json.Marshal(v)
	return &BaggageError{Node: node, Path: path, Old: o, New: n}
}

// MergeContexts deep-merges contexts into base, as a join merges its
// split's context with each branch's: a path two of them set differently
// is a *BaggageError naming node.
func MergeContexts(node string, base json.RawMessage, contexts ...json.RawMessage) (json.RawMessage, error) {
	out, err := contextObject(base)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", node, err)
	}
	for _, raw := range contexts {
		obj, err := contextObject(raw)
		if err != nil {
			return nil, fmt.Errorf("step %s: %w", node, err)
		}
		for _, k := range sortedKeys(obj) {
			if err := put(out, []string{k}, obj[k], node, ""); err != nil {
				return nil, err
			}
		}
	}
	return json.Marshal(out)
}
