package pluginhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// deliveries collects what OnStderr receives.
type deliveries struct {
	mu  sync.Mutex
	got []pluginhost.StderrLines
	new chan struct{} // closed and replaced at each delivery
}

func newDeliveries() *deliveries { return &deliveries{new: make(chan struct{})} }

func (d *deliveries) deliver(sl pluginhost.StderrLines) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, sl)
	close(d.new)
	d.new = make(chan struct{})
}

func (d *deliveries) snapshot() ([]pluginhost.StderrLines, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]pluginhost.StderrLines(nil), d.got...), d.new
}

// lines is every line delivered, checking that the runs follow each other.
func (d *deliveries) lines(t *testing.T) []string {
	t.Helper()
	got, _ := d.snapshot()
	var out []string
	for _, sl := range got {
		require.Equal(t, len(out), sl.First, "each run starts where the last ended")
		for _, l := range sl.Lines {
			require.False(t, l.At.IsZero())
			out = append(out, l.Text)
		}
	}
	return out
}

// A plugin's stderr reached the core only once it had exited: a job's logs
// showed nothing while it ran. OnStderr now gets each line while the plugin
// runs (here the plugin waits for the test, which waits for the line).
func TestRunStreamsStderrWhileThePluginRuns(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	req := pollRequest()
	req.Config = json.RawMessage(fmt.Sprintf(`{"fifo":%q}`, fifo))
	d := newDeliveries()
	done := make(chan pluginhost.Result, 1)
	go func() {
		done <- pluginhost.Run(context.Background(), fixture(t, "stderr_live"), req, pluginhost.RunOptions{OnStderr: d.deliver})
	}()

	got, delivered := d.snapshot()
	for len(got) == 0 {
		select {
		case <-delivered:
		case res := <-done:
			t.Fatalf("the run ended (%s: %s) before any stderr was delivered", res.Kind, res.Err)
		}
		got, delivered = d.snapshot()
	}
	require.Equal(t, []pluginhost.StderrLines{{First: 0, Lines: got[0].Lines}}, got)
	require.Len(t, got[0].Lines, 1)
	require.Equal(t, "waiting for the test", got[0].Lines[0].Text)

	f, err := os.OpenFile(fifo, os.O_WRONLY, 0) // blocks until the plugin opens it
	require.NoError(t, err)
	_, err = f.WriteString("the test\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	res := <-done
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	// The last line has no newline: it is delivered when stderr closes,
	// before Run returns.
	require.Equal(t, []string{"waiting for the test", "released by the test, no newline"}, d.lines(t))
	require.Equal(t, pluginhost.SplitStderr(res.Stderr), d.lines(t))
}

// Many lines written at once are coalesced: a delivery per StderrChunkSize
// of lines or per StderrInterval, not one per line; together they are
// exactly the captured stderr, cut as SplitStderr cuts it.
func TestRunCoalescesStderrLines(t *testing.T) {
	t.Parallel()
	d := newDeliveries()
	res := run(t, "stderr_many", pluginhost.RunOptions{OnStderr: d.deliver})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	lines := d.lines(t)
	require.Equal(t, pluginhost.SplitStderr(res.Stderr), lines)
	require.Len(t, lines, 2003, "2000 lines, and one of 10000 bytes cut in three")
	require.Equal(t, "line 1", lines[0])
	require.Equal(t, strings.Repeat("L", pluginhost.MaxStderrLine), lines[1000])
	require.Equal(t, strings.Repeat("L", 10000-2*pluginhost.MaxStderrLine), lines[1002])
	require.Equal(t, "line 2000", lines[2002])

	got, _ := d.snapshot()
	cost := 0
	for _, l := range lines {
		cost += len(l) + 64
	}
	// Each delivery is full (StderrChunkSize), or its interval ran out, or
	// it is the last one.
	most := cost/pluginhost.StderrChunkSize + int(res.Duration/pluginhost.StderrInterval) + 2
	require.LessOrEqual(t, len(got), most, "%d deliveries for %d lines in %v", len(got), len(lines), res.Duration)
	for _, sl := range got {
		require.False(t, sl.Truncated)
	}
}

// A run streams the whole lines of the first ExcerptBytes of its stderr:
// the line that goes on past them is not streamed, the last delivery says
// the stream stops there, and each line streamed is the line of that
// number in Result.Stderr, which holds the rest.
func TestRunStreamsTheFirstExcerptOfStderr(t *testing.T) {
	t.Parallel()
	d := newDeliveries()
	res := run(t, "stderr_straddle", pluginhost.RunOptions{OnStderr: d.deliver})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	require.False(t, res.StderrTruncated, "40000 bytes are within twice ExcerptBytes: all kept")
	require.EqualValues(t, 40000, res.StderrBytes)
	all := pluginhost.SplitStderr(res.Stderr)
	require.Len(t, all, 40)
	lines := d.lines(t)
	require.Len(t, lines, 32, "the 33rd line, from byte 32000, goes on past 32 KiB")
	require.Equal(t, all[:32], lines)
	got, _ := d.snapshot()
	require.True(t, got[len(got)-1].Truncated)
}

// A run streams at most MaxStreamedStderr; the last delivery says the
// stream stops there, and the rest is in Result.Stderr only.
func TestRunBoundsStreamedStderr(t *testing.T) {
	t.Parallel()
	d := newDeliveries()
	res := run(t, "stderr_blank", pluginhost.RunOptions{OnStderr: d.deliver})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	all := pluginhost.SplitStderr(res.Stderr)
	require.Len(t, all, 10000)
	lines := d.lines(t)
	require.Len(t, lines, pluginhost.MaxStreamedStderr/64)
	got, _ := d.snapshot()
	require.True(t, got[len(got)-1].Truncated)
	for _, sl := range got[:len(got)-1] {
		require.False(t, sl.Truncated)
	}
}

// A plugin that writes nothing to stderr gets no delivery (and no goroutine
// waits for one: goleak would see it).
func TestRunQuietPluginDeliversNoStderr(t *testing.T) {
	t.Parallel()
	d := newDeliveries()
	res := run(t, "ok", pluginhost.RunOptions{OnStderr: d.deliver})
	require.Equal(t, events.OutcomeOK, res.Kind, res.Err)
	got, _ := d.snapshot()
	require.Empty(t, got)
}

func TestSplitStderr(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", pluginhost.MaxStderrLine)
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"\n", []string{""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"a\r\nb\n", []string{"a\r", "b"}},
		{long + "\n", []string{long}},
		{long + "y\n", []string{long, "y"}},
		{long + long, []string{long, long}},
	} {
		require.Equal(t, tc.want, pluginhost.SplitStderr([]byte(tc.in)), "%q", tc.in)
	}
}
