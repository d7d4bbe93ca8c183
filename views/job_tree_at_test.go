package views_test

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// child enqueues a job of plugin routed from parent (in root's tree) with
// its baggage, and returns its id and its job.enqueued's seq.
func (b *testBundle) child(t *testing.T, plugin, parent, root, context string, maxAttempts int) (string, int64) {
	t.Helper()
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: plugin, Command: "handle", SubmittedBy: events.ActorRoute,
		MaxAttempts: maxAttempts, ParentJobID: parent, Correlation: root, Depth: 1, Context: json.RawMessage(context), Now: now})
	require.NoError(t, err)
	return res.JobID, res.Seq
}

// mark is the ledger's head.
func (b *testBundle) mark(t *testing.T) int64 {
	t.Helper()
	seq, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	return seq
}

// statuses is each job of a tree's status and attempt, by job id.
func statuses(tree views.JobTreeAt) map[string]string {
	out := map[string]string{}
	for _, j := range tree.Jobs {
		out[j.ID] = fmt.Sprintf("%s/%d", j.Status, j.Attempt)
	}
	return out
}

// TestJobTreeAt: given a tree built over several commits (a root that
// routes two children with baggage, one of which fails once and routes a
// grandchild), when read at three seqs, then each shows exactly the jobs
// enqueued by then with the status, attempt and baggage they had; a time
// stands for the last seq recorded at or before it; at the head it is the
// projection's tree; before the root, a *NotYetError.
func TestJobTreeAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, "other", 1)
	root := b.enqueue(t, "fetch", 1)
	b.start(t, root)
	m1 := b.mark(t)
	c1, c1Seq := b.child(t, "transcribe", root, root, `{"web":{"url":"u"}}`, 2)
	c2, _ := b.child(t, "notify", root, root, `{"web":{"url":"u"},"n":1}`, 1)
	b.complete(t, root, 1, ok)
	m2 := b.mark(t)
	b.start(t, c1)
	b.start(t, c2)
	b.complete(t, c2, 1, ok)
	m3 := b.mark(t)
	b.complete(t, c1, 1, failed("boom"))
	grandchild, _ := b.child(t, "index", c1, root, `{"web":{"url":"u"},"i":true}`, 1)
	b.project(t)

	read := func(id string, cut views.Cut) views.JobTreeAt {
		t.Helper()
		tree, err := views.ReadJobTreeAt(b.ctx, b.l, id, cut, 100)
		require.NoError(t, err)
		return tree
	}
	at1 := read(root, views.Cut{Seq: m1})
	require.Equal(t, m1, at1.AtSeq)
	require.Equal(t, map[string]string{root: "running/1"}, statuses(at1))

	at2 := read(c1, views.Cut{Seq: m2})
	require.Equal(t, root, at2.Root)
	require.Equal(t, map[string]string{root: "succeeded/1", c1: "queued/1", c2: "queued/1"}, statuses(at2))
	require.Equal(t, []string{root, c1, c2}, []string{at2.Jobs[0].ID, at2.Jobs[1].ID, at2.Jobs[2].ID}, "in enqueue order")
	require.JSONEq(t, `{"web":{"url":"u"}}`, string(at2.Jobs[1].Context))
	require.Equal(t, c1Seq, at2.Jobs[1].Seq)

	at3 := read(grandchild, views.Cut{Seq: m3})
	require.Equal(t, map[string]string{root: "succeeded/1", c1: "running/1", c2: "succeeded/1"}, statuses(at3))

	head := read(root, views.Cut{Seq: 1 << 60})
	require.Equal(t, map[string]string{root: "succeeded/1", c1: "queued/2", c2: "succeeded/1", grandchild: "queued/1"}, statuses(head))
	require.Equal(t, b.mark(t), head.AtSeq, "a seq past the head is the head")
	projected, err := views.ReadJobTree(b.ctx, b.l, root, 100)
	require.NoError(t, err)
	for i, j := range head.Jobs {
		require.Equal(t, projected.Jobs[i], j.Job, "at the head, the fold is the projection's row")
	}

	// A time: the last seq recorded at or before it (the clock ticks a
	// second per commit).
	var m2At time.Time
	require.NoError(t, b.l.Read(b.ctx, func(conn *sqlite.Conn) (err error) { m2At, err = ledger.RecordedAt(conn, m2); return err }))
	require.Equal(t, m2, read(root, views.Cut{Time: m2At}).AtSeq)
	require.Equal(t, m2, read(root, views.Cut{Time: m2At.Add(500 * time.Millisecond)}).AtSeq)
	require.Equal(t, m2At.Format(time.RFC3339Nano), read(root, views.Cut{Time: m2At}).At)
	before := read(root, views.Cut{Time: m2At.Add(-time.Nanosecond)})
	require.Less(t, before.AtSeq, m2)
	require.Equal(t, map[string]string{root: "running/1", c1: "queued/1", c2: "queued/1"}, statuses(before), "the commit before the root's completion")

	_, err = views.ReadJobTreeAt(b.ctx, b.l, c1, views.Cut{Seq: 1}, 100)
	var notYet *views.NotYetError
	require.ErrorAs(t, err, &notYet)
	require.ErrorIs(t, err, views.ErrJobNotFound)
	require.Equal(t, root, notYet.Root)
	require.EqualError(t, err, "job "+c1+"'s tree did not exist yet at seq 1: its root "+root+" was enqueued at seq 2")
	_, err = views.ReadJobTreeAt(b.ctx, b.l, root, views.Cut{Time: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}, 100)
	require.ErrorAs(t, err, &notYet, "a time before the first event is seq 0")
}

