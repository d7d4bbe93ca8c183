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
	a := events.ConfigAppliedData{Reason: reason, PID: os.Getpid(), Plugins: []events.AppliedPlugin{}, Skipped: []events.SkippedPlugin{},
		Settings: cfg.Settings()}
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

// AppliedRecord is a config.applied event: what a daemon ran with from Seq
// on, recorded at At.
type AppliedRecord struct {
	events.ConfigAppliedData
	Seq int64
	At  time.Time
}

// LastApplied reads the newest config.applied: what the daemon that started
// (or reloaded) last runs with. ok is false if no daemon ever started on
// this ledger.
func LastApplied(ctx context.Context, l *ledger.Ledger) (a AppliedRecord, ok bool, err error) {
	err = l.Read(ctx, func(conn *sqlite.Conn) error {
		return queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: events.SystemStream, Type: events.ConfigApplied},
			func(r queries.ReadStreamLastOfTypeRow) error {
				ok = true
				a.Seq = r.Seq
				a.At, _ = time.Parse(ledger.TimeFormat, r.RecordedAt)
				return json.Unmarshal([]byte(r.Data), &a.ConfigAppliedData)
			})
	})
	if err != nil {
		return AppliedRecord{}, false, fmt.Errorf("read applied config: %w", err)
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
	last, ok, err := LastApplied(ctx, l)
	if err != nil {
		return events.ConfigAppliedData{}, contextError(ctx, err)
	}
	if ok && (last.PID == pid || pid == 0) {
		return last.ConfigAppliedData, nil
	}
	var a events.ConfigAppliedData
	err = followWhileHeld(ctx, stateDir, pid, l, head, ledger.Filter{Stream: events.SystemStream, Type: events.ConfigApplied}, func(ev ledger.Event) error {
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			return fmt.Errorf("read applied config: %w", err)
		}
		if a.PID == pid || pid == 0 {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	if err != nil {
		return events.ConfigAppliedData{}, err
	}
	return a, nil
}

// ReloadFailedError is a reload the daemon refused (config.reload_failed).
type ReloadFailedError struct{ events.ReloadFailedData }

func (e *ReloadFailedError) Error() string { return e.ReloadFailedData.Error }

// WaitReload waits for the answer of the daemon pid to a reload asked for
// once the ledger's last seq was after: its config.applied (reason reload)
// or its config.reload_failed (a *ReloadFailedError), whichever comes first
// with a Through of at least after. It ends with ErrDaemonStopped if the
// daemon lets go of the lock first.
func WaitReload(ctx context.Context, stateDir string, l *ledger.Ledger, pid int, after int64) (events.ConfigAppliedData, error) {
	var a events.ConfigAppliedData
	var failed *ReloadFailedError
	err := followWhileHeld(ctx, stateDir, pid, l, after, ledger.Filter{Stream: events.SystemStream}, func(ev ledger.Event) error {
		switch ev.Type {
		case events.ConfigApplied:
			var got events.ConfigAppliedData
			if err := json.Unmarshal(ev.Data, &got); err != nil {
				return fmt.Errorf("read applied config: %w", err)
			}
			if got.PID == pid && got.Reason == "reload" && got.Through >= after {
				a = got
				return ledger.ErrStopFollowing
			}
		case events.ConfigReloadFailed:
			var f events.ReloadFailedData
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				return fmt.Errorf("read failed reload: %w", err)
			}
			if f.PID == pid && f.Through >= after {
				failed = &ReloadFailedError{f}
				return ledger.ErrStopFollowing
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return events.ConfigAppliedData{}, err
	case failed != nil:
		return events.ConfigAppliedData{}, failed
	}
	return a, nil
}

// followWhileHeld follows l from after with filter (ledger.Follow) for as
// long as the daemon pid holds stateDir's lock (any daemon's, for pid 0):
// once it does not, it ends with ErrDaemonStopped.
func followWhileHeld(ctx context.Context, stateDir string, pid int, l *ledger.Ledger, after int64, filter ledger.Filter, fn func(ledger.Event) error) error {
	following, stop := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { watchHolder(following, stateDir, pid, stop) })
	_, err := l.Follow(following, after, filter, fn)
	stopped := context.Cause(following) // the watcher's reason, if it ended the follow
	stop(nil)
	wg.Wait()
	if err != nil && stopped != nil && ctx.Err() == nil {
		return stopped
	}
	return err
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
