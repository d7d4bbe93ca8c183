package views

import (
	"context"
	"slices"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// JobTree is a job's whole tree: its root (the ancestor it was routed from
// through parent_job_id, itself if none) and every job routed from that
// root, at any depth.
type JobTree struct {
	Root string `json:"root_job_id"`
	// Jobs are the tree's jobs in enqueue order (seq), the root first.
	Jobs []Job `json:"jobs"`
	// Truncated: the tree holds more than the cap; Jobs are the ones
	// nearest the root (breadth first).
	Truncated bool `json:"truncated"`
	// AncestorsArchived: Root has a parent an archive moved out of the
	// ledger; the tree shown starts at the nearest ancestor still present.
	AncestorsArchived bool `json:"ancestors_archived,omitempty"`
}

// ReadJobTree reads the tree of job id (a full id; ResolveJobID first), at
// most limit jobs (at least 1). The root is found by walking parent_job_id
// up, not from correlation_id: a retry of a root job shares its
// correlation_id but is a root of its own (it has no parent), so the walk
// keeps the job asked for in its tree. A job that routed none and was
// routed by none is a tree of one; no such job is a *JobNotFoundError.
func ReadJobTree(ctx context.Context, l *ledger.Ledger, id string, limit int) (tree JobTree, err error) {
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		tree, err = readJobTree(conn, id, limit)
		return err
	})
	return tree, err
}

// readJobTree is ReadJobTree inside the caller's read transaction.
func readJobTree(conn *sqlite.Conn, id string, limit int) (JobTree, error) {
	limit = max(limit, 1)
	tree := JobTree{Jobs: []Job{}}
	root, archived, err := rootOf(conn, id)
	if err != nil {
		return JobTree{}, err
	}
	tree.Root, tree.AncestorsArchived = root, archived
	err = queries.ListJobTree(conn, queries.ListJobTreeParams{RootID: tree.Root, MaxJobs: int64(limit) + 1},
		func(r queries.ListJobTreeRow) error {
			tree.Jobs = append(tree.Jobs, jobOf(queries.GetJobRow(r)))
			return nil
		})
	if err != nil {
		return JobTree{}, err
	}
	if len(tree.Jobs) > limit {
		tree.Jobs, tree.Truncated = tree.Jobs[:limit], true
	}
	slices.SortFunc(tree.Jobs, func(a, b Job) int { return int(a.Seq - b.Seq) })
	return tree, nil
}

// Unfinished is the jobs of the subtree of job id (it and every job routed
// from it, at any depth) that are not terminal yet, in enqueue order.
func (t JobTree) Unfinished(id string) []Job {
	in := map[string]bool{id: true}
	var out []Job
	for _, j := range t.Jobs { // enqueue order: a parent before its children
		if j.ID != id && (j.ParentJobID == nil || !in[*j.ParentJobID]) {
			continue
		}
		in[j.ID] = true
		if !j.Status.Terminal() {
			out = append(out, j)
		}
	}
	return out
}

// maxTreeDepth bounds the walk up a tree (routing depth is bounded far
// below it; a cycle, which no event sequence makes, would end here).
const maxTreeDepth = 10_000

// rootOf is the topmost ancestor of job id through parent_job_id that is
// present: when an archive moved an ancestor out of the ledger (its
// job_queue row is gone), the walk stops at the nearest one present and
// says so (archived).
func rootOf(conn *sqlite.Conn, id string) (root string, archived bool, err error) {
	for step := range maxTreeDepth {
		found := false
		var parent *string
		if err := queries.GetJob(conn, id, func(r queries.GetJobRow) error { found, parent = true, r.ParentJobID; return nil }); err != nil {
			return "", false, err
		}
		if !found {
			if step == 0 {
				return "", false, &JobNotFoundError{ID: id}
			}
			return root, true, nil
		}
		if parent == nil {
			return id, false, nil
		}
		root, id = id, *parent
	}
	return id, false, nil
}
