package ledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
)

// archiveClock is a clock a test moves, so events get the recorded_at it wants.
type archiveClock struct{ now atomic.Int64 }

func (c *archiveClock) Now() time.Time  { return time.Unix(0, c.now.Load()) }
func (c *archiveClock) set(t time.Time) { c.now.Store(t.UnixNano()) }
func archivedEvent(a ledger.Archive) ledger.NewEvent {
	return ev("ledger", ledger.AnyVersion, "ledger.archived", map[string]any{"file": a.File, "last_seq": a.LastSeq, "last_hash": a.LastHash})
}

var (
	archiveOld = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	archiveCut = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	archiveNew = time.Date(2024, 9, 1, 0, 0, 0, 0, time.UTC)
)

// archiveSetup opens a ledger with 5 old events in streams a, b and job/1
// (a: 1..3, b: 1, job/1: 1) and 2 new ones (b: 2, c: 1).
func archiveSetup(t *testing.T) (*testBundle, *archiveClock) {
	t.Helper()
	clock := &archiveClock{}
	clock.set(archiveOld)
	b := setup(t, ledger.Options{Now: clock.Now})
	ctx := context.Background()
	_, err := b.l.Append(ctx, ev("a", 0, "t", nil), ev("a", 1, "t", nil), ev("b", 0, "t", nil), ev("a", 2, "t", nil), ev("job/1", 0, "t", nil))
	require.NoError(t, err)
	clock.set(archiveNew)
	_, err = b.l.Append(ctx, ev("b", 1, "t", nil), ev("c", 0, "t", nil))
	require.NoError(t, err)
	return b, clock
}

func archiveOpts() ledger.ArchiveOptions {
	return ledger.ArchiveOptions{Before: archiveCut, Event: archivedEvent, ForgetVersionsOf: []string{"job/"}}
}

func TestArchiveMovesThePrefixAndTheChainVerifiesAcrossBothFiles(t *testing.T) {
	b, _ := archiveSetup(t)
	ctx := context.Background()

	plan, a, err := b.l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	require.Equal(t, int64(5), plan.Through)
	require.Equal(t, int64(5), a.Events)
	require.Equal(t, ledger.ArchivePath(b.path, 1, 5), filepath.Join(filepath.Dir(b.path), a.File))
	require.FileExists(t, ledger.ArchivePath(b.path, 1, 5))

	// The main file holds 6 (b v2), 7 (c v1) and the archived event at 8.
	var st ledger.Stats
	require.NoError(t, b.l.Read(ctx, func(conn *sqlite.Conn) (err error) { st, err = ledger.StatsConn(conn); return err }))
	require.Equal(t, [3]int64{3, 6, 8}, [3]int64{st.Events, st.FirstSeq, st.LastSeq})
	res, err := b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.Equal(t, int64(5), res.ArchivedThrough)
	checks, err := b.l.VerifyArchives(ctx)
	require.NoError(t, err)
	require.Len(t, checks, 1)
	require.True(t, checks[0].OK, checks[0].Problem)
	head, err := b.l.CheckHead(ctx)
	require.NoError(t, err)
	require.True(t, head.OK(), head.Problem)

	// The whole log still reads in order, the archived part from its file.
	var seqs []int64
	_, err = b.l.ReadLogFrom(ctx, 0, 100, func(e ledger.Event) error { seqs = append(seqs, e.Seq); return nil })
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, seqs)

	// Nothing more is old enough: a second run moves nothing.
	plan, _, err = b.l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	require.Zero(t, plan.Events)
}

func TestAfterAnArchiveStreamsKeepTheirVersions(t *testing.T) {
	b, clock := archiveSetup(t)
	ctx := context.Background()
	_, _, err := b.l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	clock.set(archiveNew.Add(time.Hour))

	// a was archived whole at v3: it goes on at v4, with a checked version
	// and with AnyVersion; a stale expected version (0) conflicts.
	seqs, err := b.l.Append(ctx, ev("a", 3, "t", nil))
	require.NoError(t, err)
	_, err = b.l.Append(ctx, ev("a", 0, "t", nil))
	require.ErrorIs(t, err, ledger.ErrVersionConflict)
	_, err = b.l.Append(ctx, ev("a", 2, "t", nil))
	require.ErrorIs(t, err, ledger.ErrVersionConflict)
	_, err = b.l.Append(ctx, ev("a", ledger.AnyVersion, "t", nil))
	require.NoError(t, err)
	var versions []int64
	_, err = b.l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		v, err := tx.StreamVersion("a")
		versions = append(versions, v)
		evs, err2 := tx.ReadStream("b") // b v1 archived, v2 here
		versions = append(versions, int64(len(evs)))
		return nil, errors.Join(err, err2)
	})
	require.NoError(t, err)
	require.Equal(t, []int64{5, 1}, versions)
	_ = seqs

	// b keeps counting from v2; a new job stream starts at 1.
	_, err = b.l.Append(ctx, ev("b", 2, "t", nil), ev("job/2", 0, "t", nil))
	require.NoError(t, err)

	res, err := b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	head, err := b.l.CheckHead(ctx)
	require.NoError(t, err)
	require.True(t, head.OK(), head.Problem)

	// A second archive continues the first's chain.
	clock.set(archiveNew.Add(48 * time.Hour))
	opts := archiveOpts()
	opts.Before = archiveNew.Add(24 * time.Hour)
	plan, a, err := b.l.Archive(ctx, opts)
	require.NoError(t, err)
	require.Equal(t, int64(6), a.FirstSeq)
	require.Equal(t, plan.Through, a.LastSeq)
	checks, err := b.l.VerifyArchives(ctx)
	require.NoError(t, err)
	require.Len(t, checks, 2)
	for _, c := range checks {
		require.True(t, c.OK, c.Problem)
	}
	_, err = b.l.Append(ctx, ev("a", 5, "t", nil))
	require.NoError(t, err)
	res, err = b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
}

