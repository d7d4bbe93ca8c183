package dispatch_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
	"github.com/ductile/ductile/queries"
)

// TestFloodingPluginCostsTheLedgerAnExcerpt: a plugin that floods stdout
// (over its 10 MiB cap) and stderr costs the ledger an excerpt of each per
// attempt (its first and last 32 KiB, and how much it wrote), in the
// attempt's event and in job_log alike, not the 10 MiB it captured, twice,
// for every attempt (issue 20, item 6).
func TestFloodingPluginCostsTheLedgerAnExcerpt(t *testing.T) {
	const attempts = 3
	b := setup(t, 1, func(cfg *config.Config) {
		pc := config.DefaultPlugin()
		pc.Retry = config.Retry{MaxAttempts: attempts, BackoffBase: time.Millisecond}
		cfg.Plugins = map[string]config.PluginConfig{"flood": pc}
	})
	res, err := commands.EnqueueJob(b.ctx, b.d.Ledger, commands.JobFor(b.d.Config(), "flood", "poll", events.ActorCLI))
	require.NoError(t, err)
	b.waitFor(map[string]string{res.JobID: "dead"})

	evs, err := b.d.Ledger.ReadStream(b.ctx, events.JobStream(res.JobID))
	require.NoError(t, err)
	size, failed := 0, 0
	for _, ev := range evs {
		size += len(ev.Data)
		if ev.Type != events.JobFailed {
			continue
		}
		failed++
		var d events.AttemptEnded
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		require.Equal(t, events.OutcomeProtocolError, d.Kind)
		require.Greater(t, d.StdoutBytes, int64(pluginhost.DefaultMaxStdout), "how much it wrote before it was killed")
		require.EqualValues(t, 1000000, d.StderrBytes)
		require.True(t, d.StderrTruncated)
		require.LessOrEqual(t, len(d.Stdout), 2*pluginhost.ExcerptBytes+100)
		require.LessOrEqual(t, len(d.Stderr), 2*pluginhost.ExcerptBytes+100)
		require.Contains(t, d.Stderr, "bytes left out here; 1000000 bytes in all]")
	}
	require.Equal(t, attempts, failed)
	// Each attempt: 64 KiB of stdout and of stderr in its end, and the
	// stderr streamed while it ran (at most its first 32 KiB).
	require.Less(t, size, attempts*(5*pluginhost.ExcerptBytes+4096), "the job's events, in bytes")

	err = b.d.Ledger.Read(b.ctx, func(conn *sqlite.Conn) error {
		return queries.ListJobAttempts(conn, res.JobID, func(r queries.ListJobAttemptsRow) error {
			require.NotNil(t, r.Stdout)
			require.LessOrEqual(t, len(*r.Stdout), 2*pluginhost.ExcerptBytes+100, "job_log keeps the excerpt")
			require.LessOrEqual(t, len(*r.Stderr), 2*pluginhost.ExcerptBytes+100)
			return nil
		})
	})
	require.NoError(t, err)
}
