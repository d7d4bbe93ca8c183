package commands_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// now is the fixed clock every command in these tests runs at.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at formats now+d as event data carries times.
func at(d time.Duration) string { return commands.Time(now.Add(d)) }

type testBundle struct {
	ctx context.Context
	l   *ledger.Ledger
}

// setup opens a ledger on a real file in a temp dir. Its recorded_at clock
// advances one second per transaction, so two events share a recorded_at
// only if they were committed together.
func setup(t *testing.T) *testBundle {
	t.Helper()
	var mu sync.Mutex
	tick := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{
		Synchronous: "NORMAL",
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			tick = tick.Add(time.Second)
			return tick
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return &testBundle{ctx: context.Background(), l: l}
}

// given appends events directly, as earlier commands would have.
func (b *testBundle) given(t *testing.T, evs ...ledger.NewEvent) {
	t.Helper()
	if len(evs) == 0 {
		return
	}
	_, err := b.l.Append(b.ctx, evs...)
	require.NoError(t, err)
}

// mark is the ledger's head: what "then" reads after.
func (b *testBundle) mark(t *testing.T) int64 {
	t.Helper()
	seq, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	return seq
}

// since reads every event appended after seq, on any stream.
func (b *testBundle) since(t *testing.T, seq int64) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	_, err := b.l.ReadFrom(b.ctx, seq, 10000, ledger.Filter{}, func(ev ledger.Event) error {
		out = append(out, ev)
		return nil
	})
	require.NoError(t, err)
	return out
}

// fold reads and folds a job's stream.
func (b *testBundle) fold(t *testing.T, id string) *commands.Job {
	t.Helper()
	evs, err := b.l.ReadStream(b.ctx, events.JobStream(id))
	require.NoError(t, err)
	j, err := commands.FoldJob(evs)
	require.NoError(t, err)
	return j
}

// want is one expected event. Data is JSON compared exactly (JSONEq);
// Meta, when set, is compared the same way.
type want struct {
	Stream  string
	Version int64
	Type    string
	Data    string
	Meta    string
}

// requireEvents checks the events, in order, field by field.
func requireEvents(t *testing.T, want []want, got []ledger.Event) {
	t.Helper()
	require.Len(t, got, len(want), "events: %s", describe(got))
	for i, w := range want {
		g := got[i]
		require.Equal(t, w.Stream, g.Stream, "event %d stream", i)
		require.Equal(t, w.Version, g.Version, "event %d (%s) version", i, g.Type)
		require.Equal(t, w.Type, g.Type, "event %d type", i)
		require.JSONEq(t, w.Data, string(g.Data), "event %d (%s) data", i, g.Type)
		if w.Meta != "" {
			require.JSONEq(t, w.Meta, string(g.Meta), "event %d (%s) meta", i, g.Type)
		}
	}
}

func describe(evs []ledger.Event) string {
	s := ""
	for _, ev := range evs {
		s += fmt.Sprintf("\n  %d %s v%d %s %s", ev.Seq, ev.Stream, ev.Version, ev.Type, ev.Data)
	}
	return s
}

// requireOneTransaction checks that the events were appended by one
// transaction: contiguous seqs and a single recorded_at (the test clock
// ticks once per transaction).
func requireOneTransaction(t *testing.T, seqs []int64, evs []ledger.Event) {
	t.Helper()
	require.Len(t, seqs, len(evs))
	for i, ev := range evs {
		require.Equal(t, seqs[0]+int64(i), seqs[i], "seqs are contiguous")
		require.Equal(t, seqs[i], ev.Seq)
		require.Equal(t, evs[0].RecordedAt, ev.RecordedAt, "event %d (%s) recorded_at", i, ev.Type)
	}
}

// jobStream builds a job's given history event by event, with the dedupe
// events the commands would have appended alongside.
type jobStream struct {
	enq     events.Enqueued
	corr    string
	evs     []ledger.NewEvent
	version int64
	// completedAt is what dedupe.released records (default an hour ago).
	completedAt string
}