func TestReopenAfterArchiveFindsNoDamage(t *testing.T) {
	b, _ := archiveSetup(t)
	ctx := context.Background()
	_, _, err := b.l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	require.NoError(t, b.l.Close())
	l, err := ledger.Open(ctx, b.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err) // a witness or checkpoint in the archived prefix is no truncation
	defer l.Close()
	head, err := l.CheckHead(ctx)
	require.NoError(t, err)
	require.True(t, head.OK(), head.Problem)
}

func TestACrashBeforeTheDeleteLeavesTheLedgerUnarchived(t *testing.T) {
	b, _ := archiveSetup(t)
	ctx := context.Background()
	crash := errors.New("simulated crash")
	opts := archiveOpts()
	opts.AfterFileWritten = func(path string) error {
		require.FileExists(t, path) // written, flushed, renamed: the ledger untouched
		return crash
	}
	_, _, err := b.l.Archive(ctx, opts)
	require.ErrorIs(t, err, crash)
	// A real crash would leave the file behind: put one back to check a
	// rerun replaces it.
	require.NoError(t, os.WriteFile(ledger.ArchivePath(b.path, 1, 5), []byte("left by a crash"), 0o600))
	require.NoError(t, b.l.Close())

	l, err := ledger.Open(ctx, b.path, ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer l.Close()
	res, err := l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.Equal(t, int64(7), res.Events) // nothing was deleted
	require.Zero(t, res.ArchivedThrough)
	archives, err := l.Archives(ctx)
	require.NoError(t, err)
	require.Empty(t, archives)

	_, a, err := l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	require.Equal(t, int64(5), a.Events)
	checks, err := l.VerifyArchives(ctx)
	require.NoError(t, err)
	require.True(t, checks[0].OK, checks[0].Problem)
}

func TestAMissingArchiveIsReported(t *testing.T) {
	b, _ := archiveSetup(t)
	ctx := context.Background()
	_, _, err := b.l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	file := ledger.ArchivePath(b.path, 1, 5)
	require.NoError(t, os.Rename(file, file+".moved"))

	checks, err := b.l.VerifyArchives(ctx)
	require.NoError(t, err)
	require.False(t, checks[0].OK)
	require.True(t, checks[0].Missing)
	require.Contains(t, checks[0].Problem, "missing")
	res, err := b.l.Verify(ctx, nil) // the main file's own chain is intact
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	_, err = b.l.ReadLogFrom(ctx, 0, 100, func(ledger.Event) error { return nil })
	var missing *ledger.MissingArchiveError
	require.ErrorAs(t, err, &missing)

	// A changed archive is caught by its content hash.
	require.NoError(t, os.Rename(file+".moved", file))
	require.NoError(t, os.Chmod(file, 0o600))
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	checks, err = b.l.VerifyArchives(ctx)
	require.NoError(t, err)
	require.False(t, checks[0].OK)
	require.Contains(t, checks[0].Problem, "content hash")
}

func TestArchiveStopsWhereTheCutSays(t *testing.T) {
	b, _ := archiveSetup(t)
	ctx := context.Background()
	opts := archiveOpts()
	opts.Cut = func(_ *sqlite.Conn, through int64) (int64, string, error) { return min(through, 2), "kept 3 on", nil }
	plan, a, err := b.l.Archive(ctx, opts)
	require.NoError(t, err)
	require.Equal(t, int64(5), plan.Candidate)
	require.Equal(t, int64(2), a.LastSeq)
	require.Equal(t, "kept 3 on", plan.Lowered)
	res, err := b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	require.Equal(t, int64(6), res.Events) // 3..7 and the archived event
}
