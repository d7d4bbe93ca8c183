package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/migrations"
)

// A ledger written under schema 3 (seq AUTOINCREMENT, the streams and
// event_counts tables) keeps every event and its hash chain through 00004,
// and goes on appending from its last seq.
func TestLeanWritesMigrationKeepsTheLog(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 3)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	old, err := ledger.Open(ctx, path, ledger.Options{SkipMigrate: true, Synchronous: "NORMAL"})
	require.NoError(t, err)
	for i := range 40 {
		_, err := old.Append(ctx, ledger.NewEvent{Stream: fmt.Sprintf("s/%d", i%7), ExpectedVersion: ledger.AnyVersion, Type: "t.happened", Data: map[string]int{"i": i}})
		require.NoError(t, err)
	}
	require.NoError(t, old.Close())

	version, err := migrations.Up(ctx, path)
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), version)
	db, err = sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	var schema string
	require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'events'`).Scan(&schema))
	require.NotContains(t, schema, "AUTOINCREMENT")
	var triggers int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'events'`).Scan(&triggers))
	require.Equal(t, 3, triggers, "append-only and contiguity triggers are back")
	require.NoError(t, db.Close())

	l, err := ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.Equal(t, int64(40), res.Events)
	seqs, err := l.Append(ctx, ledger.NewEvent{Stream: "s/0", ExpectedVersion: ledger.AnyVersion, Type: "t.happened"})
	require.NoError(t, err)
	require.Equal(t, []int64{41}, seqs)
	res, err = l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
}

// Migration 00006 rebuilds job_log as a WITHOUT ROWID table keyed by
// (job_id, attempt) and keeps every row as it was; 00006's down undoes it.
func TestJobLogMigrationKeepsItsRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 5)
	require.NoError(t, err)
	for i := range 30 {
		_, err := db.Exec(`INSERT INTO job_log (job_id, attempt, plugin, command, status, result, stderr, submitted_by,
			created_at, started_at, started_seq, ended_seq) VALUES (?, ?, 'echo', 'poll', 'succeeded', '{"i":1}', 'e', 'cli', 'c', 's', ?, ?)`,
			fmt.Sprintf("job-%02d", i/3), i%3+1, 2*i+1, 2*i+2)
		require.NoError(t, err)
	}
	dump := func() string {
		var out string
		require.NoError(t, db.QueryRow(`SELECT group_concat(job_id || ':' || attempt || ':' || status || ':' || result || ':' ||
			stderr || ':' || started_seq || ':' || ended_seq, ' ') FROM (SELECT * FROM job_log ORDER BY started_seq)`).Scan(&out))
		return out
	}
	schema := func() string {
		var s string
		require.NoError(t, db.QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'job_log'`).Scan(&s))
		return s
	}
	before := dump()

	_, err = p.UpTo(ctx, 6)
	require.NoError(t, err)
	require.Contains(t, schema(), "WITHOUT ROWID")
	require.Equal(t, before, dump(), "rows changed in the rebuild")
	_, err = db.Exec(`INSERT INTO job_log (job_id, attempt, plugin, command, status, submitted_by, created_at, started_at, started_seq)
		VALUES ('job-00', 1, 'echo', 'poll', 'running', 'cli', 'c', 's', 99)`)
	require.Error(t, err, "a second row with the same (job_id, attempt) got in")

	_, err = p.DownTo(ctx, 5)
	require.NoError(t, err)
	require.NotContains(t, schema(), "WITHOUT ROWID")
	require.Equal(t, before, dump(), "rows changed going down")
}
