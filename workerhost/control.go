package workerhost

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// Bounds of the control lines forwarded to the daemon.
const (
	// progressEvery is the least time between two progress reports of a
	// job: later values in between replace the one waiting.
	progressEvery = time.Second
	// maxPendingExports is how many export items may wait to be sent
	// before the plugin's control channel waits for room (backpressure,
	// as the dispatcher does: an item is never dropped).
	maxPendingExports = 64
)

// forwarder sends a job's control lines to the daemon from a goroutine of
// its own: export items in order, progress coalesced to one a second.
type forwarder struct {
	client *Client
	claim  *engine.Claimed
	log    *slog.Logger

	mu       sync.Mutex
	room     *sync.Cond
	exports  []events.Exported
	progress *events.Progressed
	closing  bool
	wake     chan struct{}
	done     chan struct{}
	ctx      context.Context // of the sends; canceled if close gives up
	cancel   context.CancelFunc
}

// newForwarder starts the forwarder of claim's control lines; ctx bounds
// its sends.
func newForwarder(ctx context.Context, c *Client, claim *engine.Claimed, log *slog.Logger) *forwarder {
	f := &forwarder{client: c, claim: claim, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
	f.room = sync.NewCond(&f.mu)
	f.ctx, f.cancel = context.WithCancel(ctx)
	go f.run()
	return f
}

// take is pluginhost.RunOptions.Control: it queues m.
func (f *forwarder) take(m pluginhost.ControlMessage) {
	if m.Refused != "" {
		f.log.Warn("control line refused", "line", m.Line, "reason", m.Refused)
		return
	}
	f.mu.Lock()
	switch {
	case m.Progress != nil:
		p := *m.Progress
		p.Attempt = f.claim.Attempt
		f.progress = &p
	case m.Export != nil:
		for len(f.exports) >= maxPendingExports && !f.closing {
			f.room.Wait()
		}
		x := *m.Export
		x.Attempt = f.claim.Attempt
		f.exports = append(f.exports, x)
	}
	f.mu.Unlock()
	f.poke()
}

func (f *forwarder) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run sends what waits: every export item, then the progress if a second
// has passed since the last one sent (else once it has).
func (f *forwarder) run() {
	defer close(f.done)
	var lastProgress time.Time
	var timer *time.Timer
	var due <-chan time.Time
	for {
		select {
		case <-f.wake:
		case <-due:
			due = nil
		}
		for {
			f.mu.Lock()
			if len(f.exports) == 0 {
				f.mu.Unlock()
				break
			}
			x := f.exports[0]
			f.mu.Unlock()
			f.send(nil, &x)
			f.mu.Lock()
			f.exports = f.exports[1:]
			f.room.Broadcast()
			f.mu.Unlock()
		}
		f.mu.Lock()
		p, closing := f.progress, f.closing
		if p != nil && (closing || time.Since(lastProgress) >= progressEvery) {
			f.progress = nil
		} else if p != nil {
			p = nil
			if due == nil {
				if timer == nil {
					timer = time.NewTimer(progressEvery - time.Since(lastProgress))
				} else {
					timer.Reset(progressEvery - time.Since(lastProgress))
				}
				due = timer.C
			}
		}
		f.mu.Unlock()
		if p != nil {
			f.send(p, nil)
			lastProgress = time.Now()
		}
		if closing {
			f.mu.Lock()
			empty := len(f.exports) == 0 && f.progress == nil
			f.mu.Unlock()
			if empty {
				return
			}
		}
	}
}

// send forwards one progress value (tried once: a later one replaces it)
// or export item (tried again while the daemon cannot take it: an item is
// part of the job's result); the daemon's refusal (an item over a cap, a
// stale fence) is logged, not retried.
func (f *forwarder) send(p *events.Progressed, x *events.Exported) {
	var id string
	var err error
	if x != nil {
		err = retry(f.ctx, f.log, "export item", func(ctx context.Context) error {
			var sendErr error
			id, sendErr = f.client.Control(ctx, f.claim, nil, x)
			return sendErr
		})
	} else {
		ctx, cancel := context.WithTimeout(f.ctx, callTimeout)
		_, err = f.client.Control(ctx, f.claim, p, nil)
		cancel()
	}
	switch {
	case err != nil && x != nil:
		f.log.Warn("export item not stored", "type", x.Type, "err", err)
	case err != nil && unreachable(err):
		f.log.Debug("progress not delivered (a later value replaces it)", "err", err)
	case err != nil:
		f.log.Warn("progress not delivered", "err", err)
	case x != nil:
		f.log.Debug("exported", "export_item_id", id)
	}
}

// close sends what waits and stops, before the completion (whose
// result_refs name the items); ctx ending gives up on what is left.
func (f *forwarder) close(ctx context.Context) {
	f.mu.Lock()
	f.closing = true
	f.room.Broadcast()
	f.mu.Unlock()
	f.poke()
	select {
	case <-f.done:
	case <-ctx.Done():
		f.cancel()
		<-f.done
	}
	f.cancel()
}
