package daemon

import (
	"context"
	"log/slog"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// CatchUpUnlessHeld brings l's projections up to date when no process
// holds the state directory's lock: after a one-shot command's append (a
// cancel, a retry) nobody else would, and listings must show it at once. A
// holder projects (daemon, plugin run) or rebuilds (replay) them itself. If
// the lock cannot be probed, nothing is done: the next holder catches up.
func CatchUpUnlessHeld(ctx context.Context, stateDir string, l *ledger.Ledger, log *slog.Logger) error {
	if h, err := Holder(stateDir); err != nil || h.Held {
		return nil
	}
	_, err := projections.New(l, projections.Options{Logger: log}).CatchUp(ctx)
	return err
}

// Replay is what a replay in place did, or would do.
type Replay struct {
	Until      int64 // the head of the log it rebuilt (or would rebuild) the projections to
	Checkpoint int64 // the projections' checkpoint after it (0 on a dry run)
}

// ReplayInPlace rebuilds l's projections from its whole log. It must not
// race a daemon's or a plugin run's projector, which keeps its own idea of
// the checkpoint: it holds the state directory's lock (role replay) from
// before it reads the head until it is done, and fails with a *LockError
// naming the holder if another process has it. A dry run only checks that
// the lock is free and reads the head.
func ReplayInPlace(ctx context.Context, stateDir string, l *ledger.Ledger, dryRun bool) (Replay, error) {
	if dryRun {
		h, err := Holder(stateDir)
		if err != nil {
			return Replay{}, err
		}
		if h.Held {
			return Replay{}, &LockError{Path: LockPath(stateDir), PID: h.PID, Role: h.Role}
		}
	} else {
		lock, err := AcquireLock(stateDir, RoleReplay)
		if err != nil {
			return Replay{}, err
		}
		defer lock.Release()
	}
	head, err := l.LastSeq(ctx)
	if err != nil {
		return Replay{}, err
	}
	r := Replay{Until: head}
	if !dryRun {
		r.Checkpoint, err = projections.Rebuild(ctx, l, head)
	}
	return r, err
}
