package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/ductile/ductile/internal/ledgertest"

	"github.com/google/uuid"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/metrics"
	"github.com/ductile/ductile/projections"
)

// BenchmarkScrape measures a /metrics scrape on ledgers of 0 and 100 000
// finished jobs (1% dead, 1% canceled, the rest succeeded) beside a queue
// of 10: its cost must follow the jobs in indexed statuses, not the history.
func BenchmarkScrape(b *testing.B) {
	for _, finished := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("finished=%d", finished), func(b *testing.B) {
			l := historyLedger(b, finished)
			m := metrics.New(metrics.Options{Ledger: l})
			h := m.Handler()
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				io.Discard.Write(rec.Body.Bytes())
			}
		})
	}
}

// historyLedger is a ledger of finished jobs, their lifecycles recorded
// once through the commands and repeated as appended events.
func historyLedger(b *testing.B, finished int) *ledger.Ledger {
	b.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(b.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	must := func(_ any, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	enqueue := func() string {
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "echo", Command: "poll", SubmittedBy: events.ActorCLI,
			MaxAttempts: 1, BackoffBase: time.Hour, Now: now})
		must(nil, err)
		return res.JobID
	}
	record := func(run func(id string)) []ledger.Event {
		from := l.Head()
		run(enqueue())
		var evs []ledger.Event
		must(l.ReadFrom(ctx, from, 100, ledger.Filter{}, func(ev ledger.Event) error { evs = append(evs, ev); return nil }))
		return evs
	}
	ended := func(out commands.Outcome) func(id string) {
		return func(id string) {
			must(commands.StartJob(ctx, l, commands.Start{JobID: id, Timeout: time.Minute, PID: 1, Now: now}))
			must(commands.CompleteJob(ctx, l, commands.Complete{JobID: id, Attempt: 1, Outcome: out, Now: now}))
		}
	}
	succeeded := record(ended(commands.Outcome{Kind: events.OutcomeOK, Duration: 40 * time.Millisecond,
		Response: json.RawMessage(`{"status":"ok","result":"fine"}`)}))
	dead := record(ended(commands.Outcome{Kind: events.OutcomeError, Error: "boom", ExitCode: 1}))
	canceled := record(func(id string) {
		must(commands.CancelJob(ctx, l, commands.Cancel{JobID: id, Reason: "bench", Actor: events.ActorCLI, Now: now}))
	})
	var batch []ledger.NewEvent
	flush := func() {
		if len(batch) > 0 {
			must(l.Append(ctx, batch...))
			batch = batch[:0]
		}
	}
	for i := 3; i < finished; i++ {
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
	for range 10 {
		enqueue()
	}
	must(projections.Rebuild(ctx, l, 0))
	return l
}
