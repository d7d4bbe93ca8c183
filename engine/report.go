package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
)

// ProgressInterval is the least time between two job.progressed of one
// attempt in the ledger: a plugin's progress lines in between are coalesced
// into the next, and the last value is written when the attempt ends.
const ProgressInterval = time.Second

// writeTimeout bounds one progress write, and the last one Close makes.
const writeTimeout = 10 * time.Second

// RunReport records what one running attempt of a job reports on its
// control channel: progress (coalesced, never blocking the caller) and
// export items (durable, one at a time). Make it with Engine.Report, and
// Close it before the attempt's outcome is completed. Its methods are safe
// for concurrent use.
type RunReport struct {
	e       *Engine
	jobID   string
	attempt int
	log     *slog.Logger

	mu      sync.Mutex
	state   events.Progressed // the attempt's progress, every line merged
	lines   int               // lines merged since the last write
	dirty   bool              // state has changed since the last write
	ended   bool              // the job refused a write: it no longer runs this attempt
	refused bool              // a bad progress value was logged (once per attempt)
	closed  bool
	started bool          // the writer goroutine runs
	wake    chan struct{} // one pending signal for the writer
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the writer returns
}

// Report is the reporter of attempt of job jobID, which is running. Its
// writer goroutine starts with the first progress line; Close stops it.
func (e *Engine) Report(jobID string, attempt int) *RunReport {
	return (&RunReport{
		e: e, jobID: jobID, attempt: attempt,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}).WithLogger(slog.Default())
}

// WithLogger makes the report log to l (with the job id and attempt); the
// default is slog.Default(). Call it before the first line.
func (r *RunReport) WithLogger(l *slog.Logger) *RunReport {
	r.log = l.With("job_id", r.jobID, "attempt", r.attempt)
	return r
}

// Progress takes one progress line of the plugin. It never blocks on the
// ledger: the line is merged into the attempt's progress (a field the line
// leaves out keeps its value), and a writer appends the merged value at
// most once per ProgressInterval, so a slow ledger costs only the values
// in between. A line after Close is dropped.
func (r *RunReport) Progress(p events.Progressed) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.ended {
		return
	}
	r.merge(p)
	if !r.started {
		r.started = true
		go r.write()
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// merge folds a line into state: a progress outside [0, 1] is dropped
// (logged), a message or stage over its cap cut to fit.
func (r *RunReport) merge(p events.Progressed) {
	if p.Progress != nil {
		v := *p.Progress
		if commands.CheckProgress(events.Progressed{Progress: &v}) != nil {
			if !r.refused {
				r.refused = true
				r.log.Warn("progress line refused: progress must be a number in [0, 1] (further ones are dropped silently)", "progress", v)
			}
		} else {
			r.state.Progress = &v
		}
	}
	if p.Message != "" {
		r.state.Message = cut(p.Message, commands.MaxProgressMessage)
	}
	if p.Stage != "" {
		r.state.Stage = cut(p.Stage, commands.MaxProgressStage)
	}
	r.lines += max(p.Lines, 1)
	r.dirty = true
}

// write is the writer: it appends the merged progress when woken, at most
// once per ProgressInterval, until Close.
func (r *RunReport) write() {
	defer close(r.done)
	var last time.Time
	for {
		select {
		case <-r.stop:
			return
		case <-r.wake:
		}
		if wait := ProgressInterval - time.Since(last); wait > 0 && !last.IsZero() {
			t := time.NewTimer(wait)
			select {
			case <-r.stop:
				t.Stop()
				return // Close writes what is left
			case <-t.C:
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		r.flush(ctx)
		cancel()
		last = time.Now() // after the commit: its recorded_at is earlier
	}
}

// flush appends the merged progress if it changed since the last append.
func (r *RunReport) flush(ctx context.Context) {
	r.mu.Lock()
	if !r.dirty || r.ended {
		r.mu.Unlock()
		return
	}
	p := r.state
	p.Lines, r.lines, r.dirty = r.lines, 0, false
	r.mu.Unlock()
	err := commands.RecordProgress(ctx, r.e.ledger, commands.Progress{JobID: r.jobID, Attempt: r.attempt, Progress: p})
	switch {
	case errors.Is(err, commands.ErrInvalidTransition):
		r.mu.Lock()
		r.ended = true
		r.mu.Unlock()
		r.log.Info("progress dropped: the job no longer runs this attempt", "error", err)
	case err != nil:
		r.log.Warn("progress not recorded", "error", err)
	}
}

// Export records an export item of the attempt (commands.RecordExport):
// checked against the caps (an error wrapping commands.ErrInvalidExport
// stores nothing), numbered, durable once it returns. It returns the item
// as stored.
func (r *RunReport) Export(ctx context.Context, item events.Exported) (events.Exported, error) {
	stored, _, err := commands.RecordExport(ctx, r.e.ledger, commands.Export{JobID: r.jobID, Attempt: r.attempt, Item: item})
	return stored, err
}

// Close stops the writer and appends the last progress value if it was
// not written yet. Call it once the plugin has exited and before the
// attempt's outcome is completed; later calls do nothing.
func (r *RunReport) Close(ctx context.Context) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	started := r.started
	r.mu.Unlock()
	close(r.stop)
	if started {
		<-r.done
	}
	r.flush(ctx)
}

// cut is s cut to at most n bytes, on a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
