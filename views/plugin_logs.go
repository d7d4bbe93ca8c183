package views

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// MaxPluginLogJobs is how many of a plugin's newest jobs PluginLogs reads
// the log lines of, at most: what a tail of its logs costs, whatever the
// history.
const MaxPluginLogJobs = 100

// PluginLogLine is a log line of one of a plugin's jobs (see LogLine),
// with the job and the seq of the event that carried it.
type PluginLogLine struct {
	Seq   int64  `json:"seq"`
	JobID string `json:"job_id"`
	LogLine
}

// PluginLogs returns the last n log lines of plugin's jobs (spec §11.6
// logs), oldest first by the seq of the event that carried them, from the
// jobs' streams: the stderr lines its plugin wrote and its responses'
// logs, as JobLogs gives them, of its MaxPluginLogJobs newest jobs at
// most. With after above 0 (a cursor: the seq of the last line seen), the
// first n lines recorded after that seq instead.
func PluginLogs(ctx context.Context, l *ledger.Ledger, plugin string, n int, after int64) ([]PluginLogLine, error) {
	lines, _, err := pluginLogTail(ctx, l, plugin, n, after, math.MaxInt64)
	return lines, err
}

// FollowPluginLogs calls fn with the last n log lines of plugin's jobs (see
// PluginLogs), then with each new one as its event is appended, by this
// process or another, for the jobs of the plugin that are not finished
// and those enqueued from then on, until fn fails or ctx ends (its error).
func FollowPluginLogs(ctx context.Context, l *ledger.Ledger, plugin string, n int, fn func(PluginLogLine) error) error {
	head, err := l.LastSeq(ctx)
	if err != nil {
		return contextError(ctx, err)
	}
	lines, folds, err := pluginLogTail(ctx, l, plugin, n, 0, head)
	if err != nil {
		return contextError(ctx, err)
	}
	for _, line := range lines {
		if err := fn(line); err != nil {
			return err
		}
	}
	// The jobs still going that the tail did not read (older than it went).
	var active []string
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		for _, status := range []events.Status{events.StatusQueued, events.StatusRunning, events.StatusCancelRequested} {
			err := listJobs(conn, JobFilter{Status: status, Plugin: plugin, Limit: math.MaxInt32}, func(r queries.GetJobRow) error {
				if _, ok := folds[r.ID]; !ok {
					active = append(active, r.ID)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return contextError(ctx, err)
	}
	for _, id := range active {
		if folds[id], err = foldJobLog(ctx, l, id, head, nil); err != nil {
			return contextError(ctx, err)
		}
	}
	_, err = l.Follow(ctx, head, ledger.Filter{}, func(ev ledger.Event) error {
		id := events.JobIDFromStream(ev.Stream)
		if id == "" {
			return nil
		}
		fold := folds[id]
		if fold == nil && ev.Type == events.JobEnqueued {
			var d struct {
				Plugin string `json:"plugin"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return fmt.Errorf("event %d: %w", ev.Seq, err)
			}
			if d.Plugin == plugin {
				fold = &jobLog{streamed: map[int]map[int]bool{}}
				folds[id] = fold
			}
		}
		if fold == nil {
			return nil
		}
		err := fold.add(ev, func(line LogLine) error { return fn(PluginLogLine{Seq: ev.Seq, JobID: id, LogLine: line}) })
		if fold.finished {
			delete(folds, id)
		}
		return err
	})
	return err
}

// pluginLogTail reads the last n log lines of plugin's newest jobs carried
// by events after seq after and up to seq upTo (with after above 0, the
// first n), and the folds of the jobs it read that are not finished (their
// events up to upTo).
//
// Lines are ordered by seq, and an older job may have run later, so it
// reads the jobs by the newest seq their lines may have: a finished job's
// lines are at most its updated_seq (the events that follow an end carry
// none), a job not finished may have any. It stops once it has n lines
// newer than any the jobs left may have.
func pluginLogTail(ctx context.Context, l *ledger.Ledger, plugin string, n int, after, upTo int64) ([]PluginLogLine, map[string]*jobLog, error) {
	type candidate struct {
		id    string
		bound int64 // the newest seq its lines may have
	}
	var jobs []candidate
	err := l.Read(ctx, func(conn *sqlite.Conn) error {
		return pluginJobs(conn, plugin, math.MaxInt64, MaxPluginLogJobs, func(j Job) (bool, error) {
			bound := j.UpdatedSeq
			if !j.Status.Terminal() {
				bound = math.MaxInt64
			}
			if bound > after {
				jobs = append(jobs, candidate{j.ID, bound})
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("plugin logs: %w", err)
	}
	slices.SortStableFunc(jobs, func(a, b candidate) int { return cmp.Compare(b.bound, a.bound) })
	lines := []PluginLogLine{}
	folds := map[string]*jobLog{}
	bySeq := func(a, b PluginLogLine) int { return cmp.Compare(a.Seq, b.Seq) }
	for _, j := range jobs {
		if after <= 0 && len(lines) >= n && lines[len(lines)-n].Seq > j.bound {
			break // no line of this job, or of those after it, is among the last n
		}
		fold, err := foldJobLog(ctx, l, j.id, upTo, func(line PluginLogLine) {
			if line.Seq > after {
				lines = append(lines, line)
			}
		})
		if err != nil {
			return nil, nil, err
		}
		if !fold.finished {
			folds[j.id] = fold
		}
		slices.SortStableFunc(lines, bySeq)
	}
	if after > 0 {
		return lines[:min(n, len(lines))], folds, nil
	}
	return lines[max(0, len(lines)-n):], folds, nil
}

// foldJobLog folds job id's events up to seq upTo into its log lines,
// handing each to fn (if set).
func foldJobLog(ctx context.Context, l *ledger.Ledger, id string, upTo int64, fn func(PluginLogLine)) (*jobLog, error) {
	evs, err := l.ReadStream(ctx, events.JobStream(id))
	if err != nil {
		return nil, fmt.Errorf("plugin logs: job %s: %w", id, err)
	}
	fold := &jobLog{streamed: map[int]map[int]bool{}}
	for _, ev := range evs {
		if ev.Seq > upTo {
			break
		}
		err := fold.add(ev, func(line LogLine) error {
			if fn != nil {
				fn(PluginLogLine{Seq: ev.Seq, JobID: id, LogLine: line})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return fold, nil
}
