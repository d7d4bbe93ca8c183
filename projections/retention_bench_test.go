package projections_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
)

// BenchmarkPrune10kJobLogs measures what the projector pays to apply one
// log.pruned that deletes the logs of 10,000 jobs (one attempt each,
// with a small response and stderr), beside 10,000 newer jobs it keeps.
// ns/op is the append of the event and its projection.
func BenchmarkPrune10kJobLogs(b *testing.B) {
	ctx := context.Background()
	const jobs = 10_000
	for range b.N {
		b.StopTimer()
		clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL", Now: func() time.Time { return clock }})
		require.NoError(b, err)
		for half := range 2 {
			clock = clock.Add(time.Duration(half) * 40 * 24 * time.Hour)
			var evs []ledger.NewEvent
			for i := range jobs {
				id := fmt.Sprintf("%d-%05d", half, i)
				add := func(v int64, typ string, data any) {
					evs = append(evs, ledger.NewEvent{Stream: events.JobStream(id), ExpectedVersion: v, Type: typ, Data: data, Meta: ledger.Meta{CorrelationID: id}})
				}
				add(0, events.JobEnqueued, events.Enqueued{JobID: id, Plugin: "echo", Command: "poll", MaxAttempts: 1, SubmittedBy: "cli"})
				add(1, events.JobStarted, events.Started{Attempt: 1, DeadlineAt: "2030-01-01T00:01:00Z"})
				add(2, events.JobSucceeded, events.AttemptEnded{Attempt: 1, Kind: events.OutcomeOK, DurationMS: 5,
					Response: []byte(`{"status":"ok","result":"done"}`), Stderr: "a line of stderr\n"})
			}
			_, err = l.Append(ctx, evs...)
			require.NoError(b, err)
		}
		p := projections.New(l, projections.Options{})
		_, err = p.CatchUp(ctx)
		require.NoError(b, err)
		clock = clock.Add(time.Hour)
		b.StartTimer()

		_, err = l.Append(ctx, ledger.NewEvent{Stream: events.SystemStream, ExpectedVersion: ledger.AnyVersion, Type: events.LogPruned,
			Data: events.LogPrunedData{Before: clock.Add(-30 * 24 * time.Hour).Format(ledger.TimeFormat), Jobs: jobs, By: "bench"}})
		require.NoError(b, err)
		_, err = p.CatchUp(ctx)
		require.NoError(b, err)

		b.StopTimer()
		var n int64
		require.NoError(b, l.Read(ctx, func(conn *sqlite.Conn) error {
			return sqlitex.ExecuteTransient(conn, `SELECT count(DISTINCT job_id) FROM job_log`, &sqlitex.ExecOptions{
				ResultFunc: func(stmt *sqlite.Stmt) error { n = stmt.ColumnInt64(0); return nil }})
		}))
		require.Equal(b, int64(jobs), n, "the newer half keeps its logs")
		require.NoError(b, l.Close())
		b.StartTimer()
	}
}
