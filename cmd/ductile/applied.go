package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
)

// appliedOutput is what config show --applied prints with --json.
type appliedOutput struct {
	PID       int                    `json:"pid"`
	Running   bool                   `json:"running"` // the daemon that recorded it holds the lock now
	Reason    string                 `json:"reason"`
	AppliedAt string                 `json:"applied_at"`
	Seq       int64                  `json:"seq"`
	Settings  events.Settings        `json:"settings"`
	Plugins   []events.AppliedPlugin `json:"plugins"`
	Skipped   []events.SkippedPlugin `json:"skipped"`
	// Pipelines it runs, and those it skipped (a uses step names a plugin
	// that did not load) with the reason.
	Pipelines        []events.AppliedPipeline `json:"pipelines"`
	SkippedPipelines []events.SkippedPipeline `json:"skipped_pipelines"`
}

// configShowApplied prints the newest config.applied: what the running
// daemon decides with, or, with none running, what the last one did.
func configShowApplied(c *cli.Context, e *env) error {
	l, err := e.readLedger(c.Context)
	if err != nil {
		return err
	}
	defer l.Close()
	a, ok, err := daemon.LastApplied(c.Context, l)
	if err != nil {
		return err
	}
	if !ok {
		return hintf(errcode.NotFound, "start one with: ductile system start", "no daemon has run on %s yet: nothing was applied", e.stateDir)
	}
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return err
	}
	out := appliedOutput{PID: a.PID, Running: h.Daemon() && h.PID == a.PID, Reason: a.Reason,
		AppliedAt: a.At.UTC().Format(time.RFC3339Nano), Seq: a.Seq, Settings: a.Settings, Plugins: a.Plugins, Skipped: a.Skipped,
		Pipelines: a.Pipelines, SkippedPipelines: a.SkippedPipelines}
	if out.Pipelines == nil {
		out.Pipelines = []events.AppliedPipeline{}
	}
	if out.SkippedPipelines == nil {
		out.SkippedPipelines = []events.SkippedPipeline{}
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if a.Settings.Hash == "" {
		return failf("the daemon (pid %d) that applied the last config did not record its settings: restart it with this version of ductile", a.PID)
	}
	state := "running"
	if !out.Running {
		state = "not running now"
	}
	fmt.Fprintf(e.stdout, "# applied by the daemon (pid %d, %s) at %s (%s, seq %d)\n# config %s\n# hash %s\n",
		a.PID, state, out.AppliedAt, a.Reason, a.Seq, orDefaults(a.Settings.Source), a.Settings.Hash)
	for _, p := range a.SkippedPipelines {
		fmt.Fprintf(e.stdout, "# pipeline %s skipped: %s (fix or install the plugin, then: ductile system reload)\n", p.Name, p.Reason)
	}
	b, err := yaml.Marshal(a.Settings)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

// runningApplied is the config.applied of the daemon running on the state
// directory, if one runs and recorded its settings.
func runningApplied(c *cli.Context, e *env) (daemon.AppliedRecord, bool) {
	h, err := daemon.Holder(e.stateDir)
	if err != nil || !h.Daemon() {
		return daemon.AppliedRecord{}, false
	}
	l, err := e.readLedger(c.Context)
	if err != nil {
		return daemon.AppliedRecord{}, false
	}
	defer l.Close()
	a, ok, err := daemon.LastApplied(c.Context, l)
	if err != nil || !ok || a.PID != h.PID || a.Settings.Hash == "" {
		return daemon.AppliedRecord{}, false
	}
	return a, true
}

// markDifferences comments the config document n where it differs from
// the daemon's applied settings: "# applied: <value>" beside each key
// whose value differs, and a head comment that says so (or that it does
// not).
func markDifferences(n *yaml.Node, diffs []events.SettingChange, a daemon.AppliedRecord) {
	root := n
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if len(diffs) == 0 {
		root.HeadComment = fmt.Sprintf("the running daemon (pid %d) applies this config (since %s)", a.PID, a.At.UTC().Format(time.RFC3339))
		return
	}
	var unplaced []string
	for _, d := range diffs {
		path := strings.TrimSuffix(d.Path, "_hash")
		path = strings.TrimPrefix(path, "sections.")
		key, ok := findKey(root, strings.Split(path, "."))
		note := "applied: " + showValue(d.Applied)
		switch {
		case strings.HasSuffix(d.Path, "_hash"):
			note = "differs from the applied value (compared by hash)"
		case d.Applied == nil:
			note = "not applied yet"
		}
		if !ok {
			unplaced = append(unplaced, fmt.Sprintf("%s: not in this file; applied: %s", d.Path, showValue(d.Applied)))
			continue
		}
		key.LineComment = note
	}
	head := fmt.Sprintf("%d setting(s) differ from what the running daemon (pid %d) applied at %s (marked \"# applied: …\" or \"# not applied yet\");\n"+
		"apply this file with: ductile system reload", len(diffs), a.PID, a.At.UTC().Format(time.RFC3339))
	for _, u := range unplaced {
		head += "\n" + u
	}
	root.HeadComment = head
}

// findKey is the key node at path in a mapping tree; ok is false when
// the path is not all there. A step "name[x]" goes on into the entry of the
// list under name whose id is x, or, for a number, its x-th entry; such an
// entry is marked on its first key.
func findKey(n *yaml.Node, path []string) (*yaml.Node, bool) {
	var found *yaml.Node
	for _, step := range path {
		k, entry := step, ""
		if open := strings.IndexByte(step, '['); open > 0 && strings.HasSuffix(step, "]") {
			k, entry = step[:open], step[open+1:len(step)-1]
		}
		value := mappingValue(n, k)
		if value == nil {
			return nil, false
		}
		found, n = mappingKey(n, k), value
		if entry == "" {
			continue
		}
		item := listEntry(n, entry)
		if item == nil || len(item.Content) == 0 {
			return nil, false
		}
		found, n = item.Content[0], item
	}
	return found, found != nil
}

func mappingKey(n *yaml.Node, k string) *yaml.Node {
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i]
		}
	}
	return nil
}

func mappingValue(n *yaml.Node, k string) *yaml.Node {
	for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i+1]
		}
	}
	return nil
}

// listEntry is the mapping in list n whose id is entry, or the entry-th.
func listEntry(n *yaml.Node, entry string) *yaml.Node {
	if n.Kind != yaml.SequenceNode {
		return nil
	}
	for _, item := range n.Content {
		if id := mappingValue(item, "id"); id != nil && id.Value == entry {
			return item
		}
	}
	if i, err := strconv.Atoi(entry); err == nil && i >= 0 && i < len(n.Content) {
		return n.Content[i]
	}
	return nil
}
