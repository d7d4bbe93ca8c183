package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// newest reads what every "newest event" reader sees of a stream: its
// newest event through Tx.LastEvent and ReadStreamLast, and its newest
// event of each type asked through ReadStreamLastOfType (seq 0: none).
type newest struct {
	last       ledger.Event
	lastFound  bool
	query      int64 // ReadStreamLast's seq
	ofType     map[string]int64
	ofTypeData map[string]string
}

func readNewest(t *testing.T, l *ledger.Ledger, stream string, types ...string) newest {
	t.Helper()
	ctx := context.Background()
	var n newest
	_, err := l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		var err error
		n.last, n.lastFound, err = tx.LastEvent(stream)
		return nil, err
	})
	require.NoError(t, err)
	n.ofType, n.ofTypeData = map[string]int64{}, map[string]string{}
	require.NoError(t, l.Read(ctx, func(conn *sqlite.Conn) error {
		err := queries.ReadStreamLast(conn, stream, func(r queries.ReadStreamLastRow) error { n.query = r.Seq; return nil })
		if err != nil {
			return err
		}
		for _, typ := range types {
			err := queries.ReadStreamLastOfType(conn, queries.ReadStreamLastOfTypeParams{Stream: stream, Type: typ},
				func(r queries.ReadStreamLastOfTypeRow) error {
					n.ofType[typ], n.ofTypeData[typ] = r.Seq, r.Data
					return nil
				})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	return n
}

func TestArchivedStreamsKeepTheirNewestEventOfEachType(t *testing.T) {
	clock := &archiveClock{}
	clock.set(archiveOld)
	b := setup(t, ledger.Options{Now: clock.Now})
	ctx := context.Background()
	// quiet: 1 opened, 2 noted, 3 opened; job/1: 4; then a newer event.
	_, err := b.l.Append(ctx, ev("quiet", 0, "t.opened", map[string]int{"n": 1}), ev("quiet", 1, "t.noted", map[string]int{"n": 2}),
		ev("quiet", 2, "t.opened", map[string]int{"n": 3}), ev("job/1", 0, "job.enqueued", nil))
	require.NoError(t, err)
	clock.set(archiveNew)
	_, err = b.l.Append(ctx, ev("busy", 0, "t", nil))
	require.NoError(t, err)
	before := readNewest(t, b.l, "quiet", "t.opened", "t.noted")
	require.True(t, before.lastFound)
	require.Equal(t, int64(3), before.last.Seq)

	_, a, err := b.l.Archive(ctx, archiveOpts())
	require.NoError(t, err)
	require.Equal(t, int64(4), a.LastSeq)

	// The main file holds no event of quiet: every reader sees the carried
	// ones, byte for byte the events archived.
	after := readNewest(t, b.l, "quiet", "t.opened", "t.noted", "t.never")
	require.True(t, after.lastFound)
	require.Equal(t, before.last, after.last)
	require.Equal(t, int64(3), after.query)
	require.Equal(t, map[string]int64{"t.opened": 3, "t.noted": 2}, after.ofType)
	require.JSONEq(t, `{"n":2}`, after.ofTypeData["t.noted"])
	// A job stream is archived whole and carries nothing.
	job := readNewest(t, b.l, "job/1", "job.enqueued")
	require.False(t, job.lastFound)
	require.Zero(t, job.query)
	require.Empty(t, job.ofType)

	// An append continues the stream's version; the main file's event is
	// then the newest, and a type it has none of still reads the carried one.
	clock.set(archiveNew.Add(time.Hour))
	_, err = b.l.Decide(ctx, ledger.Durable, func(tx *ledger.Tx) ([]ledger.NewEvent, error) {
		last, _, err := tx.LastEvent("quiet")
		return []ledger.NewEvent{ev("quiet", last.Version, "t.opened", map[string]int{"n": 4})}, err
	})
	require.NoError(t, err)
	now := readNewest(t, b.l, "quiet", "t.opened", "t.noted")
	require.Equal(t, int64(4), now.last.Version)
	require.Equal(t, now.last.Seq, now.query)
	require.Equal(t, map[string]int64{"t.opened": now.last.Seq, "t.noted": 2}, now.ofType)

	// A second archive moves it: the carried t.opened is replaced, t.noted
	// stays, and the stream's newest is the new one.
	clock.set(archiveNew.Add(48 * time.Hour))
	_, err = b.l.Append(ctx, ev("busy", 1, "t", nil))
	require.NoError(t, err)
	opts := archiveOpts()
	opts.Before = archiveNew.Add(24 * time.Hour)
	_, a, err = b.l.Archive(ctx, opts)
	require.NoError(t, err)
	require.GreaterOrEqual(t, a.LastSeq, now.last.Seq)
	again := readNewest(t, b.l, "quiet", "t.opened", "t.noted")
	require.Equal(t, now.last, again.last)
	require.Equal(t, map[string]int64{"t.opened": now.last.Seq, "t.noted": 2}, again.ofType)
	require.JSONEq(t, `{"n":4}`, again.ofTypeData["t.opened"])

	_, err = b.l.Append(ctx, ev("quiet", 4, "t.noted", nil))
	require.NoError(t, err)
	_, err = b.l.Append(ctx, ev("quiet", 4, "t.noted", nil))
	require.ErrorIs(t, err, ledger.ErrVersionConflict)
	res, err := b.l.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, res.OK, res.Problem)
	checks, err := b.l.VerifyArchives(ctx)
	require.NoError(t, err)
	for _, c := range checks {
		require.True(t, c.OK, c.Problem)
	}
}
