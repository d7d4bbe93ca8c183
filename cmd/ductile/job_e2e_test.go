package main_test

// End-to-end tests of the job commands: list's status filter, job ids given
// by a prefix, the cancel reason in job inspect, and job retry.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobListRefusesAnUnknownStatus: a status that does not exist is a
// usage error naming the valid ones, not an empty list.
func TestJobListRefusesAnUnknownStatus(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, "plugins: {}\n")
	r := w.run("job", "list", "--status", "bogus")
	require.Equal(t, 2, r.code, "%s", r)
	require.Equal(t, `ductile: --status "bogus" is not a job status: use one of queued, running, cancel_requested, succeeded, dead, canceled`+"\n", r.stderr)
	require.Empty(t, r.stdout)
	require.NoDirExists(t, w.state, "refused before the ledger was opened")

	require.Zero(t, w.run("system", "migrate").code) // job list only reads: it creates no ledger

	for _, status := range []string{"queued", "running", "cancel_requested", "succeeded", "dead", "canceled"} {
		require.Equal(t, []jobView{}, w.jobList("--status", status))
	}
}

// commonPrefix is the longest prefix all of ids share.
func commonPrefix(ids []string) string {
	p := ids[0]
	for _, id := range ids[1:] {
		for !strings.HasPrefix(id, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}

// TestJobIDPrefix: every command taking a JOB_ID takes a unique prefix of
// one (4 characters at least, any case); an ambiguous one is refused with a
// few of its matches, an unknown one as not found.
func TestJobIDPrefix(t *testing.T) {
	t.Parallel()
	w, ids := sinkJobs(t, 7)
	shared := commonPrefix(ids)
	require.GreaterOrEqual(t, len(shared), 4, "UUIDv7 ids made within a minute share their first 8 characters: %v", ids)

	// Each id by its shortest unique prefix, in upper case too.
	for _, id := range ids {
		n := uniqueLen(id, ids)
		for _, prefix := range []string{id[:n], strings.ToUpper(id[:n])} {
			require.Equal(t, id, w.inspect(prefix).Job.ID, "prefix %s", prefix)
		}
		r := mustRun(t, nil, w.args("job", "logs", id[:n])...)
		require.Contains(t, r.stdout, "job "+id+" has no plugin logs or stderr")
		r = w.run("job", "cancel", id[:n])
		require.Equal(t, 1, r.code, "%s", r)
		require.Equal(t, "ductile: job "+id+" is succeeded: only a queued or running job can be canceled\n", r.stderr)
	}

	for _, cmd := range []string{"inspect", "cancel", "logs"} {
		r := w.run("job", cmd, shared)
		require.Equal(t, 2, r.code, "%s", r)
		require.Contains(t, r.stderr, `ductile: job id "`+shared+`" is ambiguous: it matches `+strings.Join(ids[:5], ", ")+" and more (give more characters of it, or the whole id)")

		r = w.run("job", cmd, ids[0][:3])
		require.Equal(t, 1, r.code, "%s", r)
		require.Equal(t, "ductile: no job "+ids[0][:3]+" (give the short id job list prints, or at least 4 characters of it; see: ductile job list)\n", r.stderr)

		r = w.run("job", cmd, "ffffffff")
		require.Equal(t, 1, r.code, "%s", r)
		require.Equal(t, "ductile: no job ffffffff (see: ductile job list)\n", r.stderr)
	}

	// Two matches are listed in full.
	two := ids[:2]
	if p := commonPrefix(two); len(p) >= 4 && !strings.HasPrefix(ids[2], p) {
		r := w.run("job", "inspect", p)
		require.Equal(t, 2, r.code, "%s", r)
		require.Equal(t, `ductile: job id "`+p+`" is ambiguous: it matches `+two[0]+", "+two[1]+" (give more characters of it, or the whole id)\n", r.stderr)
	}
}

// TestJobShortID: job list and queue print each job's short id (the random
// tail of its UUIDv7), and every command taking a JOB_ID takes it, or a
// unique prefix of it; the 8 leading characters of ids made in the same
// minute (their time) are ambiguous, and the error lists the jobs.
func TestJobShortID(t *testing.T) {
	t.Parallel()
	w, ids := sinkJobs(t, 3)
	slices.Reverse(ids) // newest first, as job list
	var short []string
	for _, line := range strings.Split(strings.TrimSpace(mustRun(t, nil, w.args("job", "list")...).stdout), "\n")[1:] {
		short = append(short, strings.Fields(line)[0])
	}
	require.Equal(t, []string{ids[0][24:], ids[1][24:], ids[2][24:]}, short, "job list prints the last 12 characters")

	for i, s := range short {
		id := ids[i]
		for _, arg := range []string{s, strings.ToUpper(s), s[:uniqueLen(s, short)]} {
			require.Equal(t, id, w.inspect(arg).Job.ID, "short id %s", arg)
		}
		for _, args := range [][]string{
			{"job", "logs", s}, {"job", "tree", s, "--json"}, {"job", "replay", s, "--dry-run"}, {"job", "retry", s, "--dry-run"}, {"job", "cancel", s},
		} {
			r := w.run(args...)
			require.Contains(t, r.stdout+r.stderr, id, "%v: %s", args, r)
			require.NotContains(t, r.stderr, "no job", "%v", args)
		}
	}

	time := commonPrefix(ids)[:8] // their first 8 characters: made in the same minute
	r := w.run("job", "inspect", time)
	require.Equal(t, 2, r.code, "%s", r)
	require.Equal(t, `ductile: job id "`+time+`" is ambiguous: it matches `+strings.Join(sorted(ids), ", ")+" (give more characters of it, or the whole id)\n", r.stderr)
}

// sinkJobs is a world whose sink plugin has run n jobs (no daemon: plugin
// run runs each), and their ids, oldest first.
func sinkJobs(t *testing.T, n int) (*jobWorld, []string) {
	t.Helper()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  sink: {retry: {max_attempts: 1}}
`)
	var ids []string
	for range n {
		var run runView
		w.runJSON(0, &run, "plugin", "run", "sink", "--command", "handle", "--json")
		ids = append(ids, run.JobID)
	}
	return w, ids
}

// uniqueLen is the fewest characters (4 at least) of s that no other of all starts with.
func uniqueLen(s string, all []string) int {
	for n := 4; n < len(s); n++ {
		if !slices.ContainsFunc(all, func(o string) bool { return o != s && strings.HasPrefix(o, s[:n]) }) {
			return n
		}
	}
	return len(s)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// cancelJSON is the cancel part of job inspect --json.
type cancelJSON struct {
	Reason      string `json:"reason"`
	By          string `json:"by"`
	RequestedAt string `json:"requested_at"`
	Pending     bool   `json:"pending"`
	Ended       string `json:"ended"`
}

// TestJobInspectShowsTheCancelReason: a canceled job shows who canceled
// it, when and why, also when its plugin had to be stopped (the end then
// records "canceled by request", which used to hide the reason given).
func TestJobInspectShowsTheCancelReason(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
service: {max_workers: 1}
plugins:
  slow: {config: {dir: "$SCRATCH"}}
`)
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(w.scratch, "release"), nil, 0o600) })
	d := w.startDaemon()
	var running, queued runView
	w.runJSON(0, &running, "plugin", "run", "slow", "--json")
	w.runJSON(0, &queued, "plugin", "run", "slow", "--json")
	w.waitInspect(running.JobID, "running", func(in inspectView) bool { return in.Job.Status == "running" })

	mustRun(t, nil, w.args("job", "cancel", queued.JobID, "--reason", "not needed today")...)
	mustRun(t, nil, w.args("job", "cancel", running.JobID, "--reason", "taking too long")...)
	for _, tc := range []struct {
		id, reason, ended, text string
	}{
		{queued.JobID, "not needed today", "", ": not needed today\n"},
		{running.JobID, "taking too long", "canceled by request", ": taking too long (ended: canceled by request)\n"},
	} {
		in := w.waitSettled(tc.id)
		require.Equal(t, "canceled", in.Job.Status)
		var full struct {
			Cancel cancelJSON `json:"cancel"`
		}
		w.runJSON(0, &full, "job", "inspect", tc.id, "--json")
		require.Equal(t, tc.reason, full.Cancel.Reason)
		require.Equal(t, "cli", full.Cancel.By)
		require.False(t, full.Cancel.Pending)
		require.Equal(t, tc.ended, full.Cancel.Ended)

		r := mustRun(t, nil, w.args("job", "inspect", tc.id)...)
		require.Contains(t, r.stdout, "\ncanceled   by cli at "+full.Cancel.RequestedAt+tc.text)
	}
	w.stopDaemon(d)
}