// TestJobTreeAtReplay: a replay is in its original's tree (the same
// parent) and shows what it replays.
func TestJobTreeAtReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := b.enqueue(t, "fetch", 1)
	b.start(t, root)
	c1, _ := b.child(t, "notify", root, root, `{"k":"v"}`, 1)
	b.complete(t, root, 1, ok)
	b.start(t, c1)
	b.complete(t, c1, 1, ok)
	res, err := commands.ReplayJob(b.ctx, b.l, commands.Replay{JobID: c1, MaxAttempts: 1, Now: now})
	require.NoError(t, err)
	b.project(t)
	tree, err := views.ReadJobTreeAt(b.ctx, b.l, res.JobID, views.Cut{Seq: res.Seq}, 100)
	require.NoError(t, err)
	require.Len(t, tree.Jobs, 3)
	replayed := tree.Jobs[2]
	require.Equal(t, res.JobID, replayed.ID)
	require.Equal(t, c1, replayed.ReplayOf)
	require.Equal(t, events.StatusQueued, replayed.Status)
	require.JSONEq(t, `{"k":"v"}`, string(replayed.Context))
}

// TestJobTreeAtArchived: a cut at or before the archive boundary, given as
// a seq or a time, is refused as archived rather than shown without the
// events the archive moved.
func TestJobTreeAtArchived(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.enqueue(t, "other", 1)
	b.start(t, old)
	b.complete(t, old, 1, ok)
	b.project(t)
	var boundary time.Time
	require.NoError(t, b.l.Read(b.ctx, func(conn *sqlite.Conn) (err error) { boundary, err = ledger.RecordedAt(conn, b.mark(t)); return err }))
	root := b.enqueue(t, "fetch", 1)
	b.project(t)
	_, archive, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: boundary.Add(500 * time.Millisecond)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.Positive(t, archive.LastSeq)

	for _, cut := range []views.Cut{{Seq: archive.LastSeq}, {Seq: 1}, {Time: boundary}} {
		_, err = views.ReadJobTreeAt(b.ctx, b.l, root, cut, 100)
		var archived *views.ArchivedError
		require.ErrorAs(t, err, &archived, "cut %+v", cut)
		require.Equal(t, archive.LastSeq, archived.Through)
	}
	tree, err := views.ReadJobTreeAt(b.ctx, b.l, root, views.Cut{Time: boundary.Add(time.Hour)}, 100)
	require.NoError(t, err)
	require.Len(t, tree.Jobs, 1)
}

// TestParseCut: digits are a seq, an RFC 3339 time a time, anything else
// a *CutError.
func TestParseCut(t *testing.T) {
	t.Parallel()
	cut, err := views.ParseCut("42")
	require.NoError(t, err)
	require.Equal(t, views.Cut{Seq: 42}, cut)
	cut, err = views.ParseCut("2026-03-01T12:00:00.5+01:00")
	require.NoError(t, err)
	require.True(t, cut.Time.Equal(time.Date(2026, 3, 1, 11, 0, 0, 5e8, time.UTC)))
	for _, bad := range []string{"", "-1", "yesterday", "2026-03-01", "99999999999999999999"} {
		_, err := views.ParseCut(bad)
		var cutErr *views.CutError
		require.ErrorAs(t, err, &cutErr, bad)
	}
}

// TestJobTreeAtHugeLimit: a limit at the top of int (limit+1 would
// overflow) reads the whole tree, untruncated.
func TestJobTreeAtHugeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	root := b.enqueue(t, "fetch", 1)
	b.start(t, root)
	child, _ := b.child(t, "notify", root, root, `{}`, 1)
	b.project(t)
	tree, err := views.ReadJobTreeAt(b.ctx, b.l, root, views.Cut{Seq: b.mark(t)}, math.MaxInt)
	require.NoError(t, err)
	require.False(t, tree.Truncated)
	require.Contains(t, statuses(tree), child)
	require.Len(t, statuses(tree), 2)
}