// job starts a history with job.enqueued: plugin echo, command poll, 4
// attempts, 30s backoff, submitted by the cli, unless edited.
func job(id string, edit ...func(*events.Enqueued)) *jobStream {
	enq := events.Enqueued{JobID: id, Plugin: "echo", Command: "poll", MaxAttempts: 4,
		BackoffBaseMS: 30000, SubmittedBy: events.ActorCLI}
	for _, e := range edit {
		e(&enq)
	}
	s := &jobStream{enq: enq, corr: id, completedAt: at(-time.Hour)}
	s.add(events.JobEnqueued, enq)
	if enq.DedupeKey != "" {
		s.evs = append(s.evs, ledger.NewEvent{Stream: s.dedupeStream(), ExpectedVersion: ledger.AnyVersion,
			Type: events.DedupeReserved, Data: events.DedupeReservedData{JobID: id}, Meta: ledger.Meta{CorrelationID: id}})
	}
	return s
}

func withKey(key string) func(*events.Enqueued) {
	return func(e *events.Enqueued) { e.DedupeKey = key }
}

func withMaxAttempts(n int) func(*events.Enqueued) {
	return func(e *events.Enqueued) { e.MaxAttempts = n }
}

func (s *jobStream) dedupeStream() string {
	return events.DedupeStream(s.enq.Plugin, s.enq.Command, s.enq.DedupeKey)
}

func (s *jobStream) add(typ string, data any) *jobStream {
	s.evs = append(s.evs, ledger.NewEvent{Stream: events.JobStream(s.enq.JobID), ExpectedVersion: s.version,
		Type: typ, Data: data, Meta: ledger.Meta{CorrelationID: s.corr, Actor: "test"}})
	s.version++
	return s
}

func (s *jobStream) release(status events.Status) *jobStream {
	if s.enq.DedupeKey != "" {
		s.evs = append(s.evs, ledger.NewEvent{Stream: s.dedupeStream(), ExpectedVersion: ledger.AnyVersion,
			Type: events.DedupeReleased, Data: events.DedupeReleasedData{JobID: s.enq.JobID, Status: status, CompletedAt: s.completedAt}})
	}
	return s
}

// endedAt sets when the job's terminal event says it completed.
func (s *jobStream) endedAt(d time.Duration) *jobStream {
	s.completedAt = at(d)
	return s
}

func (s *jobStream) started(attempt int) *jobStream {
	return s.add(events.JobStarted, events.Started{Attempt: attempt, DeadlineAt: at(-time.Hour)})
}

func (s *jobStream) failed(attempt int, msg string) *jobStream {
	return s.add(events.JobFailed, events.AttemptEnded{Attempt: attempt, Error: msg, Kind: events.OutcomeError, Retryable: true, ExitCode: 1})
}

func (s *jobStream) retry(attempt int, nextRetryAt string) *jobStream {
	return s.add(events.JobRetryScheduled, events.RetryScheduled{Attempt: attempt, NextRetryAt: nextRetryAt})
}

func (s *jobStream) succeeded(attempt int) *jobStream {
	s.add(events.JobSucceeded, events.AttemptEnded{Attempt: attempt, Kind: events.OutcomeOK})
	return s.release(events.StatusSucceeded)
}

func (s *jobStream) dead(attempt int, reason string) *jobStream {
	s.add(events.JobDead, events.Dead{Attempt: attempt, Reason: reason})
	return s.release(events.StatusDead)
}

func (s *jobStream) cancelRequested(attempt int) *jobStream {
	return s.add(events.JobCancelRequested, events.Canceled{Attempt: attempt, Reason: "stop"})
}

func (s *jobStream) canceled(attempt int) *jobStream {
	s.add(events.JobCanceled, events.Canceled{Attempt: attempt, Reason: "stop"})
	return s.release(events.StatusCanceled)
}

func (s *jobStream) events() []ledger.NewEvent { return s.evs }

// raw is JSON text for event fields.
func raw(s string) json.RawMessage { return json.RawMessage(s) }
