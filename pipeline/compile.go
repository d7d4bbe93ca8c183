package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/schedule"
)

// SkipToEnd is Node.Skip when a false If ends the branch (or the pipeline).
const SkipToEnd = "$end"

// The keys of a pipeline and of a step.
var (
	pipelineKeys = []string{"name", "on", "on-hook", "execution_mode", "timeout", "max_depth", "steps"}
	stepKeys     = []string{"id", "uses", "call", "split", "steps", "on", "if", "with", "baggage", "continue_on_error"}
	kindKeys     = []string{"uses", "call", "split", "steps"}
)

// idPattern is what an explicit step id may be: "/" joins a call step's id
// to the ids of the pipeline it calls, so it is not allowed.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// compiler compiles the pipelines of one config.
type compiler struct {
	cfg   *config.Config
	check func(plugin, command string) error
	defs  map[string]*yaml.Node // pipeline name → its mapping (the first one written)
	errs  []config.FieldError
	// called are the pipelines a call: names (inlined where called).
	called map[string]bool
}

func compile(cfg *config.Config, check func(plugin, command string) error) (*Set, error) {
	set := &Set{Pipelines: map[string]*Pipeline{}}
	c := &compiler{cfg: cfg, check: check, defs: map[string]*yaml.Node{}, called: map[string]bool{}}
	list := cfg.Pipelines
	if list == nil || list.Kind == yaml.ScalarNode && list.ShortTag() == "!!null" {
		set.index()
		return set, nil
	}
	if list.Kind != yaml.SequenceNode {
		c.fail(list, "pipelines", "must be a list of pipelines, each a mapping with name: and steps:")
		return nil, &config.ValidationError{Errors: c.errs}
	}
	// Names first, so that a call may name a pipeline written after it.
	var order []*yaml.Node
	for i, n := range list.Content {
		path := fmt.Sprintf("pipelines[%d]", i)
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, "must be a mapping with name: and steps:")
			continue
		}
		name := value(n, "name")
		if name == nil || name.Kind != yaml.ScalarNode || name.Value == "" {
			c.fail(n, path, "name: missing: give the pipeline a name (it is how call:, the API and the CLI refer to it)")
			continue
		}
		if first, ok := c.defs[name.Value]; ok {
			c.fail(name, "pipelines["+name.Value+"].name", fmt.Sprintf("duplicate pipeline name %q (first at %s): rename one of them", name.Value, cfg.Position(first)))
			continue
		}
		c.defs[name.Value] = n
		order = append(order, n)
	}
	for _, n := range order {
		if p := c.pipeline(n); p != nil {
			set.Pipelines[p.Name] = p
		}
	}
	set.called = c.called
	if len(c.errs) == 0 {
		// What a step's on: can never match, whatever the plugins emit.
		c.errs = append(c.errs, set.checkOn(nil)...)
	}
	if len(c.errs) > 0 {
		cfg.SortErrors(c.errs)
		return nil, &config.ValidationError{Errors: c.errs}
	}
	set.index()
	return set, nil
}

func (c *compiler) fail(n *yaml.Node, path, msg string) {
	c.errs = append(c.errs, c.cfg.FieldAt(n, path, msg))
}

