package commands_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// BenchmarkLedgerArchive runs b.N jobs (enqueue, start, succeed, with a
// small payload and response, every projection inline) and reports what
// they occupy in the ledger file (events, their indexes and the
// projections: used pages, bytes/job), then archives them all and reports
// the archive's throughput (archive-events/s), its size (archive-bytes/job)
// and the pages the archive freed for reuse (freed-bytes/job). ns/op is
// the archive's wall time per job.
func BenchmarkLedgerArchive(b *testing.B) {
	ctx := context.Background()
	var now atomic.Int64
	old := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(old.UnixNano())
	path := filepath.Join(b.TempDir(), "ductile.db")
	l, err := ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL", Now: func() time.Time { return time.Unix(0, now.Load()) }})
	if err != nil {
		b.Fatal(err)
	}
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	defer func() { p.Stop(); l.Close() }()

	used := func() (usedBytes, freeBytes int64) {
		err := l.Read(ctx, func(conn *sqlite.Conn) error {
			var pages, free, size int64
			for q, v := range map[string]*int64{"PRAGMA page_count;": &pages, "PRAGMA freelist_count;": &free, "PRAGMA page_size;": &size} {
				if err := sqlitex.ExecuteTransient(conn, q, &sqlitex.ExecOptions{ResultFunc: func(s *sqlite.Stmt) error { *v = s.ColumnInt64(0); return nil }}); err != nil {
					return err
				}
			}
			usedBytes, freeBytes = (pages-free)*size, free*size
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		return usedBytes, freeBytes
	}
	empty, _ := used()
	payload := json.RawMessage(`{"url":"https://example.com/feed.xml","item":"a title of a typical length"}`)
	for i := 0; i < b.N; i++ {
		res, err := commands.EnqueueJob(ctx, l, commands.Enqueue{Plugin: "bench", Command: "poll", SubmittedBy: events.ActorCLI, MaxAttempts: 3, Payload: payload, Now: time.Now()})
		if err == nil {
			var st commands.Started
			if st, err = commands.StartJob(ctx, l, commands.Start{JobID: res.JobID, Timeout: time.Minute, PID: 1, Now: time.Now()}); err == nil {
				_, err = commands.CompleteJob(ctx, l, commands.Complete{JobID: res.JobID, Attempt: st.Attempt, Now: time.Now(),
					Outcome: commands.Outcome{Kind: events.OutcomeOK, Duration: time.Millisecond, Response: json.RawMessage(`{"status":"ok","result":"ok"}`)}})
			}
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	head, err := l.LastSeq(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.WaitFor(ctx, head); err != nil {
		b.Fatal(err)
	}
	full, _ := used()

	now.Store(old.Add(24 * time.Hour).UnixNano())
	b.ResetTimer()
	_, a, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: old.Add(time.Hour)}.Run(ctx, l)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if a.Events == 0 {
		b.Fatal("nothing archived")
	}
	elapsed := b.Elapsed()
	fi, err := os.Stat(filepath.Join(filepath.Dir(path), a.File))
	if err != nil {
		b.Fatal(err)
	}
	_, freed := used()
	b.ReportMetric(float64(full-empty)/float64(b.N), "bytes/job") // after ResetTimer, which drops metrics
	b.ReportMetric(float64(a.Events)/elapsed.Seconds(), "archive-events/s")
	b.ReportMetric(float64(fi.Size())/float64(b.N), "archive-bytes/job")
	b.ReportMetric(float64(freed)/float64(b.N), "freed-bytes/job")
}
