package projections

import (
	"encoding/json"
	"fmt"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// A page is a run of consecutive events applied together (by Rebuild, the
// catch-up goroutine and the inline projection), with each event's data
// decoded at most once whichever projections read it.
type page struct {
	events []ledger.Event
	data   []any // decoded data by index, nil until decoded
}

func newPage(evs []ledger.Event) *page {
	return &page{events: evs, data: make([]any, len(evs))}
}

// decode returns event i's data decoded into the events type its type
// names (a pointer), or nil for a type no projection reads.
func (pg *page) decode(i int) (any, error) {
	if d := pg.data[i]; d != nil {
		return d, nil
	}
	ev := pg.events[i]
	var d any
	switch ev.Type {
	case events.JobEnqueued:
		d = new(events.Enqueued)
	case events.JobStarted:
		d = new(events.Started)
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut:
		d = new(events.AttemptEnded)
	case events.JobRetryScheduled:
		d = new(events.RetryScheduled)
	case events.JobDead:
		d = new(events.Dead)
	case events.JobRecovered:
		d = new(events.Recovered)
	case events.JobCancelRequested, events.JobCanceled:
		d = new(events.Canceled)
	case events.PluginFactRecorded:
		d = new(events.FactRecorded)
	case events.PluginStateMerged:
		d = new(events.StateMerged)
	default:
		return nil, nil
	}
	if err := decodeData(ev.Data, d); err != nil {
		return nil, err
	}
	pg.data[i] = d
	return d, nil
}

// A pageProjection applies a whole page at once: what the page holds of a
// row that the page itself creates is folded in memory and the row written
// once, complete, instead of inserted and then updated event by event. Its
// result must be exactly what Apply, event by event, leaves (TestReplayIsExact
// compares the two).
type pageProjection interface {
	applyPage(conn *sqlite.Conn, pg *page) error
}

// applyPage applies pg to every projection of ps, each over the whole page
// in turn (a projection reads only its own tables and the events, so the
// order across projections does not matter; job_log copies a job's fixed
// columns from job_queue, which is applied first).
func applyPage(conn *sqlite.Conn, ps []Projection, pg *page) error {
	for _, pr := range ps {
		if pp, ok := pr.(pageProjection); ok {
			if err := pp.applyPage(conn, pg); err != nil {
				return fmt.Errorf("projection %s: %w", pr.Name(), err)
			}
			continue
		}
		for _, ev := range pg.events {
			if err := pr.Apply(conn, ev); err != nil {
				return fmt.Errorf("projection %s: apply event %d (%s): %w", pr.Name(), ev.Seq, ev.Type, err)
			}
		}
	}
	return nil
}

// pendingRows are rows a page created and has not written yet, in the order
// they were created, by key.
type pendingRows[K comparable, R any] struct {
	byKey map[K]*R
	order []K
}

func (p *pendingRows[K, R]) add(k K, r *R) {
	if p.byKey == nil {
		p.byKey = map[K]*R{}
	}
	p.byKey[k] = r
	p.order = append(p.order, k)
}

// flush writes the rows still pending, in the order they were created.
func (p *pendingRows[K, R]) flush(write func(*R) error) error {
	for _, k := range p.order {
		if r, ok := p.byKey[k]; ok {
			if err := write(r); err != nil {
				return err
			}
			delete(p.byKey, k)
		}
	}
	p.order = p.order[:0]
	return nil
}

// flushOne writes the row of k now, if it is pending.
func (p *pendingRows[K, R]) flushOne(k K, write func(*R) error) error {
	r, ok := p.byKey[k]
	if !ok {
		return nil
	}
	delete(p.byKey, k)
	return write(r)
}

// totalKey names a row of job_totals.
type totalKey struct {
	plugin string
	status events.Status
}

// applyPage folds each job the page enqueues into one row of job_queue, and
// the page's jobs that reach a terminal status into one addition per row of
// job_totals; the events of other jobs go through Apply (apply, their
// totals added up with the page's).
func (q JobQueue) applyPage(conn *sqlite.Conn, pg *page) error {
	var rows pendingRows[string, queries.InsertJobRowParams]
	write := func(r *queries.InsertJobRowParams) error { return queries.InsertJobRow(conn, *r) }
	var totals pendingRows[totalKey, queries.AddJobTotalParams]
	finished := func(plugin string, status events.Status) error {
		k := totalKey{plugin, status}
		if t := totals.byKey[k]; t != nil {
			t.N++
			return nil
		}
		totals.add(k, &queries.AddJobTotalParams{Plugin: plugin, Status: string(status), N: 1})
		return nil
	}
	for i, ev := range pg.events {
		id := events.JobIDFromStream(ev.Stream)
		if id == "" {
			if ev.Type == events.LedgerArchived {
				// It forgets every job the page enqueued before it.
				if err := rows.flush(write); err != nil {
					return err
				}
				if err := q.apply(conn, ev, finished); err != nil {
					return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
				}
			}
			continue
		}
		row := rows.byKey[id]
		if row == nil && ev.Type != events.JobEnqueued {
			if err := q.apply(conn, ev, finished); err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
			continue
		}
		var d any
		if ev.Type != events.JobSucceeded && ev.Type != events.JobCancelRequested { // as Apply, which reads nothing of these
			var err error
			if d, err = pg.decode(i); err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
		}
		if row == nil { // job.enqueued
			e := d.(*events.Enqueued)
			meta, err := decodeMeta(ev)
			if err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
			at := ev.RecordedAtText()
			rows.add(id, &queries.InsertJobRowParams{
				ID: id, Seq: ev.Seq, Plugin: e.Plugin, Command: e.Command, Payload: rawPtr(e.Payload),
				Status: string(events.StatusQueued), Attempt: 1, MaxAttempts: int64(e.MaxAttempts), SubmittedBy: e.SubmittedBy,
				DedupeKey: strPtr(e.DedupeKey), CreatedAt: at, ParentJobID: strPtr(e.ParentJobID),
				SourceEventID: strPtr(e.SourceEventID), CorrelationID: meta.CorrelationID, UpdatedSeq: ev.Seq,
			})
			continue
		}
		if status, ok := terminal[ev.Type]; ok {
			_ = finished(row.Plugin, status) // it only adds up
		}
		if !foldJob(row, ev, d) {
			// Not one the fold knows (or a second job.enqueued): write the
			// row as it stands and apply the event to it, as Apply would.
			if err := rows.flushOne(id, write); err != nil {
				return err
			}
			if err := q.apply(conn, ev, finished); err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
		}
	}
	if err := rows.flush(write); err != nil {
		return err
	}
	return totals.flush(func(t *queries.AddJobTotalParams) error { return queries.AddJobTotal(conn, *t) })
}

// terminal maps the events that end a job to the status they end it in.
var terminal = map[string]events.Status{
	events.JobSucceeded: events.StatusSucceeded, events.JobDead: events.StatusDead, events.JobCanceled: events.StatusCanceled,
}

// foldJob applies a job event to its row as JobQueue.Apply's statement for
// it would, and reports whether it knew the event.
func foldJob(row *queries.InsertJobRowParams, ev ledger.Event, d any) bool {
	at := ev.RecordedAtText()
	switch ev.Type {
	case events.JobStarted: // SetJobStarted
		row.Status, row.Attempt, row.StartedAt, row.NextRetryAt = string(events.StatusRunning), int64(d.(*events.Started).Attempt), &at, nil
	case events.JobSucceeded: // SetJobEnded
		row.Status, row.CompletedAt, row.LastError, row.NextRetryAt = string(events.StatusSucceeded), &at, nil, nil
	case events.JobFailed, events.JobTimedOut: // SetJobLastError
		row.LastError = strPtr(d.(*events.AttemptEnded).Error)
	case events.JobRetryScheduled: // SetJobRetry
		r := d.(*events.RetryScheduled)
		next := r.NextRetryAt
		row.Status, row.Attempt, row.NextRetryAt = string(events.StatusQueued), int64(r.Attempt), &next
		if r.MaxAttempts > 0 {
			row.MaxAttempts = int64(r.MaxAttempts)
		}
	case events.JobDead: // SetJobDead
		row.Status, row.CompletedAt, row.NextRetryAt = string(events.StatusDead), &at, nil
		if row.LastError == nil {
			row.LastError = strPtr(d.(*events.Dead).Reason)
		}
	case events.JobRecovered: // SetJobQueued, SetJobAttempt
		r := d.(*events.Recovered)
		reason := r.Reason
		if r.Requeued {
			row.Status = string(events.StatusQueued)
		}
		row.Attempt, row.LastError = int64(r.NextAttempt), &reason
	case events.JobCancelRequested: // SetJobStatus
		row.Status = string(events.StatusCancelRequested)
	case events.JobCanceled: // SetJobEnded
		row.Status, row.CompletedAt, row.LastError, row.NextRetryAt = string(events.StatusCanceled), &at, strPtr(d.(*events.Canceled).Reason), nil
	default:
		return false
	}
	row.UpdatedSeq = ev.Seq
	return true
}

// attemptKey names a row of job_log.
type attemptKey struct {
	job     string
	attempt int64
}

// applyPage folds each attempt the page starts, of a job the page enqueues,
// into one row of job_log; the events of other attempts go through Apply.
func (l JobLog) applyPage(conn *sqlite.Conn, pg *page) error {
	var rows pendingRows[attemptKey, queries.InsertJobLogRowParams]
	write := func(r *queries.InsertJobLogRowParams) error { return queries.InsertJobLogRow(conn, *r) }
	// The jobs the page enqueues, with the columns an attempt's row copies
	// from job_queue (fixed once enqueued) and when the job was created.
	type job struct {
		*events.Enqueued
		createdAt string
	}
	enqueued := map[string]job{}
	for i, ev := range pg.events {
		id := events.JobIDFromStream(ev.Stream)
		if id == "" {
			if ev.Type == events.LogPruned || ev.Type == events.LedgerArchived {
				// The prune sees every attempt the page started before it.
				if err := rows.flush(write); err != nil {
					return err
				}
				if err := l.Apply(conn, ev); err != nil {
					return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
				}
			}
			continue
		}
		var key attemptKey
		var row *queries.InsertJobLogRowParams
		var d any
		switch ev.Type {
		case events.JobEnqueued:
			d, err := pg.decode(i)
			if err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
			enqueued[id] = job{d.(*events.Enqueued), ev.RecordedAtText()}
			continue
		case events.JobRetryScheduled, events.JobDead, events.JobCancelRequested:
			continue // nothing of job_log (see Apply)
		case events.JobStarted, events.JobSucceeded, events.JobFailed, events.JobTimedOut, events.JobRecovered, events.JobCanceled:
			j, ours := enqueued[id]
			if !ours {
				break // no attempt of this job is the page's
			}
			var err error
			if d, err = pg.decode(i); err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
			key = attemptKey{id, int64(attemptOf(d))}
			row = rows.byKey[key]
			if ev.Type == events.JobStarted && row == nil {
				rows.add(key, &queries.InsertJobLogRowParams{
					JobID: id, Attempt: key.attempt, Plugin: j.Plugin, Command: j.Command, Status: string(events.AttemptRunning),
					SubmittedBy: j.SubmittedBy, CreatedAt: j.createdAt, StartedAt: ev.RecordedAtText(),
					ParentJobID: strPtr(j.ParentJobID), SourceEventID: strPtr(j.SourceEventID), StartedSeq: ev.Seq,
				})
				continue
			}
		default:
			// Not one the fold knows: the job's attempts still pending are
			// written first, so Apply finds them.
			for k := range rows.byKey {
				if k.job == id {
					if err := rows.flushOne(k, write); err != nil {
						return err
					}
				}
			}
		}
		if row == nil || !foldAttempt(row, ev, d) {
			if row != nil {
				if err := rows.flushOne(key, write); err != nil {
					return err
				}
			}
			if err := l.Apply(conn, ev); err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
		}
	}
	return rows.flush(write)
}

// attemptOf is the attempt an event's decoded data names.
func attemptOf(d any) int {
	switch d := d.(type) {
	case *events.Started:
		return d.Attempt
	case *events.AttemptEnded:
		return d.Attempt
	case *events.Recovered:
		return d.Attempt
	case *events.Canceled:
		return d.Attempt
	}
	return 0
}

// foldAttempt applies an event to an attempt's row as JobLog.Apply's
// statement for it would, and reports whether it knew the event (a second
// job.started of one attempt it does not: Apply's INSERT refuses it).
func foldAttempt(row *queries.InsertJobLogRowParams, ev ledger.Event, d any) bool {
	at, seq := ev.RecordedAtText(), ev.Seq
	switch ev.Type {
	case events.JobSucceeded, events.JobFailed, events.JobTimedOut: // EndJobLog
		e := d.(*events.AttemptEnded)
		status := attemptStatus(ev.Type)
		exit, dur := int64(e.ExitCode), e.DurationMS
		truncated := int64(0)
		if e.StderrTruncated {
			truncated = 1
		}
		row.Status, row.Kind, row.Result, row.Stdout, row.Stderr = string(status), strPtr(string(e.Kind)), rawPtr(e.Response), strPtr(e.Stdout), strPtr(e.Stderr)
		row.StderrTruncated, row.LastError, row.ExitCode, row.CompletedAt, row.DurationMs, row.EndedSeq = truncated, strPtr(e.Error), &exit, &at, &dur, &seq
	case events.JobRecovered: // SetJobLogStatus
		reason := d.(*events.Recovered).Reason
		row.Status, row.LastError, row.CompletedAt, row.EndedSeq = string(events.AttemptRecovered), &reason, &at, &seq
	case events.JobCanceled: // CancelJobLog: only a running attempt
		if row.Status == string(events.AttemptRunning) {
			row.Status, row.LastError, row.CompletedAt, row.EndedSeq = string(events.AttemptCanceled), strPtr(d.(*events.Canceled).Reason), &at, &seq
		}
	default:
		return false
	}
	return true
}

// applyPage inserts the page's facts as Apply does: each is a row of its
// own, so there is nothing to fold, but each event's data is decoded once
// for both plugin projections.
func (f PluginFacts) applyPage(conn *sqlite.Conn, pg *page) error {
	for i, ev := range pg.events {
		if ev.Type != events.PluginFactRecorded {
			continue
		}
		d, err := pg.decode(i)
		if err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
		fr := d.(*events.FactRecorded)
		err = queries.InsertFact(conn, queries.InsertFactParams{
			Seq: ev.Seq, PluginName: pluginOf(ev.Stream), FactType: fr.FactType, JobID: strPtr(fr.JobID), Command: strPtr(fr.Command),
			FactJson: string(fr.Fact), CreatedAt: ev.RecordedAtText(),
		})
		if err != nil {
			return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
		}
	}
	return nil
}

// applyPage writes each plugin's state once, as the page's last fact or
// merge for it left it: every upsert replaces the whole row.
func (s PluginState) applyPage(conn *sqlite.Conn, pg *page) error {
	var rows pendingRows[string, queries.UpsertPluginStateParams]
	for i, ev := range pg.events {
		var state json.RawMessage
		switch ev.Type {
		case events.PluginFactRecorded, events.PluginStateMerged:
			d, err := pg.decode(i)
			if err != nil {
				return fmt.Errorf("apply event %d (%s): %w", ev.Seq, ev.Type, err)
			}
			if fr, ok := d.(*events.FactRecorded); ok {
				state = fr.Fact
			} else {
				state = d.(*events.StateMerged).State
			}
		default:
			continue
		}
		at, plugin := ev.RecordedAtText(), pluginOf(ev.Stream)
		row := &queries.UpsertPluginStateParams{PluginName: plugin, State: string(state), UpdatedAt: &at, UpdatedSeq: ev.Seq}
		if _, ok := rows.byKey[plugin]; ok {
			rows.byKey[plugin] = row
			continue
		}
		rows.add(plugin, row)
	}
	return rows.flush(func(r *queries.UpsertPluginStateParams) error { return queries.UpsertPluginState(conn, *r) })
}