// pipeline compiles the pipeline written at n.
func (c *compiler) pipeline(n *yaml.Node) *Pipeline {
	name := value(n, "name").Value
	path := "pipelines[" + name + "]"
	b := &build{c: c, top: name, calls: []string{name}, p: &Pipeline{
		Name: name, ExecutionMode: ModeAsync, Timeout: DefaultTimeout, MaxDepth: DefaultMaxDepth,
		Nodes: map[string]*Node{}, Line: n.Line,
	}, ids: map[string]*yaml.Node{}}
	b.p.File = fileOf(c.cfg, n)
	before := len(c.errs)
	fields := b.keys(n, path, pipelineKeys, "a pipeline takes name, on or on-hook, execution_mode, timeout, max_depth and steps")
	p := b.p
	if v := fields["on"]; v != nil {
		p.On = b.str(v, path+".on", "an event type, e.g. discord.video_link_received")
	}
	if v := fields["on-hook"]; v != nil {
		names := hookSignalNames()
		p.OnHook = HookSignal(b.str(v, path+".on-hook", "one of "+strings.Join(names, ", ")))
		if p.OnHook != "" && !slices.Contains(HookSignals, p.OnHook) {
			b.fail(v, path+".on-hook", fmt.Sprintf("unknown hook signal %q%s: use one of %s", p.OnHook, didYouMean(string(p.OnHook), names), strings.Join(names, ", ")))
		}
		if fields["on"] != nil {
			b.fail(v, path+".on-hook", "a pipeline has on: or on-hook:, not both: keep the one that should start it (run it from the CLI or API with neither)")
		}
	}
	if v := fields["execution_mode"]; v != nil {
		p.ExecutionMode = b.str(v, path+".execution_mode", "async or synchronous")
		if p.ExecutionMode != "" && p.ExecutionMode != ModeAsync && p.ExecutionMode != ModeSynchronous {
			b.fail(v, path+".execution_mode", fmt.Sprintf("unknown execution mode %q: use async (the default) or synchronous", p.ExecutionMode))
		}
	}
	if v := fields["timeout"]; v != nil {
		d, err := schedule.ParseDuration(v.Value)
		switch {
		case v.Kind != yaml.ScalarNode || err != nil:
			b.fail(v, path+".timeout", fmt.Sprintf("invalid duration %q: use a duration like 30s, 3m or 1h", v.Value))
		case d <= 0:
			b.fail(v, path+".timeout", "must be greater than 0, e.g. 30s")
		default:
			p.Timeout = d
		}
	}
	if v := fields["max_depth"]; v != nil {
		d, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil || d < 1 {
			b.fail(v, path+".max_depth", fmt.Sprintf("must be a whole number of steps of 1 or more, got %q (default %d)", v.Value, DefaultMaxDepth))
		} else {
			p.MaxDepth = d
		}
	}
	steps := fields["steps"]
	if steps == nil {
		b.fail(n, path+".steps", "missing: give the steps to run, e.g. steps: [{uses: myplugin}]")
	} else {
		entry, link := b.sequence(steps, path+".steps", "", "")
		link("")
		p.Entry = entry
	}
	if len(c.errs) > before {
		return nil
	}
	p.Hash = p.hash()
	return p
}

// build compiles one pipeline, or (quiet) inlines a called one into it.
type build struct {
	c      *compiler
	top    string // the pipeline being compiled, for error paths
	p      *Pipeline
	calls  []string // the pipelines being inlined, outermost first: a repeat is a cycle
	quiet  bool     // inlining: the called pipeline's own compile reports its errors
	failed bool     // quiet, and an error was found
	cycle  []string // set when inlining found a call cycle
	ids    map[string]*yaml.Node
}

func (b *build) fail(n *yaml.Node, path, msg string) {
	if b.quiet {
		b.failed = true
		return
	}
	b.c.fail(n, path, msg)
}

// stepPath is the error path of the step id.
func (b *build) stepPath(id string) string {
	return "pipelines[" + b.top + "].steps[" + id + "]"
}

// sequence compiles a list of steps; ids of steps without one derive from
// parent ("" at the top: step1, step2…; else parent.1, parent.2…). prefix
// is prepended to every id (a call step's "<id>/"). It returns the entry
// node and a function that sets where the sequence goes after its last step.
func (b *build) sequence(n *yaml.Node, path, parent, prefix string) (string, func(next string)) {
	noop := func(string) {}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		b.fail(n, path, "must be a non-empty list of steps, e.g. [{uses: myplugin}, {uses: other.command}]")
		return "", noop
	}
	var entry string
	var link func(string)
	for i, s := range n.Content {
		derived := "step" + strconv.Itoa(i+1)
		if parent != "" {
			derived = parent + "." + strconv.Itoa(i+1)
		}
		e, l := b.step(s, derived, prefix)
		if i == 0 {
			entry = e
		} else {
			link(e)
		}
		link = l
	}
	return entry, link
}

