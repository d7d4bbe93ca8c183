package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/migrations"
)

// A ledger from before 00015 starts job_totals from the finished jobs its
// job_queue holds, by plugin and terminal status; active jobs count in
// none.
func TestJobTotalsMigrationCountsFinishedJobs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 14)
	require.NoError(t, err)

	jobs := []struct{ plugin, status string }{
		{"echo", "succeeded"}, {"echo", "succeeded"}, {"echo", "dead"}, {"echo", "queued"},
		{"fetch", "canceled"}, {"fetch", "running"}, {"fetch", "cancel_requested"}, {"fetch", "succeeded"},
	}
	for i, j := range jobs {
		_, err := db.Exec(`INSERT INTO job_queue (id, seq, plugin, command, status, attempt, max_attempts, submitted_by, created_at, correlation_id, updated_seq)
			VALUES (?, ?, ?, 'poll', ?, 1, 1, 'cli', '2026-01-01T00:00:00Z', ?, ?)`, fmt.Sprintf("job-%d", i), i+1, j.plugin, j.status, fmt.Sprintf("job-%d", i), i+1)
		require.NoError(t, err)
	}

	_, err = p.UpTo(ctx, 15)
	require.NoError(t, err)
	totals := map[string]int64{}
	rows, err := db.Query(`SELECT plugin, status, n FROM job_totals`)
	require.NoError(t, err)
	for rows.Next() {
		var plugin, status string
		var n int64
		require.NoError(t, rows.Scan(&plugin, &status, &n))
		totals[plugin+"/"+status] = n
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int64{"echo/succeeded": 2, "echo/dead": 1, "fetch/canceled": 1, "fetch/succeeded": 1}, totals)

	_, err = p.DownTo(ctx, 14)
	require.NoError(t, err)
	var tables int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'job_totals'`).Scan(&tables))
	require.Zero(t, tables)
}
