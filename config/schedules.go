package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ductile/ductile/schedule"
)

// DefaultMaxOutstandingPolls is the poll guard of a plugin the config
// leaves it out of (spec §4.4: one poll job queued or running at a time).
const DefaultMaxOutstandingPolls = 1

// scheduleNodes is where a plugin's schedules were written: for errors,
// Check and Redacted.
type scheduleNodes struct {
	list    *yaml.Node   // the value of plugins.<name>.schedules
	entries []entryNodes // one per entry of PluginConfig.Schedules
}

// entryNodes is where one schedule entry was written.
type entryNodes struct {
	path  string                // plugins.<name>.schedules[i]
	entry *yaml.Node            // the entry's mapping
	keys  map[string]*yaml.Node // the value of each key written
}

// at returns the value of key if it was written, else the entry.
func (n entryNodes) at(key string) *yaml.Node {
	if v := n.keys[key]; v != nil {
		return v
	}
	return n.entry
}

// scheduleKeys are the keys of a schedule entry, in the order config show
// writes them.
var scheduleKeys = []string{"id", "command", "payload", "every", "cron", "at", "after", "jitter",
	"only_between", "preferred_window", "not_on", "timezone", "catch_up", "if_running"}

// cronReference is the instant from which a recurring entry must have a
// firing within ten years (Schedule.Nominal's horizon), or it never fires.
var cronReference = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// schedules decodes plugins.<name>.schedules into p.Schedules.
func (l *loader) schedules(n *yaml.Node, path, name string, p *PluginConfig, cfg *Config) {
	nodes := &scheduleNodes{list: n}
	cfg.schedules[name] = nodes
	if n.Kind != yaml.SequenceNode {
		l.fail(n, path, "must be a list of schedule entries, e.g. schedules: [{every: 5m}]")
		return
	}
	ids := map[string]string{}
	for i, item := range n.Content {
		ipath := indexPath(path, i)
		e, en, ok := l.scheduleEntry(item, ipath)
		if !ok {
			continue
		}
		if first, dup := ids[e.ID]; dup {
			fix := "give each entry of a plugin its own id"
			if en.keys["id"] == nil {
				fix += fmt.Sprintf(" (an entry without one is %q)", schedule.DefaultID)
			}
			l.fail(en.at("id"), ipath+".id", "id %q is already used by %s: %s", e.ID, first, fix)
			continue
		}
		ids[e.ID] = ipath
		p.Schedules = append(p.Schedules, e)
		nodes.entries = append(nodes.entries, en)
	}
}

// checkPollGuard reports the entries of plugin name whose if_running:
// queue the poll guard would turn into skip.
func (l *loader) checkPollGuard(path string, p PluginConfig, nodes *scheduleNodes) {
	if nodes == nil || p.MaxOutstandingPolls > 1 {
		return
	}
	for i, e := range p.Schedules {
		if e.Command == schedule.PollCommand && e.IfRunning == schedule.IfRunningQueue {
			l.fail(nodes.entries[i].at("if_running"), nodes.entries[i].path+".if_running",
				"queue never queues a poll while %s.max_outstanding_polls is %d (the poll guard skips it instead): raise max_outstanding_polls to 2 or more, or use skip",
				path, p.MaxOutstandingPolls)
		}
	}
}

// scheduleEntry decodes one schedule entry; false when it is not valid
// (the problems are recorded).
func (l *loader) scheduleEntry(n *yaml.Node, path string) (schedule.Entry, entryNodes, bool) {
	e := schedule.Entry{
		ID:        schedule.DefaultID,
		Command:   schedule.DefaultCommand,
		Timezone:  schedule.DefaultTimezone,
		Location:  time.Local,
		CatchUp:   schedule.CatchUpSkip,
		IfRunning: schedule.IfRunningSkip,
	}
	en := entryNodes{path: path, entry: n, keys: map[string]*yaml.Node{}}
	if isNull(n) {
		l.fail(n, path, "empty entry: say when it runs with one of every, cron, at or after, e.g. - every: 5m")
		return e, en, false
	}
	before := len(l.errs)
	var kinds []string // the timing keys written, in order
	fields := make([]field, len(scheduleKeys))
	for i, key := range scheduleKeys {
		fields[i] = field{key, func(v *yaml.Node, path string) {
			en.keys[key] = v
			l.scheduleKey(key, v, path, &e)
			if slices.Contains(schedule.Kinds, schedule.Kind(key)) {
				kinds = append(kinds, key)
			}
		}}
	}
	l.object(n, path, "", fields...)
	if n.Kind != yaml.MappingNode {
		return e, en, false
	}
	switch len(kinds) {
	case 0:
		if len(l.errs) == before {
			l.fail(n, path, "missing: say when it runs with one of every, cron, at or after, e.g. every: 5m")
		}
		return e, en, false
	case 1:
		e.Kind = schedule.Kind(kinds[0])
	default:
		l.fail(en.keys[kinds[1]], joinPath(path, kinds[1]), "%s and %s are both set: an entry has one of every, cron, at or after (make another entry for the other)", kinds[0], kinds[1])
		return e, en, false
	}
	if len(l.errs) > before {
		return e, en, false
	}
	l.checkEntry(&e, en, path)
	return e, en, len(l.errs) == before
}

