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
// for a dead job whose last ended attempt timed out (a timeout run), for
// no other; no task, progress or items; each run attempt 1 of its chain.
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

	// job, status, the kinds of its attempts ("": it has not ended; "-":
	// recovery ended it, lost, with no kind)
	jobs := []struct {
		status string
		kinds  []string
	}{
		{"succeeded", []string{"ok"}},
		{"dead", []string{"error", "timeout"}},
		{"dead", []string{"timeout", "error"}},
		{"dead", []string{"timeout", "-"}},
		{"running", []string{""}},
		{"queued", nil},
		{"canceled", []string{"canceled"}},
	}
	for i, j := range jobs {
		id := fmt.Sprintf("job-%d", i)
		_, err := db.Exec(`INSERT INTO job_queue (id, seq, plugin, command, status, attempt, max_attempts, submitted_by, created_at, correlation_id, updated_seq)
			VALUES (?, ?, 'echo', 'poll', ?, 1, 3, 'cli', '2026-01-01T00:00:00Z', ?, ?)`, id, i+1, j.status, id, 100+i)
		require.NoError(t, err)
		for n, kind := range j.kinds {
			var k, done any
			switch kind {
			case "-":
				done = "2026-01-01T00:00:01Z"
			case "":
			default:
				k, done = kind, "2026-01-01T00:00:01Z"
			}
			_, err := db.Exec(`INSERT INTO job_log (job_id, attempt, plugin, command, status, kind, submitted_by, created_at, started_at, completed_at, started_seq)
				VALUES (?, ?, 'echo', 'poll', 'x', ?, 'cli', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?, 1)`, id, n+1, k, done)
			require.NoError(t, err)
		}
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
		"job-4": "running/0/1/0/104", "job-5": "queued/0/1/0/105", "job-6": "canceled/0/1/0/106",
	}, got)

	_, err = p.DownTo(ctx, 20)
	require.NoError(t, err)
	var columns int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM pragma_table_info('job_queue') WHERE name IN ('timed_out', 'task_id', 'progress')`).Scan(&columns))
	require.Zero(t, columns)
}
