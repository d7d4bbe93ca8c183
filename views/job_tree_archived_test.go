package views_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/views"
)

// TestJobTreeWithArchivedAncestors: when an archive moved a job's parent
// out of the ledger (its job_queue row is gone), job tree stops at the
// nearest ancestor present, treats it as the root and says so, instead
// of failing with not found; the tree read at a cut does the same.
func TestJobTreeWithArchivedAncestors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const archived = "00000000000000000000000000" // a parent no longer in job_queue
	child, _ := b.child(t, "transcribe", archived, archived, `{}`, 1)
	grandchild, _ := b.child(t, "index", child, archived, `{}`, 1)
	b.project(t)

	tree, err := views.ReadJobTree(b.ctx, b.l, grandchild, 100)
	require.NoError(t, err)
	require.Equal(t, child, tree.Root)
	require.True(t, tree.AncestorsArchived)
	require.Len(t, tree.Jobs, 2)

	at, err := views.ReadJobTreeAt(b.ctx, b.l, grandchild, views.Cut{Seq: b.mark(t)}, 100)
	require.NoError(t, err)
	require.Equal(t, child, at.Root)
	require.True(t, at.AncestorsArchived)
	require.Len(t, at.Jobs, 2)

	_, err = views.ReadJobTree(b.ctx, b.l, "nosuchjob", 100)
	var nf *views.JobNotFoundError
	require.ErrorAs(t, err, &nf, "a job itself absent is still not found")
}