// checkEntry checks the keys of a decoded entry against each other.
func (l *loader) checkEntry(e *schedule.Entry, en entryNodes, path string) {
	kind := string(e.Kind)
	if e.Kind.OneShot() {
		for _, key := range []string{"only_between", "not_on"} {
			if v := en.keys[key]; v != nil && !isEmpty(v) {
				l.fail(v, joinPath(path, key), "does not apply to a one-shot (%s: fires once, at its time): leave it out, or use preferred_window to move the firing into a window", kind)
			}
		}
	}
	if every := e.Rule.Every(); e.Kind == schedule.KindEvery && every > 0 && e.Jitter >= every {
		l.fail(en.keys["jitter"], joinPath(path, "jitter"), "must be shorter than the interval (every: %s): with jitter %s firings would overtake each other", e.Rule, formatDuration(e.Jitter))
	}
	if e.CatchUp == schedule.CatchUpRunAll && e.IfRunning != schedule.IfRunningQueue {
		l.fail(en.keys["catch_up"], joinPath(path, "catch_up"), "run_all runs each missed firing, but if_running: %s would %s: set if_running: queue",
			e.IfRunning, map[schedule.IfRunning]string{schedule.IfRunningSkip: "skip all but the first", schedule.IfRunningCancel: "cancel each for the next"}[e.IfRunning])
	}
	if e.Kind.OneShot() {
		return
	}
	if _, _, ok := (schedule.Schedule{Entry: *e}).Nominal(cronReference); !ok {
		key, why := kind, "it has no firing time"
		switch {
		case en.keys["only_between"] != nil && en.keys["not_on"] != nil:
			key, why = "only_between", fmt.Sprintf("no time of %s falls inside only_between %s on a day not_on allows", e.When(), schedule.FormatWindows(e.OnlyBetween))
		case en.keys["only_between"] != nil:
			key, why = "only_between", fmt.Sprintf("no time of %s falls inside only_between %s", e.When(), schedule.FormatWindows(e.OnlyBetween))
		case en.keys["not_on"] != nil:
			key, why = "not_on", fmt.Sprintf("%s falls only on days not_on excludes", e.When())
		}
		l.fail(en.at(key), joinPath(path, key), "the entry never fires: %s", why)
	}
}

