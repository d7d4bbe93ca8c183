package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// Applied is what a process runs with: the plugins reg holds, enabled or
// not by cfg, and those it skipped with the reason, as config.applied
// records it. Plugin config values are left out: they may be secrets.
func Applied(reg *pluginhost.Registry, cfg *config.Config, reason string) events.ConfigAppliedData {
	a := events.ConfigAppliedData{Reason: reason, PID: os.Getpid(), Plugins: []events.AppliedPlugin{}, Skipped: []events.SkippedPlugin{}}
	for _, p := range reg.List() {
		ap := events.AppliedPlugin{Name: p.Name, Version: p.Manifest.Version, Dir: p.Dir, Enabled: cfg.Plugin(p.Name).Enabled,
			Commands: []events.AppliedCommand{}}
		for _, c := range p.Manifest.Commands {
			ap.Commands = append(ap.Commands, events.AppliedCommand{Name: c.Name, Type: string(c.Type)})
		}
		a.Plugins = append(a.Plugins, ap)
	}
	for _, s := range reg.Skipped() {
		a.Skipped = append(a.Skipped, events.SkippedPlugin{Name: s.Name, Dir: s.Dir, Reason: s.Err.Error()})
	}
	return a
}

// recordApplied appends config.applied to the system stream.
func recordApplied(ctx context.Context, l *ledger.Ledger, a events.ConfigAppliedData) error {
	_, err := l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion,
		Type: events.ConfigApplied, Data: a, Meta: ledger.Meta{Actor: "daemon"}})
	if err != nil {
		return fmt.Errorf("record applied config: %w", err)
	}
	return nil
}

// LastApplied reads the newest config.applied: what the daemon that started
// last runs with. ok is false if no daemon ever started on this ledger.
func LastApplied(ctx context.Context, l *ledger.Ledger) (a events.ConfigAppliedData, ok bool, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: events.SystemStream, Type: events.ConfigApplied},
			func(r queries.ReadStreamLastOfTypeRow) error {
				ok = true
				return json.Unmarshal([]byte(r.Data), &a)
			})
	})
	if err != nil {
		return events.ConfigAppliedData{}, false, fmt.Errorf("read applied config: %w", err)
	}
	return a, ok, nil
}
