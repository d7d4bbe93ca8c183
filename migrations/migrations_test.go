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
	"github.com/ductile/ductile/projections"
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
	require.Equal(t, 4, triggers, "append-only and contiguity triggers are back (and 00014's archived versions)")
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
	// Every column gets a value of its own, so a copy that shifted or
	// swapped columns would show in the dump.
	for i := range 30 {
		_, err := db.Exec(`INSERT INTO job_log (job_id, attempt, plugin, command, status, kind, result, stdout, stderr,
			stderr_truncated, last_error, exit_code, submitted_by, created_at, started_at, completed_at, duration_ms,
			parent_job_id, source_event_id, started_seq, ended_seq)
			VALUES (?1, ?2, 'echo', 'poll', 'succeeded', 'k' || ?3, json_object('i', ?3), 'o' || ?3, 'e' || ?3,
			?3 % 2, 'l' || ?3, 100 + ?3, 'cli', 'c' || ?3, 's' || ?3, 'd' || ?3, 200 + ?3,
			'p' || ?3, 'v' || ?3, 2 * ?3 + 1, 2 * ?3 + 2)`,
			fmt.Sprintf("job-%02d", i/3), i%3+1, i)
		require.NoError(t, err)
	}
	dump := func() string {
		var out string
		require.NoError(t, db.QueryRow(`SELECT json_group_array(json_array(job_id, attempt, plugin, command, status, kind,
			result, stdout, stderr, stderr_truncated, last_error, exit_code, submitted_by, created_at, started_at,
			completed_at, duration_ms, parent_job_id, source_event_id, started_seq, ended_seq))
			FROM (SELECT * FROM job_log ORDER BY started_seq)`).Scan(&out))
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

// Going down through 00004 brings streams and event_counts back filled as
// the old projector would have left them at its checkpoint: events past the
// checkpoint are left for it to apply (it adds to event_counts, so counting
// them here would count them twice).
func TestLeanWritesDownRefillsTheLedgerProjections(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	l, err := ledger.Open(ctx, path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	appendOne := func(stream, typ string) {
		_, err := l.Append(ctx, ledger.NewEvent{Stream: stream, ExpectedVersion: ledger.AnyVersion, Type: typ})
		require.NoError(t, err)
	}
	for i := range 9 {
		appendOne(fmt.Sprintf("s/%d", i%3), []string{"a.opened", "a.moved", "b.seen"}[i/3])
	}
	_, err = projections.New(l, projections.Options{}).CatchUp(ctx) // checkpoint 9
	require.NoError(t, err)
	appendOne("s/0", "c.late") // seq 10: past the checkpoint
	require.NoError(t, l.Close())

	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 3)
	require.NoError(t, err)

	rows := func(query string) []string {
		r, err := db.Query(query)
		require.NoError(t, err)
		defer r.Close()
		var out []string
		for r.Next() {
			var s string
			require.NoError(t, r.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, r.Err())
		return out
	}
	// Stream s/i got events i+1, i+4, i+7 (a.opened, a.moved, b.seen).
	require.Equal(t, []string{"s/0 3 1 7 b.seen", "s/1 3 2 8 b.seen", "s/2 3 3 9 b.seen"},
		rows(`SELECT stream || ' ' || version || ' ' || first_seq || ' ' || last_seq || ' ' || last_type FROM streams ORDER BY stream`))
	require.Equal(t, []string{"a.moved 3 4 6", "a.opened 3 1 3", "b.seen 3 7 9"},
		rows(`SELECT type || ' ' || count || ' ' || first_seq || ' ' || last_seq FROM event_counts ORDER BY type`))
	require.Equal(t, []string{"1"},
		rows(`SELECT count(*) FROM streams s JOIN events f ON f.seq = s.first_seq JOIN events e ON e.seq = s.last_seq
			WHERE s.stream = 's/1' AND s.created_at = f.recorded_at AND s.updated_at = e.recorded_at`))
}

// Migration 00009 gives the projector's checkpoint the hash of the event at
// its seq: filled in for a checkpoint inside the log, NULL for one past its
// head (which its seq already gives away); its down drops the column.
func TestCheckpointHashMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ductile.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 8)
	require.NoError(t, err)

	old, err := ledger.Open(ctx, path, ledger.Options{SkipMigrate: true, Synchronous: "NORMAL"})
	require.NoError(t, err)
	for i := range 5 {
		_, err := old.Append(ctx, ledger.NewEvent{Stream: "s/1", ExpectedVersion: int64(i), Type: "t.happened"})
		require.NoError(t, err)
	}
	evs, err := old.ReadStream(ctx, "s/1")
	require.NoError(t, err)
	require.NoError(t, old.Close())
	_, err = db.Exec(`INSERT INTO projector_checkpoint (name, seq) VALUES ('main', 3), ('ahead', 9)`)
	require.NoError(t, err)

	_, err = p.UpTo(ctx, 9)
	require.NoError(t, err)
	hashes := map[string][]byte{}
	rows, err := db.Query(`SELECT name, hash FROM projector_checkpoint`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var hash []byte
		require.NoError(t, rows.Scan(&name, &hash))
		hashes[name] = hash
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string][]byte{"main": evs[2].Hash, "ahead": nil}, hashes)

	_, err = p.DownTo(ctx, 8)
	require.NoError(t, err)
	var columns int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM pragma_table_info('projector_checkpoint')`).Scan(&columns))
	require.Equal(t, 2, columns)
}