// isEmpty reports whether n is an empty list or mapping.
func isEmpty(n *yaml.Node) bool {
	return (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && len(n.Content) == 0
}

// scheduleKey decodes the value v of key into e.
func (l *loader) scheduleKey(key string, v *yaml.Node, path string, e *schedule.Entry) {
	str := func() (string, bool) {
		s, ok := l.str(v, path)
		if ok && s == "" {
			l.fail(v, path, "must not be empty: leave the key out for the default")
			return "", false
		}
		return s, ok
	}
	switch key {
	case "id":
		s, ok := str()
		if !ok {
			return
		}
		if strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != "" || s == "." || s == ".." {
			l.fail(v, path, "invalid id %q: use letters, digits, '_', '-' and '.' (it names the ledger stream schedule/<plugin>/<id>)", s)
			return
		}
		e.ID = s
	case "command":
		if s, ok := str(); ok {
			e.Command = s
		}
	case "payload":
		if v.Kind != yaml.MappingNode {
			l.fail(v, path, "must be a mapping, handed to the job as its event's payload, e.g. payload: {full: true}")
			return
		}
		e.Payload, _ = toData(v, path, func(n *yaml.Node, path, msg string) { l.fail(n, path, "%s", msg) }).(map[string]any)
	case "every":
		s, ok := l.durationText(v, path)
		if !ok {
			return
		}
		r, err := schedule.ParseEvery(s)
		if err != nil {
			l.fail(v, path, "%v", err)
			return
		}
		e.Rule = r
	case "cron":
		s, ok := str()
		if !ok {
			return
		}
		r, err := schedule.ParseCron(s)
		if err != nil {
			l.fail(v, path, "%v", err)
			return
		}
		e.Rule = r
	case "at":
		s, ok := str()
		if !ok {
			return
		}
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			l.fail(v, path, "invalid time %s: write an RFC 3339 time with its offset, e.g. 2026-12-01T09:00:00Z or 2026-12-01T09:00:00+01:00", show(v))
			return
		}
		e.At = at
	case "after":
		if d, ok := l.nonNegativeDuration(v, path); ok {
			e.After = d
		}
	case "jitter":
		if d, ok := l.nonNegativeDuration(v, path); ok {
			e.Jitter = d
		}
	case "only_between", "preferred_window":
		ws, ok := l.windows(v, path)
		if !ok {
			return
		}
		if key == "only_between" {
			e.OnlyBetween = ws
		} else {
			e.PreferredWindow = ws
		}
	case "not_on":
		items := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			items = v.Content
		}
		for i, item := range items {
			ipath := path
			if v.Kind == yaml.SequenceNode {
				ipath = indexPath(path, i)
			}
			s, ok := l.str(item, ipath)
			if !ok {
				continue
			}
			d, err := schedule.ParseWeekday(s)
			if err != nil {
				l.fail(item, ipath, "%v%s", err, didYouMean(s, schedule.Weekdays))
				continue
			}
			if !slices.Contains(e.NotOn, d) {
				e.NotOn = append(e.NotOn, d)
			}
		}
		slices.Sort(e.NotOn)
		if len(e.NotOn) == 7 {
			l.fail(v, path, "excludes every day of the week, so the entry could never fire: remove a day, or disable the entry's plugin")
		}
	case "timezone":
		s, ok := str()
		if !ok {
			return
		}
		loc, err := time.LoadLocation(s)
		if err != nil {
			l.fail(v, path, "unknown time zone %q: use an IANA name like Europe/Berlin, America/New_York or UTC, or Local for the daemon's zone", s)
			return
		}
		e.Timezone, e.Location = s, loc
	case "catch_up":
		if s, ok := l.choice(v, path, schedule.CatchUps); ok {
			e.CatchUp = schedule.CatchUp(s)
		}
	case "if_running":
		if s, ok := l.choice(v, path, schedule.IfRunnings); ok {
			e.IfRunning = schedule.IfRunning(s)
		}
	}
}

// durationText reads a scalar meant as a duration or interval, refusing a
// bare number.
func (l *loader) durationText(v *yaml.Node, path string) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		l.fail(v, path, "must be a duration like 90s, 15m or 2h")
		return "", false
	}
	if tag := v.ShortTag(); (tag == "!!int" || tag == "!!float") && !l.interpolated[v] {
		l.fail(v, path, "must be a duration with a unit, like %ss, got %s", v.Value, v.Value)
		return "", false
	}
	return v.Value, true
}

// nonNegativeDuration reads a duration of 0 or more: Go syntax, or days.
func (l *loader) nonNegativeDuration(v *yaml.Node, path string) (time.Duration, bool) {
	s, ok := l.durationText(v, path)
	if !ok {
		return 0, false
	}
	d, err := schedule.ParseDuration(s)
	if err != nil {
		l.fail(v, path, "invalid duration %q: use a Go duration like 90s, 15m or 2h30m, or days like 7d", s)
		return 0, false
	}
	if d < 0 {
		l.fail(v, path, "must not be negative, got %s", s)
		return 0, false
	}
	return d, true
}

// windows reads one "HH:MM-HH:MM" window or a list of them.
func (l *loader) windows(v *yaml.Node, path string) ([]schedule.Window, bool) {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	var out []schedule.Window
	ok := true
	for i, item := range items {
		ipath := path
		if v.Kind == yaml.SequenceNode {
			ipath = indexPath(path, i)
		}
		s, isStr := l.str(item, ipath)
		if !isStr {
			ok = false
			continue
		}
		w, err := schedule.ParseWindow(s)
		if err != nil {
			l.fail(item, ipath, "%v", err)
			ok = false
			continue
		}
		out = append(out, w)
	}
	return out, ok
}

// choice reads one of names, suggesting the nearest for a misspelling.
func (l *loader) choice(v *yaml.Node, path string, names []string) (string, bool) {
	s, ok := l.str(v, path)
	if !ok {
		return "", false
	}
	if !slices.Contains(names, s) {
		l.fail(v, path, "invalid value %s: use one of %s%s", show(v), strings.Join(names, ", "), didYouMean(s, names))
		return "", false
	}
	return s, true
}
