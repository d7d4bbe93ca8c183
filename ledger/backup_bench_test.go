package ledger_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ductile/ductile/ledger"
)

// BenchmarkBackup measures Backup of a ledger of 200,000 events (~300-byte
// job-like payloads, in batches of 1,000), the copy only (ductile ledger
// backup then verifies it, which replays the log and takes longer).
func BenchmarkBackup(b *testing.B) {
	const events = 200_000
	ctx := context.Background()
	dir := b.TempDir()
	l, err := ledger.Open(ctx, filepath.Join(dir, "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := map[string]string{"payload": fmt.Sprintf("%0300d", 0)}
	for i := 0; i < events; i += 1000 {
		batch := make([]ledger.NewEvent, 1000)
		for j := range batch {
			batch[j] = ledger.NewEvent{Stream: fmt.Sprintf("job/%012d", (i+j)/4), Type: "bench.happened", Data: payload, ExpectedVersion: ledger.AnyVersion}
		}
		if _, err := l.Append(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var r ledger.BackupResult
	for i := range b.N {
		to := filepath.Join(dir, fmt.Sprintf("copy-%d.db", i))
		if r, err = l.Backup(ctx, to, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.Remove(to)
		b.StartTimer()
	}
	b.ReportMetric(float64(r.Bytes)/(1<<20), "MiB")
	b.ReportMetric(float64(r.Head)/(b.Elapsed().Seconds()/float64(b.N)), "events/s")
}
