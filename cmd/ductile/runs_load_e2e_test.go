package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// clockTicks is the kernel's USER_HZ (the unit of /proc/<pid>/stat's
// times): 100 on every Linux Go supports.
const clockTicks = 100

// cpuTimes reads a process's CPU time from /proc/pid/stat: its own
// (utime+stime) and its reaped children's (cutime+cstime).
func cpuTimes(pid int) (self, children time.Duration, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 15 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	// f[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17.
	var ticks [4]time.Duration
	for k := range ticks {
		n, err := strconv.ParseInt(f[14+k-3], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, 14+k, err)
		}
		ticks[k] = time.Duration(n) * time.Second / clockTicks
	}
	return ticks[0] + ticks[1], ticks[2] + ticks[3], nil
}

// runDelta is one event of GET /runs/stream (spec §6.1).
type runDelta struct {
	Op        string   `json:"op"`
	RunID     string   `json:"run_id"`
	Status    string   `json:"status"`
	Progress  *float64 `json:"progress"`
	UpdatedAt float64  `json:"updated_at"`
}

// TestRunsLoadProgressFlood: 200 concurrent short runs, each writing 1,000
// progress lines and one export item on fd 3, beside 5 runs that write
// theirs over two seconds or more. No item is lost (each run lists its one
// item and has it as its result set); the ledger holds at most (duration
// in seconds + 2) job.progressed events per run; an observer of GET
// /runs/stream sees at most one progress change per 100 ms per run (plus
// two), and sees the long runs' progress while they run. The daemon's CPU
// per run is logged, not asserted.
func TestRunsLoadProgressFlood(t *testing.T) {
	t.Parallel()
	const floods, trickles = 200, 5
	const runs = floods + trickles
	w := newRunsWorld(t, `
plugin_roots: ["$RUNPLUGINS"]
api: {listen: 127.0.0.1:0}
service: {max_workers: 8}
plugins:
  reporter: {config: {dir: "$SCRATCH"}, retry: {max_attempts: 1}}
`)
	// An observer of the runs channel, filtered to the plugin on the server.
	obs := w.openSSE("/runs/stream?plugin_id=reporter", "")
	deltas := map[string][]runDelta{}
	var deltasMu sync.Mutex
	stopObs := make(chan struct{})
	obsDone := make(chan struct{})
	go func() {
		defer close(obsDone)
		for {
			select {
			case ev, ok := <-obs.events:
				if !ok {
					return
				}
				var d runDelta
				if ev.Data == "" || json.Unmarshal([]byte(ev.Data), &d) != nil || d.RunID == "" {
					continue
				}
				deltasMu.Lock()
				deltas[d.RunID] = append(deltas[d.RunID], d)
				deltasMu.Unlock()
			case <-stopObs:
				return
			}
		}
	}()

	selfBefore, childBefore, err := cpuTimes(w.daemon.pid())
	require.NoError(t, err)
	began := time.Now()
	ids := make([]string, runs)
	entries := make([]string, runs)
	for i := range entries {
		entries[i] = "flood"
		if i%(runs/trickles) == 0 && i/(runs/trickles) < trickles {
			entries[i] = "trickle"
		}
	}
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, raw, err := w.call(http.MethodPost, "/runs", map[string]any{"plugin_id": "reporter", "entry_id": entries[i], "task_id": "load"})
			if err == nil && code/100 != 2 {
				err = fmt.Errorf("POST /runs: %d %s", code, raw)
			}
			var c runCreated
			if err == nil {
				err = json.Unmarshal(raw, &c)
			}
			ids[i], errs[i] = c.RunID, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	// Wait for every run to end (within 30s: start kills the daemon
	// procTimeout after it started).
	records := map[string]runRecord{}
	waitFor(t, 30*time.Second, "every run to end", func() bool {
		for _, id := range ids {
			if _, ok := records[id]; ok {
				continue
			}
			r := w.getRun(id)
			if !runIsTerminal(r.Status) {
				return false
			}
			records[id] = r
		}
		return true
	}, func() string { return fmt.Sprintf("%d of %d ended", len(records), runs) })
	elapsed := time.Since(began)
	selfAfter, childAfter, err := cpuTimes(w.daemon.pid())
	require.NoError(t, err)

	// No export item lost; the last progress value kept.
	for i, id := range ids {
		r := records[id]
		require.Equal(t, "succeeded", r.Status, r.raw)
		require.Equal(t, 1, r.ExportsCount, r.raw)
		items := w.allExports(id, 10)
		require.Len(t, items, 1, id)
		require.Equal(t, entries[i]+" "+id, items[0].Text)
		require.Equal(t, []string{items[0].ExportItemID}, r.ResultRefs)
		require.NotNil(t, r.Progress, r.raw)
		require.Equal(t, 1.0, *r.Progress, "the last progress value is kept: %s", r.raw)
	}

	// GET /runs pages through them all by task, each once.
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	waitFor(t, waitTimeout, "GET /runs?task_id=load&status=succeeded to list every run once", func() bool {
		return equalSets(want, w.listRunIDs("task_id=load&status=succeeded", 50))
	})

	// The ledger: at most one job.progressed per second per run, plus the last.
	l := openLedger(t, w.state)
	stored := map[string]int{}
	for after := int64(0); ; {
		last, err := l.ReadFrom(context.Background(), after, 4096, ledger.Filter{Type: events.JobProgressed}, func(ev ledger.Event) error {
			stored[ev.Stream]++
			return nil
		})
		require.NoError(t, err)
		if last == after {
			break
		}
		after = last
	}
	maxStored := 0
	for i, id := range ids {
		r := records[id]
		require.NotNil(t, r.StartedAt)
		require.NotNil(t, r.FinishedAt)
		secs := *r.FinishedAt - *r.StartedAt
		n := stored[events.JobStream(id)]
		require.Positive(t, n, "run %s stored its progress", id)
		require.LessOrEqual(t, n, int(secs)+2, "run %s (%s): %d job.progressed for a run of %.2fs", id, entries[i], n, secs)
		if entries[i] == "trickle" {
			require.Greater(t, secs, 1.5, "a trickle run lasts two seconds or more")
			require.GreaterOrEqual(t, n, 2, "run %s: progress is stored while it runs, not only at its end (%.2fs)", id, secs)
		}
		maxStored = max(maxStored, n)
	}

	// The observer: at most one progress change per 100 ms per run, plus one.
	// The stream may trail the ledger: wait until it saw every run end.
	waitFor(t, waitTimeout, "the runs stream to show every run's end", func() bool {
		deltasMu.Lock()
		defer deltasMu.Unlock()
		for _, id := range ids {
			ds := deltas[id]
			if len(ds) == 0 || !runIsTerminal(ds[len(ds)-1].Status) {
				return false
			}
		}
		return true
	}, func() string {
		deltasMu.Lock()
		defer deltasMu.Unlock()
		return fmt.Sprintf("the stream showed %d runs", len(deltas))
	})
	close(stopObs)
	<-obsDone
	maxSeen := 0
	for i, id := range ids {
		r := records[id]
		secs := *r.FinishedAt - *r.StartedAt
		changes := 0
		var last *float64
		for _, d := range deltas[id] {
			if d.Progress != nil && (last == nil || *last != *d.Progress) {
				changes++
			}
			last = d.Progress
		}
		limit := int(math.Floor(secs/0.1)) + 2
		require.LessOrEqual(t, changes, limit, "run %s (%s): %d progress changes observed in %.2fs", id, entries[i], changes, secs)
		require.Positive(t, changes, "run %s: the observer saw its progress", id)
		if entries[i] == "trickle" {
			require.GreaterOrEqual(t, changes, 2, "run %s: the observer saw its progress while it ran, not only its end", id)
		}
		require.Equal(t, "add", deltas[id][0].Op, "a run's first delta adds it: %v", deltas[id][0])
		maxSeen = max(maxSeen, changes)
	}

	self, children := selfAfter-selfBefore, childAfter-childBefore
	t.Logf("%d runs × 1,000 progress lines + 1 export item (%d of them over 2s or more) in %v: daemon CPU %v (%v per run), its plugins' CPU %v (%v per run); "+
		"at most %d job.progressed stored and %d progress changes observed for a run",
		runs, trickles, elapsed.Round(time.Millisecond), self, self/runs, children, children/runs, maxStored, maxSeen)
}

// listRunIDs pages through GET /runs?query, limit at a time, and returns
// the ids listed, failing the test if one is listed twice.
func (w *runsWorld) listRunIDs(query string, limit int) map[string]bool {
	w.t.Helper()
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(w.t, pages, 10000, "run pages never end")
		path := fmt.Sprintf("/runs?%s&limit=%d", query, limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var page struct {
			Runs       []runRecord `json:"runs"`
			NextCursor string      `json:"next_cursor"`
		}
		w.doJSON(http.StatusOK, &page, http.MethodGet, path, nil)
		require.LessOrEqual(w.t, len(page.Runs), limit)
		for _, r := range page.Runs {
			require.False(w.t, seen[r.RunID], "run %s listed twice", r.RunID)
			seen[r.RunID] = true
		}
		if page.NextCursor == "" {
			return seen
		}
		cursor = page.NextCursor
	}
}

func equalSets(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
