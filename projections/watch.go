package projections

import (
	"context"
	"slices"
)

// Checkpoint is the seq of the last event applied (as far as this process knows).
func (p *Projector) Checkpoint() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkpoint
}

// Seen is how many events of type typ this projector has applied since it
// was created: a cheap way for a consumer to learn that something it cares
// about happened (the dispatcher watches job.cancel_requested).
func (p *Projector) Seen(typ string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[typ]
}

// A reachWaiter is a Reached call waiting for its count.
type reachWaiter struct {
	typ  string
	n    int64
	ch   chan struct{}
	stop func() bool // drops the context's hook once the count is reached
}

// Reached returns a channel closed once this projector has applied at
// least n events of type typ (at once if it already has): a wait for a
// count that costs nothing per commit. The wait is dropped when ctx ends.
func (p *Projector) Reached(ctx context.Context, typ string, n int64) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.seen[typ] >= n {
		close(ch)
		return ch
	}
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.reached = slices.DeleteFunc(p.reached, func(w reachWaiter) bool { return w.ch == ch })
	})
	p.reached = append(p.reached, reachWaiter{typ: typ, n: n, ch: ch, stop: stop})
	return ch
}

// SeenChanged returns a channel closed the next time this projector applies
// an event of type typ: for a consumer that cares about one type only and
// should not wake at every commit.
func (p *Projector) SeenChanged(typ string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.seenWait[typ]
	if !ok {
		ch = make(chan struct{})
		p.seenWait[typ] = ch
	}
	return ch
}

// Progressed returns a channel closed the next time the checkpoint moves.
func (p *Projector) Progressed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress
}

// WaitFor blocks until every event up to seq has been projected.
func (p *Projector) WaitFor(ctx context.Context, seq int64) error {
	for {
		ch := p.Progressed()
		if p.Checkpoint() >= seq {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Lag is how far the projections trail the log.
type Lag struct {
	Checkpoint int64  `json:"checkpoint"`
	Head       int64  `json:"head"`
	Events     int64  `json:"events"`
	LastError  string `json:"last_error,omitempty"`
}

// Lag reads the log's head and compares it with the checkpoint.
func (p *Projector) Lag(ctx context.Context) (Lag, error) {
	head, err := p.l.LastSeq(ctx)
	if err != nil {
		return Lag{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lag := Lag{Checkpoint: p.checkpoint, Head: head, Events: head - p.checkpoint}
	if p.lastErr != nil {
		lag.LastError = p.lastErr.Error()
	}
	return lag, nil
}
