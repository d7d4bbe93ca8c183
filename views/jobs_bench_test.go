package views

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ductile/ductile/internal/ledgertest"

	"github.com/google/uuid"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
)

// BenchmarkJobViews measures what ductile queue and ductile job list read,
// on ledgers holding 0, 20 000 and 200 000 finished jobs beside the same
// small queue (see historyLedger): their cost must follow what they show,
// not the size of the history, so each view's figures stay flat across
// the three sizes.
func BenchmarkJobViews(b *testing.B) {
	views := []struct {
		name string
		read func(conn *sqlite.Conn) (int, error)
	}{
		{"queue", func(conn *sqlite.Conn) (int, error) {
			q, err := readQueue(conn, 50)
			return len(q.Jobs), err
		}},
	}
	for _, status := range append([]events.Status{""}, events.JobStatuses()...) {
		name := "list"
		if status != "" {
			name += "-" + string(status)
		}
		views = append(views, struct {
			name string
			read func(conn *sqlite.Conn) (int, error)
		}{name, func(conn *sqlite.Conn) (int, error) {
			n := 0
			err := listJobs(conn, JobFilter{Status: status, Limit: 50},
				func(queries.GetJobRow) error { n++; return nil })
			return n, err
		}})
	}
	for _, finished := range []int{0, 20_000, 200_000} {
		b.Run(fmt.Sprintf("finished=%d", finished), func(b *testing.B) {
			l := historyLedger(b, finished)
			for _, v := range views {
				b.Run(v.name, func(b *testing.B) {
					rows := 0
					err := l.Read(context.Background(), func(conn *sqlite.Conn) error {
						for range b.N {
							var err error
							if rows, err = readSnapshot(conn, v.read); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(rows), "rows")
				})
			}
		})
	}
}

// BenchmarkResolveJobID measures what every command given a job id does
// first (ResolveJobID), on ledgers of 0, 20 000 and 200 000 finished jobs:
// the whole id, the short id the CLI prints, and 6 characters of it. Each
// reads only the streams it matches, so the figures stay flat across the
// sizes.
func BenchmarkResolveJobID(b *testing.B) {
	for _, finished := range []int{0, 20_000, 200_000} {
		b.Run(fmt.Sprintf("finished=%d", finished), func(b *testing.B) {
			l := historyLedger(b, finished)
			var id string // a dead job of the history, else the retrying one
			err := l.Read(context.Background(), func(conn *sqlite.Conn) error {
				return listJobs(conn, JobFilter{Limit: 1, Status: events.StatusDead}, func(r queries.GetJobRow) error { id = r.ID; return nil })
			})
			if err != nil || id == "" {
				b.Fatalf("no job to resolve: %v", err)
			}
			for _, arg := range []struct{ name, arg string }{{"whole", id}, {"short", ShortID(id)}, {"short-prefix", ShortID(id)[:6]}} {
				b.Run(arg.name, func(b *testing.B) {
					for range b.N {
						got, err := ResolveJobID(context.Background(), l, arg.arg)
						if err != nil || got != id {
							b.Fatalf("resolve %s: %s, %v", arg.arg, got, err)
						}
					}
				})
			}
		})
	}
}

// readSnapshot runs read in a read transaction of its own, as the CLI does
// (ledger.ReadSnapshot).
func readSnapshot(conn *sqlite.Conn, read func(conn *sqlite.Conn) (int, error)) (n int, err error) {
	end := sqlitex.Transaction(conn)
	defer end(&err)
	return read(conn)
}

// historyLedger builds a ledger whose projections hold finished jobs behind
// the same small queue at every size: a job waiting for its retry (the
// oldest), then the history (98% succeeded, 1% dead after a failed
// attempt, 1% canceled while queued), then one running job with a cancel
// request, two running and ten queued. Each kind of lifecycle is recorded
// once through the real commands; the history repeats those events under
// new job ids, appended in large batches, and the projections are rebuilt
// once at the end, which is much faster than running every job.
func historyLedger(b *testing.B, finished int) *ledger.Ledger {
	b.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	enqueue := func(maxAttempts int) string {
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorCLI,
			MaxAttempts: maxAttempts, BackoffBase: time.Hour, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		return res.JobID
	}
	start := func(id string) {
		if _, err := commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: now}); err != nil {
			b.Fatal(err)
		}
	}
	complete := func(id string, out commands.Outcome, facts []commands.FactRule) {
		if _, err := commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: 1, Outcome: out, Facts: facts, Now: now}); err != nil {
			b.Fatal(err)
		}
	}
	cancel := func(id string) {
		if _, err := commands.CancelJob(ctx, l, commands.Cancel{JobID: id, Reason: "bench", Actor: events.ActorCLI, Now: now}); err != nil {
			b.Fatal(err)
		}
	}
	failed := commands.Outcome{Kind: events.OutcomeError, Retryable: true, Error: "boom", ExitCode: 1, Stderr: "boom\n"}

	retrying := enqueue(3)
	start(retrying)
	complete(retrying, failed, nil)

	// The three lifecycles the history repeats, recorded once.
	record := func(run func(id string)) []ledger.Event {
		from := l.Head()
		id := enqueue(1)
		run(id)
		var evs []ledger.Event
		if _, err := l.ReadFrom(ctx, from, 100, ledger.Filter{}, func(ev ledger.Event) error { evs = append(evs, ev); return nil }); err != nil {
			b.Fatal(err)
		}
		return evs
	}
	succeeded := record(func(id string) {
		start(id)
		complete(id, commands.Outcome{Kind: events.OutcomeOK, Duration: 40 * time.Millisecond, Stderr: "working\n",
			Response:     json.RawMessage(`{"status":"ok","result":"echo poll","events":[{"type":"echo.poll","payload":{}}],"state_updates":{"runs":1},"logs":[{"level":"info","message":"echo poll run 1"}]}`),
			StateUpdates: json.RawMessage(`{"runs":1}`)}, []commands.FactRule{{FactType: "echo.snapshot", View: "mirror_object"}})
	})
	dead := record(func(id string) {
		start(id)
		complete(id, commands.Outcome{Kind: events.OutcomeError, Error: "boom", ExitCode: 1, Stderr: "boom\n"}, nil)
	})
	canceled := record(func(id string) { cancel(id) })

	var batch []ledger.NewEvent
	flush := func() {
		if len(batch) > 0 {
			if _, err := l.Append(ctx, batch...); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for i := 3; i < finished; i++ { // the three recorded are history too
		template := succeeded
		switch i % 100 {
		case 0:
			template = dead
		case 50:
			template = canceled
		}
		batch = append(batch, ledgertest.RepeatLifecycle(b, template, uuid.Must(uuid.NewV7()).String())...)
		if len(batch) >= 4096 {
			flush()
		}
	}
	flush()

	requested := enqueue(1)
	start(requested)
	cancel(requested)
	for i := range 12 {
		id := enqueue(1)
		if i < 2 {
			start(id)
		}
	}
	if _, err := projections.Rebuild(ctx, l, 0); err != nil {
		b.Fatal(err)
	}
	return l
}