// retryJSON is what job retry --json prints.
type retryJSON struct {
	JobID         string `json:"job_id"`
	RetryOf       string `json:"retry_of"`
	Plugin        string `json:"plugin"`
	Command       string `json:"command"`
	Status        string `json:"status"`
	ExistingJobID string `json:"existing_job_id"`
	RanBy         string `json:"ran_by"`
	DryRun        bool   `json:"dry_run"`
}

// linksJSON is the retry links of job inspect --json.
type linksJSON struct {
	RetryOf   string `json:"retry_of"`
	RetriedAs string `json:"retried_as"`
}

// TestJobRetry: a dead job is retried as a new job with its plugin,
// command and payload, linked both ways; once (the retry is retried next);
// never a job that is not dead or canceled, nor one whose plugin is gone.
func TestJobRetry(t *testing.T) {
	t.Parallel()
	w := newJobWorld(t, `
plugin_roots: ["$PLUGINS"]
plugins:
  echo: {retry: {max_attempts: 1}, config: {mode: error}}
  sink: {retry: {max_attempts: 1}}
`)
	var dead runView
	r := w.runJSON(1, &dead, "plugin", "run", "echo", "--command", "poll", "--payload", `{"n":1}`, "--json")
	require.Equal(t, "dead", dead.Status, "%s", r)
	before := stats(t, w.state).Events

	// A dry run says what it would do and appends nothing.
	var out retryJSON
	w.runJSON(0, &out, "job", "retry", dead.JobID[:30], "--dry-run", "--json")
	require.Equal(t, retryJSON{RetryOf: dead.JobID, Plugin: "echo", Command: "poll", Status: "would enqueue", RanBy: "none", DryRun: true}, out)
	require.Equal(t, before, stats(t, w.state).Events)

	out = retryJSON{}
	w.runJSON(0, &out, "job", "retry", dead.JobID, "--json")
	require.NotEmpty(t, out.JobID)
	retry := out.JobID
	require.Equal(t, retryJSON{JobID: retry, RetryOf: dead.JobID, Plugin: "echo", Command: "poll", Status: "queued", RanBy: "none"}, out)

	in := w.inspect(retry)
	require.Equal(t, "queued", in.Job.Status, "projected at once, though no daemon runs")
	require.JSONEq(t, `{"n":1}`, string(in.Job.Payload))
	require.Equal(t, "poll", in.Job.Command)
	var enq struct {
		RetryOf string          `json:"retry_of"`
		Event   json.RawMessage `json:"event"`
	}
	in.event(t, "job.enqueued", &enq)
	require.Equal(t, dead.JobID, enq.RetryOf)
	var newLinks, oldLinks linksJSON
	w.runJSON(0, &newLinks, "job", "inspect", retry, "--json")
	require.Equal(t, linksJSON{RetryOf: dead.JobID}, newLinks)
	w.runJSON(0, &oldLinks, "job", "inspect", dead.JobID, "--json")
	require.Equal(t, linksJSON{RetriedAs: retry}, oldLinks)
	require.Contains(t, mustRun(t, nil, w.args("job", "inspect", dead.JobID)...).stdout, "\nretried as "+retry+"\n")
	require.Contains(t, mustRun(t, nil, w.args("job", "inspect", retry)...).stdout, "\nretry of   "+dead.JobID+"\n")

	// A job that is not dead or canceled is refused, saying what to do.
	r = w.run("job", "retry", retry)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, "ductile: job "+retry+" is queued: it has not given up yet, so there is nothing to retry (see: ductile job inspect "+retry+")\n", r.stderr)
	var ok runView
	w.runJSON(0, &ok, "plugin", "run", "sink", "--json")
	r = w.run("job", "retry", ok.JobID)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, "ductile: job "+ok.JobID+" succeeded: only a dead or canceled job can be retried (to run it again, enqueue a new job: ductile plugin run sink --command handle)\n", r.stderr)

	// The daemon runs the retry; it dies too (echo still fails).
	d := w.startDaemon()
	require.Equal(t, "dead", w.waitSettled(retry).Job.Status)

	// A job is retried once: the retry is retried next.
	r = w.run("job", "retry", dead.JobID)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, "ductile: job "+dead.JobID+" was retried already, as job "+retry+" (now dead) (retry that one if need be: ductile job retry "+retry+")\n", r.stderr)
	out = retryJSON{}
	w.runJSON(0, &out, "job", "retry", retry, "--json")
	require.Equal(t, "daemon", out.RanBy)
	require.Equal(t, retry, out.RetryOf)
	third := out.JobID
	require.Equal(t, "dead", w.waitSettled(third).Job.Status)
	require.Equal(t, 0, d.signal(t, syscall.SIGTERM))

	// A plugin no longer enabled is refused like any enqueue of it.
	other := filepath.Join(t.TempDir(), "disabled.yaml")
	require.NoError(t, os.WriteFile(other, []byte("plugins: {echo: {enabled: false}}\n"), 0o600))
	r = ductile(t, nil, "--config", other, "--state-dir", w.state, "job", "retry", third)
	require.Equal(t, 1, r.code, "%s", r)
	require.Equal(t, `ductile: plugin "echo" is disabled in the config (plugins.echo.enabled: false)`+"\n", r.stderr)

	w.replayAndVerify()
}