// step compiles one step (derived is its id when it gives none) and returns
// its entry node and the function that links what follows it.
func (b *build) step(n *yaml.Node, derived, prefix string) (string, func(next string)) {
	noop := func(string) {}
	path := b.stepPath(prefix + derived)
	if n.Kind != yaml.MappingNode {
		b.fail(n, path, "must be a mapping with one of uses:, call:, split: or steps:")
		return "", noop
	}
	id := derived
	if v := value(n, "id"); v != nil {
		if v.Kind != yaml.ScalarNode || !idPattern.MatchString(v.Value) {
			b.fail(v, path+".id", fmt.Sprintf("invalid step id %q: use letters, digits, _, - and . (starting with a letter or digit)", v.Value))
		} else {
			id = v.Value
		}
	}
	full := prefix + id
	path = b.stepPath(full)
	fields := b.keys(n, path, stepKeys, "a step takes id, one of uses/call/split/steps, and on, if, with, baggage (continue_on_error on a split)")
	b.claimID(full, n, path)

	var kinds []string
	for _, k := range kindKeys {
		if fields[k] != nil {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) != 1 {
		if len(kinds) == 0 {
			b.fail(n, path, "a step has exactly one of uses:, call:, split: or steps:, this one has none: add one, e.g. uses: myplugin")
		} else {
			b.fail(n, path, fmt.Sprintf("a step has exactly one of uses:, call:, split: or steps:, this one has %s: make them separate steps", strings.Join(kinds, " and ")))
		}
		return "", noop
	}
	if v := fields["continue_on_error"]; v != nil && kinds[0] != "split" {
		b.fail(v, path+".continue_on_error", "only a split takes continue_on_error (it lets the join run when a branch failed): remove it, or move it to the split")
	}

	var on []string
	if v := fields["on"]; v != nil {
		on = b.eventTypes(v, path+".on")
	}
	var cond *Condition
	if v := fields["if"]; v != nil {
		cond = b.condition(v, path+".if")
	}
	var with map[string]json.RawMessage
	if v := fields["with"]; v != nil {
		with = b.with(v, path+".with")
	}
	var claims []Claim
	if v := fields["baggage"]; v != nil {
		claims = b.baggage(v, path+".baggage")
	}

	switch kinds[0] {
	case "uses":
		v := fields["uses"]
		node := &Node{ID: full, Kind: KindUses, On: on, If: cond, With: with, Baggage: claims, File: fileOf(b.c.cfg, n), Line: n.Line}
		node.Plugin, node.Command = b.uses(v, path+".uses")
		b.p.Nodes[full] = node
		return full, func(next string) { node.Next = next }
	case "split":
		v := fields["split"]
		node := &Node{ID: full, Kind: KindSplit, On: on, If: cond, With: with, Baggage: claims, File: fileOf(b.c.cfg, n), Line: n.Line}
		if ce := fields["continue_on_error"]; ce != nil {
			switch ce.Value {
			case "true":
				node.ContinueOnError = true
			case "false":
			default:
				b.fail(ce, path+".continue_on_error", fmt.Sprintf("must be true or false, got %q", ce.Value))
			}
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			b.fail(v, path+".split", "must be a non-empty list of branches, each a step or {steps: [...]}")
		} else {
			for i, br := range v.Content {
				entry, link := b.step(br, id+"."+strconv.Itoa(i+1), prefix)
				link("")
				node.Branches = append(node.Branches, entry)
			}
		}
		b.p.Nodes[full] = node
		return full, func(next string) { node.Next = next }
	case "steps":
		entry, link := b.sequence(fields["steps"], path+".steps", id, prefix)
		return entry, b.group(n, path, entry, link, gate{on, cond}, with, claims)
	default: // call
		v := fields["call"]
		entry, link := b.inline(v, path+".call", full+"/")
		return entry, b.group(n, path, entry, link, gate{on, cond}, with, claims)
	}
}

// gate is the on and if written on a step.
type gate struct {
	on   []string
	cond *Condition
}

// group puts the on, if, with and baggage written on a steps: group or a
// call on its entry node, and returns the group's link: a gate that does
// not pass skips to what follows the group.
func (b *build) group(n *yaml.Node, path, entry string, link func(string), g gate, with map[string]json.RawMessage, claims []Claim) func(string) {
	first := b.p.Nodes[entry]
	if first == nil {
		return link
	}
	gated := g.on != nil || g.cond != nil
	switch {
	case g.cond != nil && first.If != nil:
		b.fail(n, path+".if", fmt.Sprintf("its first step %q has an if of its own, and a group's if gates the group at its first step: put the group's if on its steps one by one, or, if the first step should run only when both hold, combine them in the group's if with all: [...]", entry))
	case gated && first.Gated():
		// One gate skips one thing: the step's own would skip the whole group.
		key := ".on"
		if g.on == nil {
			key = ".if"
		}
		b.fail(n, path+key, fmt.Sprintf("its first step %q has an on or if of its own, and a group's on and if gate the group at its first step: write both on the group, or both on the step", entry))
	}
	if with != nil && first.With != nil {
		b.fail(n, path+".with", fmt.Sprintf("its first step %q has a with of its own: write one with (on the group or on the step)", entry))
	}
	if g.on != nil {
		first.On = g.on
	}
	if g.cond != nil {
		first.If = g.cond
	}
	if with != nil {
		first.With = with
	}
	first.Baggage = append(slices.Clone(claims), first.Baggage...)
	if !gated {
		return link
	}
	return func(next string) {
		link(next)
		first.Skip = next
		if next == "" {
			first.Skip = SkipToEnd
		}
	}
}

// inline compiles the pipeline named at v into this one, its ids prefixed.
func (b *build) inline(v *yaml.Node, path, prefix string) (string, func(string)) {
	noop := func(string) {}
	name := b.str(v, path, "the name of another pipeline")
	if name == "" {
		return "", noop
	}
	def, ok := b.c.defs[name]
	if !ok {
		b.fail(v, path, fmt.Sprintf("no pipeline named %q%s: call the name of a pipeline in pipelines:", name, didYouMean(name, b.names())))
		return "", noop
	}
	if i := slices.Index(b.calls, name); i >= 0 {
		cycle := append(slices.Clone(b.calls[i:]), name)
		if b.quiet {
			b.cycle = cycle
		} else {
			b.fail(v, path, fmt.Sprintf("call cycle %s: a pipeline cannot call itself, directly or through others: remove one of these calls", strings.Join(cycle, " -> ")))
		}
		return "", noop
	}
	steps := value(def, "steps")
	if steps == nil {
		return "", noop // its own compile reports it
	}
	b.c.called[name] = true
	sub := &build{c: b.c, top: name, p: b.p, calls: append(slices.Clone(b.calls), name), quiet: true, ids: b.ids}
	entry, link := sub.sequence(steps, "", "", prefix)
	if sub.cycle != nil {
		if b.quiet {
			b.cycle = sub.cycle
		} else {
			b.fail(v, path, fmt.Sprintf("call cycle %s: a pipeline cannot call itself, directly or through others: remove one of these calls", strings.Join(sub.cycle, " -> ")))
		}
		return "", noop
	}
	if sub.failed {
		// Its errors are reported where it is compiled itself.
		b.fail(v, path, fmt.Sprintf("calls %q, which does not compile: fix the errors reported for it", name))
	}
	return entry, link
}

// claimID records that id is taken in this pipeline.
func (b *build) claimID(id string, n *yaml.Node, path string) {
	if first, ok := b.ids[id]; ok {
		b.fail(n, path+".id", fmt.Sprintf("duplicate step id %q (first at %s): ids are unique in a pipeline, rename one", id, b.c.cfg.Position(first)))
		return
	}
	b.ids[id] = n
}

// uses reads "plugin" or "plugin.command" (command defaults to handle) and
// asks check whether it exists.
func (b *build) uses(v *yaml.Node, path string) (plugin, command string) {
	s := b.str(v, path, "plugin or plugin.command")
	if s == "" {
		return "", ""
	}
	plugin, command = s, "handle"
	if i := strings.LastIndexByte(s, '.'); i > 0 && i < len(s)-1 {
		plugin, command = s[:i], s[i+1:]
	}
	if b.c.check == nil {
		return plugin, command
	}
	if err := b.c.check(plugin, command); err != nil {
		if plugin != s && b.c.check(s, "handle") == nil {
			return s, "handle" // a plugin whose name has a dot
		}
		b.fail(v, path, fmt.Sprintf("%v: write uses: plugin (runs handle) or plugin.command, naming one that is installed (see: ductile plugin list)", err))
	}
	return plugin, command
}

// keys returns the values of mapping n by key, reporting unknown keys.
func (b *build) keys(n *yaml.Node, path string, valid []string, hint string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(valid, k.Value) {
			b.fail(k, path+"."+k.Value, fmt.Sprintf("unknown key%s (valid keys: %s); %s", didYouMean(k.Value, valid), strings.Join(slices.Sorted(slices.Values(valid)), ", "), hint))
			continue
		}
		if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
			continue
		}
		out[k.Value] = v
	}
	return out
}

