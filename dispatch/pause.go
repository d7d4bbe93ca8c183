package dispatch

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ductile/ductile/commands"
)

// Start pauses: after a start the ledger refused for now, nothing starts
// for MinStartPause, doubled at each further refusal up to MaxStartPause.
// A failed start spawns a plugin process and kills it: without the pause a
// full disk made the daemon do that about 1,000 times a second.
const (
	MinStartPause = 100 * time.Millisecond
	MaxStartPause = 30 * time.Second
)

// startFailureWindow is how often a run of refused starts is logged.
const startFailureWindow = 30 * time.Second

// startPause holds back every start after one the ledger refused for now
// (busy, disk full, an I/O error), and logs the run of refusals once with a
// count. The first start recorded ends it.
type startPause struct {
	log *slog.Logger
	now func() time.Time

	mu          sync.Mutex
	length      time.Duration // the current pause's
	pausedUntil time.Time
	failures    repeatedFailure

	paused  atomic.Bool // a pause is set: the lock-free check of every start
	refused atomic.Int64
}

func newStartPause(log *slog.Logger, now func() time.Time) *startPause {
	return &startPause{log: log, now: now, failures: repeatedFailure{
		msg: "could not record a job's start; no job starts until the pause is over", window: startFailureWindow,
	}}
}

// refusedForNow reports whether a start failed for a reason that may pass
// (the ledger busy, full…), not because the job moved on.
func refusedForNow(startErr error) bool {
	return startErr != nil && !errors.Is(startErr, commands.ErrInvalidTransition) && !errors.Is(startErr, commands.ErrNotDue)
}

// startRefused pauses starts after one the ledger refused for now
// (startErr): for MinStartPause, or twice the last pause (at most
// MaxStartPause) if this refusal came after that pause was over. A refusal
// during a pause (another worker's start, queued before it) only counts.
func (p *startPause) startRefused(startErr error) {
	p.refused.Add(1)
	p.mu.Lock()
	now := p.now()
	if !now.Before(p.pausedUntil) {
		p.length = min(max(2*p.length, MinStartPause), MaxStartPause)
		p.pausedUntil = now.Add(p.length)
	}
	p.paused.Store(true)
	length := p.length
	line := p.failures.failed(now)
	p.mu.Unlock()
	if line != "" {
		p.log.Warn(line, "err", startErr, "pause", length.String())
	}
}

// startRecorded ends a pause of starts, if there is one: the ledger
// records starts again.
func (p *startPause) startRecorded() {
	if !p.paused.Load() {
		return
	}
	p.mu.Lock()
	p.length, p.pausedUntil = 0, time.Time{}
	p.paused.Store(false)
	line, refused := p.failures.ended(p.now())
	p.mu.Unlock()
	if line != "" {
		p.log.Warn(line)
	}
	if refused > 0 {
		p.log.Info("job starts are recorded again", "refused_starts", refused)
	}
}

// until is when the current pause ends (zero: none).
func (p *startPause) until() time.Time {
	if !p.paused.Load() {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pausedUntil
}

// left is how long the current pause has to run.
func (p *startPause) left() time.Duration {
	return max(p.until().Sub(p.now()), 0)
}

// refusals is how many starts the ledger has refused for now.
func (p *startPause) refusals() int64 { return p.refused.Load() }
