package main_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// everySecond is a config whose echo plugin polls every second, each
// firing queued beside the others.
const everySecond = `plugins:
  echo:
    max_outstanding_polls: 100
    schedules:
      - every: 1s
        if_running: queue
`

// scheduleRecord is one event of a schedule stream.
type scheduleRecord struct {
	ledger.Event
	fired   events.ScheduleFiredData
	skipped events.ScheduleSkippedData
}

func scheduleRecords(t *testing.T, l *ledger.Ledger, stream string) []scheduleRecord {
	t.Helper()
	evs, err := l.ReadStream(context.Background(), stream)
	require.NoError(t, err)
	out := make([]scheduleRecord, len(evs))
	for i, ev := range evs {
		out[i].Event = ev
		if ev.Type == events.ScheduleFired {
			require.NoError(t, json.Unmarshal(ev.Data, &out[i].fired))
		} else {
			require.NoError(t, json.Unmarshal(ev.Data, &out[i].skipped))
		}
	}
	return out
}

func countFired(recs []scheduleRecord) int {
	n := 0
	for _, r := range recs {
		if r.Type == events.ScheduleFired {
			n++
		}
	}
	return n
}

// TestScheduleSurvivesSIGKILL runs an every: 1s schedule on the real
// daemon, SIGKILLs it and starts it again: every second from the first
// firing to the last is recorded exactly once, fired (with its job) or
// skipped by catch_up, never twice and never left out.
func TestScheduleSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(everySecond), 0o600))
	const stream = "schedule/echo/default"

	run := func(minFired int) {
		p := start(t, nil, "--config", cfg, "system", "start", "--state-dir", state)
		p.waitLine(t, 0, messageIs("ductile started"))
		l := openLedger(t, state)
		before := countFired(scheduleRecords(t, l, stream))
		waitFor(t, 30*time.Second, "firings", func() bool {
			return countFired(scheduleRecords(t, l, stream)) >= before+minFired
		})
		p.signal(t, syscall.SIGKILL)
	}
	run(3)
	run(3)

	l := openLedger(t, state)
	recs := scheduleRecords(t, l, stream)
	seen := map[time.Time]bool{}
	var previous time.Time
	for i, r := range recs {
		first, last := r.fired.Slot, r.fired.Slot
		if r.Type == events.ScheduleSkipped {
			first, last = r.skipped.First, r.skipped.Slot
			require.Equal(t, int(last.Nominal.Sub(first.Nominal)/time.Second)+1, r.skipped.Count, "a skip counts the seconds it covers")
		} else {
			job, err := l.ReadStream(context.Background(), events.JobStream(r.fired.JobID))
			require.NoError(t, err)
			require.NotEmpty(t, job, "firing %d has its job", i)
			require.Equal(t, r.RecordedAt, job[0].RecordedAt, "in the firing's transaction")
		}
		require.False(t, seen[first.Nominal], "slot %v recorded twice", first.Nominal)
		seen[first.Nominal] = true
		if i > 0 {
			require.Equal(t, previous.Add(time.Second), first.Nominal, "no second left out before event %d (%s)", i, r.Type)
		}
		previous = last.Nominal
	}
	require.GreaterOrEqual(t, countFired(recs), 6)

	// system scheduler shows it: its last firing, its next, the guard.
	r := mustRun(t, nil, "--config", cfg, "--state-dir", state, "system", "scheduler", "--json")
	var shown struct {
		Schedules []struct {
			Stream    string `json:"stream"`
			When      string `json:"when"`
			LastFired *struct {
				JobID string `json:"job_id"`
			} `json:"last_fired"`
			Next *struct {
				Due time.Time `json:"due"`
			} `json:"next"`
			PollGuard *struct {
				Limit int `json:"limit"`
			} `json:"poll_guard"`
			Would struct {
				Action string `json:"action"`
			} `json:"would"`
		} `json:"schedules"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &shown), r.stdout)
	require.Len(t, shown.Schedules, 1)
	v := shown.Schedules[0]
	require.Equal(t, stream, v.Stream)
	require.Equal(t, "every 1s", v.When)
	var lastFired string
	for _, rec := range recs {
		if rec.Type == events.ScheduleFired {
			lastFired = rec.fired.JobID
		}
	}
	require.NotNil(t, v.LastFired)
	require.Equal(t, lastFired, v.LastFired.JobID)
	require.NotNil(t, v.Next)
	require.Equal(t, 100, v.PollGuard.Limit)
	require.NotEmpty(t, v.Would.Action)
	text := mustRun(t, nil, "--config", cfg, "--state-dir", state, "system", "scheduler")
	require.Contains(t, text.stdout, "echo/default")
	require.Contains(t, text.stdout, "every 1s")
}

// BenchmarkScheduleLateness runs an every: 1s schedule on the real daemon
// for a minute and reports how late each firing was recorded:
// recorded_at − slot.due. Run it with
//
//	go test ./cmd/ductile/ -run '^$' -bench ScheduleLateness -benchtime 1x
func BenchmarkScheduleLateness(b *testing.B) {
	const seconds = 60
	dir := b.TempDir()
	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(b, os.WriteFile(cfg, []byte(everySecond), 0o600))
	var started time.Time
	for range b.N {
		started = time.Now()
		p := exec.Command(ductileBin, "--config", cfg, "system", "start", "--state-dir", state)
		p.Env = append(os.Environ(), "XDG_STATE_HOME="+dir)
		require.NoError(b, p.Start())
		time.Sleep(time.Duration(seconds) * time.Second) // the measurement's span, not a wait for a condition
		require.NoError(b, p.Process.Signal(syscall.SIGTERM))
		_, _ = p.Process.Wait()
	}
	l, err := ledger.Open(context.Background(), filepath.Join(state, "ductile.db"), ledger.Options{ReadOnly: true})
	require.NoError(b, err)
	defer l.Close()
	evs, err := l.ReadStream(context.Background(), "schedule/echo/default")
	require.NoError(b, err)
	var late []time.Duration
	for _, ev := range evs {
		if ev.Type != events.ScheduleFired {
			continue
		}
		var d events.ScheduleFiredData
		require.NoError(b, json.Unmarshal(ev.Data, &d))
		if d.Slot.Due.Before(ev.RecordedAt.Add(-time.Minute)) || d.Slot.Due.Before(started) {
			// Not the lateness of a firing: one due before the daemon ran
			// (a new entry's first runs at once).
			continue
		}
		late = append(late, ev.RecordedAt.Sub(d.Slot.Due))
	}
	require.NotEmpty(b, late)
	slices.Sort(late)
	pct := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	b.ReportMetric(float64(len(late)), "firings")
	b.ReportMetric(float64(late[0].Microseconds())/1000, "min-ms")
	b.ReportMetric(float64(pct(0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(late[len(late)-1].Microseconds())/1000, "max-ms")
}
