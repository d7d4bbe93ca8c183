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

// A ledger from before 00021 gets job_queue's run columns: timed_out set
// as the projector keeps it, from each job's stream (the last of its
// attempts' ends and its own end is a job.timed_out); no task, progress or
// items; each run attempt 1 of its chain.
func TestRunsMigrationListsEveryJob(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 20)
	require.NoError(t, err)

	// Each job's status and the events of its stream after job.enqueued.
	jobs := []struct {
		status string
		events []string
	}{
		{"succeeded", []string{"job.started", "job.succeeded"}},
		{"dead", []string{"job.started", "job.failed", "job.retry_scheduled", "job.started", "job.timed_out", "job.dead"}},
		{"dead", []string{"job.started", "job.timed_out", "job.retry_scheduled", "job.started", "job.failed", "job.dead"}},
		{"dead", []string{"job.started", "job.timed_out", "job.retry_scheduled", "job.started", "job.recovered", "job.dead"}},
		{"queued", []string{"job.started", "job.timed_out", "job.retry_scheduled"}},
		{"canceled", []string{"job.started", "job.timed_out", "job.retry_scheduled", "job.canceled"}},
		{"succeeded", []string{"job.started", "job.timed_out", "job.retry_scheduled", "job.started", "job.succeeded"}},
		{"running", []string{"job.started"}},
	}
	seq := 0
	for i, j := range jobs {
		id := fmt.Sprintf("job-%d", i)
		for v, typ := range append([]string{"job.enqueued"}, j.events...) {
			seq++
			_, err := db.Exec(`INSERT INTO events (seq, stream, version, type, data, meta, recorded_at, prev_hash, hash)
				VALUES (?, ?, ?, ?, '{}', '{}', '2026-01-01T00:00:00.000000000Z', zeroblob(32), zeroblob(32))`, seq, "job/"+id, v+1, typ)
			require.NoError(t, err)
		}
		_, err := db.Exec(`INSERT INTO job_queue (id, seq, plugin, command, status, attempt, max_attempts, submitted_by, created_at, correlation_id, updated_seq)
			VALUES (?, ?, 'echo', 'poll', ?, 1, 3, 'cli', '2026-01-01T00:00:00Z', ?, ?)`, id, i+1, j.status, id, 100+i)
		require.NoError(t, err)
	}

	_, err = p.UpTo(ctx, 21)
	require.NoError(t, err)
	got := map[string]string{}
	rows, err := db.Query(`SELECT id, status, timed_out, run_attempt, exports_count, updated_seq, task_id IS NULL AND progress IS NULL FROM job_queue`)
	require.NoError(t, err)
	for rows.Next() {
		var id, status string
		var timedOut, attempt, exports, updated int
		var empty bool
		require.NoError(t, rows.Scan(&id, &status, &timedOut, &attempt, &exports, &updated, &empty))
		require.True(t, empty)
		got[id] = fmt.Sprintf("%s/%d/%d/%d/%d", status, timedOut, attempt, exports, updated)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{
		"job-0": "succeeded/0/1/0/100", "job-1": "dead/1/1/0/101", "job-2": "dead/0/1/0/102", "job-3": "dead/0/1/0/103",
		"job-4": "queued/1/1/0/104", "job-5": "canceled/0/1/0/105", "job-6": "succeeded/0/1/0/106", "job-7": "running/0/1/0/107",
	}, got)

	_, err = p.DownTo(ctx, 20)
	require.NoError(t, err)
	var columns int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM pragma_table_info('job_queue') WHERE name IN ('timed_out', 'task_id', 'progress')`).Scan(&columns))
	require.Zero(t, columns)
}
