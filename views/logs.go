package views

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/pluginhost"
)

// LogLine is one line of a job's logs: a line its plugin wrote to stderr,
// or an entry of its response's logs.
type LogLine struct {
	Attempt int    `json:"attempt"`
	At      string `json:"at"`     // when the core read it (RFC 3339, UTC)
	Stream  string `json:"stream"` // stderr | plugin
	Level   string `json:"level,omitempty"`
	Message string `json:"message"`
}

// JobLogs returns job id's log lines so far (none: an empty list), read
// from its stream, the source of truth: the stderr lines streamed while an
// attempt ran (job.stderr_written, each with the time it was read), then at
// the attempt's end the stderr lines that were not streamed (over the
// bound, or recorded before streaming existed) and the response's logs,
// both at the time the attempt ended. No such job is a *JobNotFoundError.
func JobLogs(ctx context.Context, l *ledger.Ledger, id string) ([]LogLine, error) {
	lines := []LogLine{}
	_, _, err := readJobLog(ctx, l, id, func(line LogLine) error { lines = append(lines, line); return nil })
	if err != nil {
		return nil, err
	}
	return lines, nil
}

// FollowJobLogs calls fn with job id's log lines so far (see JobLogs), then
// with each new one as its event is appended, by this process or another,
// until the job is finished (succeeded, dead or canceled: nil), fn fails,
// or ctx ends (its error).
func FollowJobLogs(ctx context.Context, l *ledger.Ledger, id string, fn func(LogLine) error) error {
	fold, last, err := readJobLog(ctx, l, id, fn)
	if err != nil || fold.finished {
		return contextError(ctx, err)
	}
	_, err = l.Follow(ctx, last, ledger.Filter{Stream: events.JobStream(id)}, func(ev ledger.Event) error {
		if err := fold.add(ev, fn); err != nil {
			return err
		}
		if fold.finished {
			return ledger.ErrStopFollowing
		}
		return nil
	})
	return err
}

// contextError is err, or ctx's error if ctx has ended: a read cut short by
// the end of its context fails with an error of its own (SQLite's
// "interrupted"), which callers must not take for a failure.
func contextError(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readJobLog calls fn for each log line of job id's stream as it is now,
// and returns the fold and the seq of the stream's last event.
func readJobLog(ctx context.Context, l *ledger.Ledger, id string, fn func(LogLine) error) (*jobLog, int64, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, 0, err
	}
	if len(evs) == 0 {
		return nil, 0, &JobNotFoundError{ID: id}
	}
	fold := &jobLog{streamed: map[int]map[int]bool{}}
	for _, ev := range evs {
		if err := fold.add(ev, fn); err != nil {
			return nil, 0, err
		}
	}
	return fold, evs[len(evs)-1].Seq, nil
}

// jobLog turns a job's events into log lines.
type jobLog struct {
	finished bool                 // the job succeeded, is dead or canceled
	streamed map[int]map[int]bool // attempt → numbers of its stderr lines streamed
}

// add calls fn for each log line of ev, a job event.
func (lg *jobLog) add(ev ledger.Event, fn func(LogLine) error) error {
	var lines []LogLine
	at := ev.RecordedAt.UTC().Format(time.RFC3339Nano)
	switch ev.Type {
	case events.JobStderrWritten:
		var d events.StderrWritten
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		if lg.streamed[d.Attempt] == nil {
			lg.streamed[d.Attempt] = map[int]bool{}
		}
		for i, l := range d.Lines {
			lg.streamed[d.Attempt][d.Line+i] = true
			lines = append(lines, LogLine{Attempt: d.Attempt, At: l.At, Stream: "stderr", Message: l.Text})
		}
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		var d events.AttemptEnded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return fmt.Errorf("event %d: %w", ev.Seq, err)
		}
		for i, text := range pluginhost.SplitStderr([]byte(d.Stderr)) {
			if !lg.streamed[d.Attempt][i+1] {
				lines = append(lines, LogLine{Attempt: d.Attempt, At: at, Stream: "stderr", Message: text})
			}
		}
		var resp struct {
			Logs []struct {
				Level   string `json:"level"`
				Message string `json:"message"`
			} `json:"logs"`
		}
		_ = json.Unmarshal(d.Response, &resp) // no response, or one without logs
		for _, entry := range resp.Logs {
			lines = append(lines, LogLine{Attempt: d.Attempt, At: at, Stream: "plugin", Level: entry.Level, Message: entry.Message})
		}
	}
	switch ev.Type {
	case events.JobSucceeded, events.JobDead, events.JobCanceled:
		lg.finished = true
	}
	for _, line := range lines {
		if err := fn(line); err != nil {
			return err
		}
	}
	return nil
}
