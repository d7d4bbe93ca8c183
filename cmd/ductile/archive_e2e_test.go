package main_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type archiveJSON struct {
	DryRun bool `json:"dry_run"`
	Plan   struct {
		Through int64  `json:"through"`
		Events  int64  `json:"events"`
		Jobs    int64  `json:"jobs"`
		File    string `json:"file"`
		Lowered string `json:"lowered"`
	} `json:"plan"`
	Archive *struct {
		File     string `json:"file"`
		FirstSeq int64  `json:"first_seq"`
		LastSeq  int64  `json:"last_seq"`
	} `json:"archive"`
}

type verifyJSON struct {
	OK       bool `json:"ok"`
	Archives []struct {
		OK      bool `json:"ok"`
		Missing bool `json:"missing"`
	} `json:"archives"`
	Chain struct {
		OK              bool  `json:"ok"`
		ArchivedThrough int64 `json:"archived_through"`
	} `json:"chain"`
}

// TestLedgerArchive: jobs run, are archived while the daemon runs, more
// jobs run; the ledger verifies across the archive and the main file, a new
// job inspects, dedupe keys and their streams go on, and a missing archive
// is reported.
func TestLedgerArchive(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
service: {dedupe_ttl: 1ms}
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	// Jobs run by the CLI itself, one with a dedupe key.
	var old []string
	for range 4 {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "sink", "--command", "handle", "--json")
		old = append(old, run.JobID)
	}
	var keyed runView
	w.runJSON(0, &keyed, "plugin", "run", "sink", "--command", "handle", "--dedupe-key", "k", "--json")
	require.Equal(t, "succeeded", keyed.Status)
	cut := time.Now().UTC().Format(time.RFC3339Nano)

	// The daemon records the config it applied after them: the cut need not stop there.
	daemon := w.startDaemon()

	var dry archiveJSON
	w.runJSON(0, &dry, "ledger", "archive", "--before", cut, "--dry-run", "--json")
	require.True(t, dry.DryRun)
	require.Positive(t, dry.Plan.Events)
	require.Equal(t, int64(5), dry.Plan.Jobs, "lowered: %s", dry.Plan.Lowered)
	require.Nil(t, dry.Archive)
	require.NoFileExists(t, dry.Plan.File)

	// Usage errors are one line, exit 2; --vacuum with the daemon running
	// says how to stop it.
	r := w.run("ledger", "archive", "--dry-run")
	require.Equal(t, 2, r.code, "%s", r)
	require.Equal(t, "ductile: ledger archive needs --before T: an RFC 3339 time, or an age such as 90d (see: ductile ledger archive --help)\n", r.stderr)
	require.Empty(t, r.stdout)
	r = w.run("ledger", "archive", "--before", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, 2, r.code, "%s", r)
	require.Contains(t, r.stderr, "is in the future")
	r = w.run("ledger", "archive", "--before", cut, "--vacuum")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "systemctl stop")
	require.NotContains(t, r.stderr, "system stop")

	var done archiveJSON
	w.runJSON(0, &done, "ledger", "archive", "--before", cut, "--json")
	require.NotNil(t, done.Archive)
	require.Equal(t, dry.Plan.Through, done.Archive.LastSeq)
	archive := filepath.Join(w.state, done.Archive.File)
	require.FileExists(t, archive)

	// Archived jobs are gone from the ledger; new ones run and inspect.
	r = w.run("job", "inspect", old[0])
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stderr, "no job "+old[0])
	// …and from the listings, once the projector applied ledger.archived.
	waitFor(t, 10*time.Second, "archived jobs to leave job list", func() bool {
		for _, j := range w.jobList("--limit", "1000") {
			if slices.Contains(old, j.ID) {
				return false
			}
		}
		return true
	})
	var fresh runView
	w.runJSON(0, &fresh, "plugin", "run", "sink", "--command", "handle", "--json")
	in := w.waitSettled(fresh.JobID)
	require.Equal(t, "succeeded", in.Job.Status)
	// The dedupe key's stream counts on from its archived events: a new
	// job takes the key, and one more within its window is a duplicate.
	var again runView
	w.runJSON(0, &again, "plugin", "run", "sink", "--command", "handle", "--dedupe-key", "k", "--json")
	require.False(t, again.Deduped, "the archived success is past the 1ms window")
	var dup runView
	w.runJSON(0, &dup, "plugin", "run", "sink", "--command", "handle", "--dedupe-key", "k", "--dedupe-ttl", "1h", "--json")
	require.True(t, dup.Deduped, "%+v", dup)
	require.Equal(t, again.JobID, dup.ExistingJobID)
	w.waitSettled(again.JobID)

	var v verifyJSON
	w.runJSON(0, &v, "ledger", "verify", "--json")
	require.True(t, v.OK)
	require.Equal(t, done.Archive.LastSeq, v.Chain.ArchivedThrough)
	require.Len(t, v.Archives, 1)
	require.True(t, v.Archives[0].OK)
	w.stopDaemon(daemon)

	// Restarted, the daemon finds no damage; replay in place reads the archive.
	before := w.jobList("--limit", "1000")
	var replay struct {
		Checkpoint int64 `json:"checkpoint"`
	}
	w.runJSON(0, &replay, "ledger", "replay", "--json")
	require.Greater(t, replay.Checkpoint, done.Archive.LastSeq)
	w.runJSON(0, &v, "ledger", "verify", "--json")
	require.True(t, v.OK)
	require.Equal(t, before, w.jobList("--limit", "1000"), "projections rebuilt from the archive and the ledger equal the live ones")
	daemon = w.startDaemon()
	w.stopDaemon(daemon)

	// Without the archive, the main file's chain still verifies and the
	// missing file is named.
	require.NoError(t, os.Rename(archive, archive+".away"))
	r = w.run("ledger", "verify")
	require.Equal(t, 1, r.code, "%s", r)
	require.Contains(t, r.stdout, "ARCHIVE MISSING: events 1..")
	require.Contains(t, r.stdout, "the ledger's own chain is intact")
	w.runJSON(1, &v, "ledger", "verify", "--json")
	require.False(t, v.OK)
	require.True(t, v.Chain.OK)
	require.True(t, v.Archives[0].Missing)
}
