package queries

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/migrations"
)

// planCase is a query and the indexes its plan must read job_queue through.
type planCase struct {
	name, query string
	args        []any
	indexes     []string
}

// TestDispatchQueriesUseTheActiveIndex checks the plans of the queries the
// dispatcher and recovery run often or at start-up: each must read the
// partial indexes of active jobs it names (migrations 00007, 00008), every
// one of them, and never scan the table job_queue itself, whose size is the
// whole history.
func TestDispatchQueriesUseTheActiveIndex(t *testing.T) {
	checkPlans(t, []planCase{
		{"ListReadyJobs", listReadyJobs, []any{"[]", 10}, []string{"job_queue_active"}},
		{"ListActiveJobs", listActiveJobs, nil, []string{"job_queue_active", "job_queue_cancel_requested"}},
		{"ListCancelRequested", listCancelRequested, nil, []string{"job_queue_cancel_requested"}},
	})
	// The trace ids of the candidates are read from runs by its key, one
	// row per candidate.
	conn := planDB(t)
	for name, query := range map[string]string{"ListReadyJobs": listReadyJobs, "ListWaitingRetries": listWaitingRetries} {
		var args []any
		if name == "ListReadyJobs" {
			args = []any{"[]", 10}
		}
		plan := explain(t, conn, name, query, args...)
		if !slices.Contains(plan, "SEARCH runs USING INDEX sqlite_autoindex_runs_1 (job_id=?) LEFT-JOIN") {
			t.Errorf("%s: plan %q does not read runs by its key", name, plan)
		}
	}
}

// TestJobViewsReadWhatTheyShow checks the plans of what ductile queue and
// job list read (views.ReadQueue, views.ListJobs): each status
// is read through its own index (00007, 00008, 00010), the queue through
// the indexes of active jobs only, and nothing is sorted apart, so a
// listing stops at its limit, and starts at its cursor (a seq bound)
// without reading the rows after it. A listing of any status, and one of
// succeeded jobs (which no index holds), walk the seq index newest first.
func TestJobViewsReadWhatTheyShow(t *testing.T) {
	const bySeq = "sqlite_autoindex_job_queue_2" // UNIQUE (seq)
	list := []any{"", int64(1) << 62, 10}        // plugin, before_seq, max_jobs
	checkPlans(t, []planCase{
		{"CountQueue", countQueue, nil, []string{"job_queue_active", "job_queue_cancel_requested"}},
		{"ListQueue", listQueue, []any{10}, []string{"job_queue_active", "job_queue_cancel_requested"}},
		{"ListJobs", listJobs, list, []string{bySeq}},
		{"ListQueuedJobs", listQueuedJobs, list, []string{"job_queue_active"}},
		{"ListRunningJobs", listRunningJobs, list, []string{"job_queue_active"}},
		{"ListCancelRequestedJobs", listCancelRequestedJobs, list, []string{"job_queue_cancel_requested"}},
		{"ListSucceededJobs", listSucceededJobs, list, []string{bySeq}},
		{"ListDeadJobs", listDeadJobs, list, []string{"job_queue_dead_or_canceled"}},
		{"ListCanceledJobs", listCanceledJobs, list, []string{"job_queue_dead_or_canceled"}},
	})
}

// checkPlans requires each query's plan to read job_queue only through the
// indexes named, to use every one of them, and to sort nothing apart.
func checkPlans(t *testing.T, cases []planCase) {
	t.Helper()
	conn := planDB(t)
	for _, tc := range cases {
		plan := explain(t, conn, tc.name, tc.query, tc.args...)
		text := strings.Join(plan, "; ")
		for _, step := range plan {
			if (strings.HasPrefix(step, "SCAN job_queue") || strings.HasPrefix(step, "SEARCH job_queue")) &&
				!slices.ContainsFunc(tc.indexes, func(index string) bool {
					return strings.Contains(step, "INDEX "+index+" ") || strings.HasSuffix(step, "INDEX "+index)
				}) {
				t.Errorf("%s: plan %q reads job_queue other than through %v", tc.name, text, tc.indexes)
			}
			if strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s: plan %q sorts its rows apart: it reads them all before the first", tc.name, text)
			}
		}
		for _, index := range tc.indexes {
			if !strings.Contains(text, "INDEX "+index) {
				t.Errorf("%s: plan %q does not use %s", tc.name, text, index)
			}
		}
	}
}

// planDB is a fresh, migrated database whose plans the tests read (closed
// by the test's cleanup).
func planDB(t *testing.T) *sqlite.Conn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.db")
	if _, err := migrations.Up(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	conn, err := sqlite.OpenConn(path, sqlite.OpenReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// explain returns the steps of query's plan (EXPLAIN QUERY PLAN's detail
// column) with args bound.
func explain(t *testing.T, conn *sqlite.Conn, name, query string, args ...any) []string {
	t.Helper()
	var plan []string
	err := sqlitex.ExecuteTransient(conn, "EXPLAIN QUERY PLAN "+query, &sqlitex.ExecOptions{
		Args: args,
		ResultFunc: func(stmt *sqlite.Stmt) error {
			plan = append(plan, stmt.ColumnText(3))
			return nil
		},
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return plan
}
