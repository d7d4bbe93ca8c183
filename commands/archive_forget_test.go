package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/views"
)

// TestArchiveForgetsFinishedRunStreams: a finished run archived whole is
// never appended to again, so, like its jobs' streams, its stream leaves no
// archived_streams or archived_stream_types rows behind (else every run
// ever archived would cost rows in the main file forever).
func TestArchiveForgetsFinishedRunStreams(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	b := setupRuns(t, t0)
	pl := graph("forgotten", "a", uses("a", "pa", "b"), uses("b", "pb", ""))
	run := startRun(t, b.testBundle, pl, `{}`)
	runOne(t, b.testBundle, run.JobID, ok(`"a"`), current(pl))
	runOne(t, b.testBundle, enqueuedAt(t, b.testBundle, run.RunID, "b"), ok(`"b"`), current(pl))
	require.NotNil(t, finished(t, b.testBundle, run.RunID))
	b.waitProjected(t)

	b.set(t0.Add(10 * 24 * time.Hour))
	plan, a, err := commands.ArchiveLedger{Cut: views.ArchiveCut, Before: t0.Add(5 * 24 * time.Hour)}.Run(b.ctx, b.l)
	require.NoError(t, err)
	require.NotZero(t, a.LastSeq, plan.Lowered)

	count := func(q string) int64 {
		var n int64
		require.NoError(t, b.l.Read(b.ctx, func(conn *sqlite.Conn) error {
			return sqlitex.ExecuteTransient(conn, q, &sqlitex.ExecOptions{
				Args:       []any{"run/" + run.RunID},
				ResultFunc: func(s *sqlite.Stmt) error { n = s.ColumnInt64(0); return nil },
			})
		}))
		return n
	}
	require.Zero(t, count("SELECT count(*) FROM archived_streams WHERE stream = ?"), "the run's version is forgotten")
	require.Zero(t, count("SELECT count(*) FROM archived_stream_types WHERE stream = ?"), "the run's newest events are not carried")
	require.Zero(t, count("SELECT count(*) FROM archived_streams WHERE stream LIKE 'job/%' AND ? <> ''"), "nor its jobs'")
	require.NotZero(t, count("SELECT count(*) FROM archived_streams WHERE stream LIKE 'pipeline/%' AND ? <> ''"), "other streams keep their versions")
}