// eventTypes reads an on: of a step: one event type, or a list of them.
func (b *build) eventTypes(v *yaml.Node, path string) []string {
	const form = "an event type (on: schema.valid) or a list of them (on: [schema.valid, schema.fixed])"
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		if len(v.Content) == 0 {
			b.fail(v, path, "must be "+form+": an empty list matches no event (remove the step, or list its event types)")
			return nil
		}
		items = v.Content
	}
	var out []string
	for _, item := range items {
		t := b.str(item, path, form)
		switch {
		case t == "":
		case strings.ContainsAny(t, " \t{}[],"):
			b.fail(item, path, fmt.Sprintf("invalid event type %q: an event type is a name like schema.valid, matched exactly", t))
		case slices.Contains(out, t):
			b.fail(item, path, fmt.Sprintf("event type %q is listed twice: list it once", t))
		default:
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// str reads a non-empty string scalar.
func (b *build) str(v *yaml.Node, path, what string) string {
	if v.Kind != yaml.ScalarNode || v.Value == "" {
		b.fail(v, path, "must be "+what)
		return ""
	}
	return v.Value
}

// names are the pipelines of the config, for suggestions.
func (b *build) names() []string {
	var out []string
	for name := range b.c.defs {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// value returns the value of key in mapping n, or nil.
func value(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// fileOf is the file n was written in, as errors show it.
func fileOf(cfg *config.Config, n *yaml.Node) string {
	return cfg.FieldAt(n, "", "").File
}

// didYouMean is ": did you mean X?" for the closest of names, or "".
func didYouMean(word string, names []string) string {
	if s := config.Suggest(word, names); s != "" {
		return ": did you mean " + s + "?"
	}
	return ""
}

// toJSON converts a YAML value to JSON.
func toJSON(n *yaml.Node) (json.RawMessage, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot be written as JSON (%v): use string keys", err)
	}
	return b, nil
}

// hash is blake3 of the pipeline's canonical JSON, its file positions
// left out (moving a pipeline in its file does not make a new version).
func (p *Pipeline) hash() string {
	q := *p
	q.Hash, q.File, q.Line = "", "", 0
	q.Nodes = make(map[string]*Node, len(p.Nodes))
	for id, n := range p.Nodes {
		m := *n
		m.File, m.Line = "", 0
		q.Nodes[id] = &m
	}
	b, err := json.Marshal(&q)
	if err != nil {
		panic("pipeline: marshal compiled form: " + err.Error()) // every field is plain data
	}
	return config.HashBytes(b)
}

// index builds the Triggered and Hooked indexes.
func (s *Set) index() {
	s.byEvent, s.byHook = map[string][]*Pipeline{}, map[HookSignal][]*Pipeline{}
	for _, name := range slices.Sorted(maps.Keys(s.Pipelines)) {
		p := s.Pipelines[name]
		if p.On != "" {
			s.byEvent[p.On] = append(s.byEvent[p.On], p)
		}
		if p.OnHook != "" {
			s.byHook[p.OnHook] = append(s.byHook[p.OnHook], p)
		}
	}
}

// scan returns the pipelines of s sorted by name whose field (On or
// OnHook) is key, for a Set not built by Compile.
func (s *Set) scan(key string, field func(*Pipeline) string) []*Pipeline {
	var out []*Pipeline
	for _, name := range slices.Sorted(maps.Keys(s.Pipelines)) {
		if p := s.Pipelines[name]; field(p) == key {
			out = append(out, p)
		}
	}
	return out
}
