package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

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

// ErrDaemonStopped means the daemon a caller waited on let go of the state
// directory's lock.
var ErrDaemonStopped = errors.New("the daemon stopped")

// holderPoll is how often WaitApplied checks that the daemon still holds
// the lock: a daemon that dies appends nothing that would wake a follower.
const holderPoll = 50 * time.Millisecond

// WaitApplied returns the config.applied of the daemon that holds the state
// directory's lock, pid (0: any daemon's). A daemon records it as it
// starts, just after taking the lock, so until its record is there the
// newest one is a previous daemon's: WaitApplied follows the log for it
// until it comes, ctx ends (its error), or the daemon no longer holds the
// lock (ErrDaemonStopped).
func WaitApplied(ctx context.Context, stateDir string, l *ledger.Ledger, pid int) (events.ConfigAppliedData, error) {
	// Every record up to head is visible to LastApplied; Follow gives the
	// later ones.
	head, err := l.LastSeq(ctx)
	if err != nil {
		return events.ConfigAppliedData{}, contextError(ctx, err)
	}
	a, ok, err := LastApplied(ctx, l)
	if err != nil {
		return events.ConfigAppliedData{}, contextError(ctx, err)
	}
	if ok && (a.PID == pid || pid == 0) {
		return a, nil
	}
	following, stop := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { watchHolder(following, stateDir, pid, stop) })
	_, err = l.Follow(following, head, ledger.Filter{Stream: events.SystemStream, Type: events.ConfigApplied}, func(ev ledger.Event) error {
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			return fmt.Errorf("read applied config: %w", err)
		}
		if a.PID == pid || pid == 0 {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	stopped := context.Cause(following) // the watcher's reason, if it ended the follow
	stop(nil)
	wg.Wait()
	switch {
	case err != nil && stopped != nil && ctx.Err() == nil:
		return events.ConfigAppliedData{}, stopped
	case err != nil:
		return events.ConfigAppliedData{}, err
	}
	return a, nil
}

// watchHolder checks now and every holderPoll until ctx ends that a daemon
// with pid holds stateDir's lock, and stops ctx with ErrDaemonStopped (or
// the probe's error) once it does not.
func watchHolder(ctx context.Context, stateDir string, pid int, stop context.CancelCauseFunc) {
	tick := time.NewTicker(holderPoll)
	defer tick.Stop()
	for {
		h, err := Holder(stateDir)
		switch {
		case err != nil:
			stop(err)
			return
		case !h.Daemon() || h.PID != pid:
			stop(ErrDaemonStopped)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// contextError is err, or ctx's error if ctx has ended: a read cut short by
// its context fails with SQLite's "interrupted".
func contextError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
