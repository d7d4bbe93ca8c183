package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/stream"
	"github.com/ductile/ductile/views"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type testBundle struct {
	ctx context.Context
	l   *ledger.Ledger
	srv *httptest.Server
	// served counts requests the handler has returned from.
	mu     sync.Mutex
	served int
}

// setup opens a ledger on a real file and serves its stream on 127.0.0.1.
func setup(t testing.TB, opts stream.Options) *testBundle {
	t.Helper()
	l, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	b := &testBundle{ctx: context.Background(), l: l}
	h := stream.Handler(l, opts)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		b.mu.Lock()
		b.served++
		b.mu.Unlock()
	}))
	t.Cleanup(func() {
		b.srv.Close() // waits for every handler to return
		require.NoError(t, l.Close())
	})
	return b
}

// enqueue appends a job (one job.enqueued event on job/<id>) and returns its id.
func (b *testBundle) enqueue(t testing.TB, plugin string) string {
	res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: plugin, Command: "poll", SubmittedBy: events.ActorCLI,
		MaxAttempts: 1, BackoffBase: time.Second, Now: time.Now()})
	if err != nil {
		t.Error(err)
	}
	return res.JobID
}

func (b *testBundle) head(t testing.TB) int64 {
	seq, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	return seq
}

// message is one SSE message, or a comment (Comment set).
type message struct {
	ID      int64
	Event   string
	Data    views.Event
	Comment string
}

// client is one open stream.
type client struct {
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// open connects to the stream at query (with Last-Event-ID if lastID ≥ 0)
// and reads its opening comment (": after N"), returning N.
func (b *testBundle) open(t testing.TB, query string, lastID int64) (*client, int64) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/events"+query, nil)
	require.NoError(t, err)
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	c := &client{resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	m := c.next(t)
	after, ok := strings.CutPrefix(m.Comment, "after ")
	require.True(t, ok, "the stream opens with where it starts: %+v", m)
	n, err := strconv.ParseInt(after, 10, 64)
	require.NoError(t, err)
	return c, n
}

func (c *client) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next reads the next message or comment.
func (c *client) next(t testing.TB) message {
	var m message
	for {
		line, err := c.r.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if m.Event != "" || m.Comment != "" {
				return m
			}
		case strings.HasPrefix(line, ": "):
			m.Comment = line[2:]
		case strings.HasPrefix(line, "id: "):
			m.ID, err = strconv.ParseInt(line[4:], 10, 64)
			require.NoError(t, err)
		case strings.HasPrefix(line, "event: "):
			m.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(line[6:]), &m.Data))
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// events reads n events, skipping comments.
func (c *client) events(t testing.TB, n int) []message {
	var out []message
	for len(out) < n {
		if m := c.next(t); m.Comment == "" {
			require.Equal(t, m.ID, m.Data.Seq)
			require.Equal(t, m.Event, m.Data.Type)
			out = append(out, m)
		}
	}
	return out
}

// TestReconnectGetsEveryMissedEventOnce: a client reads some events and
// goes while jobs keep being appended; reconnecting with Last-Event-ID, it
// receives every event after the last it read, exactly once, in seq order.
func TestReconnectGetsEveryMissedEventOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, stream.Options{})
	b.enqueue(t, "before") // before the stream: not sent
	c, start := b.open(t, "", -1)
	require.Equal(t, b.head(t), start, "without Last-Event-ID the stream starts at the head")

	const total = 300
	appended := make(chan struct{})
	go func() {
		defer close(appended)
		for range total {
			b.enqueue(t, "echo")
		}
	}()
	first := c.events(t, 40)
	c.close() // mid-stream: the appends go on
	last := first[len(first)-1].ID

	<-appended
	end := b.head(t)
	c2, after := b.open(t, "?after=1", last) // the header wins over ?after=
	defer c2.close()
	require.Equal(t, last, after)
	second := c2.events(t, int(end-last))

	var seqs []int64
	for _, m := range append(first, second...) {
		seqs = append(seqs, m.ID)
	}
	require.Len(t, seqs, int(end-start))
	for i, seq := range seqs {
		require.Equal(t, start+1+int64(i), seq, "every event once, in seq order")
	}
	require.Equal(t, events.JobEnqueued, second[len(second)-1].Event)
}

// TestFilters: ?type= (one or a list), ?stream= and ?job= pass only the
// events they name; bad values are refused with a usage error.
func TestFilters(t *testing.T) {
	t.Parallel()
	b := setup(t, stream.Options{})
	a := b.enqueue(t, "alpha")
	_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: a, Reason: "test", Actor: events.ActorCLI, Now: time.Now()})
	require.NoError(t, err)
	z := b.enqueue(t, "zulu")

	// want reads the seqs of the ledger's events that match.
	want := func(match func(views.Event) bool) []int64 {
		var seqs []int64
		require.NoError(t, views.ReadEvents(b.ctx, b.l, 0, ledger.Filter{}, func(ev views.Event) error {
			if match(ev) {
				seqs = append(seqs, ev.Seq)
			}
			return nil
		}))
		return seqs
	}
	isType := func(types ...string) func(views.Event) bool {
		return func(ev views.Event) bool { return slices.Contains(types, ev.Type) }
	}
	require.Len(t, want(isType(events.JobEnqueued)), 2)
	require.Len(t, want(isType(events.JobCanceled)), 1)

	for _, tc := range []struct {
		query string
		match func(views.Event) bool
	}{
		{"?after=0&type=" + events.JobEnqueued, isType(events.JobEnqueued)},
		{"?after=0&type=" + events.JobEnqueued + "," + events.JobCanceled, isType(events.JobEnqueued, events.JobCanceled)},
		{"?after=0&type=" + events.JobCanceled + "&type=" + events.JobEnqueued, isType(events.JobEnqueued, events.JobCanceled)},
		{"?after=0&stream=" + events.JobStream(z), func(ev views.Event) bool { return ev.Stream == events.JobStream(z) }},
		{"?after=0&job=" + a, func(ev views.Event) bool { return ev.Stream == events.JobStream(a) }},
		{"?after=0&job=" + a + "&type=" + events.JobEnqueued, func(ev views.Event) bool {
			return ev.Stream == events.JobStream(a) && ev.Type == events.JobEnqueued
		}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			expected := want(tc.match)
			require.NotEmpty(t, expected)
			c, _ := b.open(t, tc.query, -1)
			defer c.close()
			var got []int64
			for _, m := range c.events(t, len(expected)) {
				got = append(got, m.ID)
				require.True(t, tc.match(m.Data), m)
			}
			require.Equal(t, expected, got)
			// What follows is the next matching event appended: by type, a
			// new job's; by stream, z's cancel after a job of another stream.
			if strings.Contains(tc.query, "job=") {
				return // a's stream takes no more events
			}
			next := events.JobStream(b.enqueue(t, "other"))
			if strings.Contains(tc.query, "stream=") {
				_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: z, Reason: "test", Actor: events.ActorCLI, Now: time.Now()})
				require.NoError(t, err)
				next = events.JobStream(z)
			}
			m := c.events(t, 1)[0]
			require.Equal(t, next, m.Data.Stream)
			require.True(t, tc.match(m.Data))
		})
	}

	for _, bad := range []struct{ query, header string }{
		{"?after=x", ""}, {"?after=-1", ""}, {"?after=", ""}, {"", "abc"},
		{"?type=a,,b", ""}, {"?stream=", ""}, {"?job=", ""}, {"?job=a/b", ""}, {"?job=x&stream=job/y", ""},
	} {
		req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/events"+bad.query, nil)
		require.NoError(t, err)
		if bad.header != "" {
			req.Header.Set("Last-Event-ID", bad.header)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var e struct{ Code, Message, Hint string } // the API's error shape
		require.NoError(t, json.Unmarshal(body, &e), string(body))
		require.Equal(t, "invalid_input", e.Code)
		require.NotEmpty(t, e.Message)
		require.NotEmpty(t, e.Hint)
	}
}

// TestCorrelationFilter: ?correlation=ID passes only the events of one
// job tree (each carries its root's id as meta.correlation_id), those
// appended later too; an empty one is refused.
func TestCorrelationFilter(t *testing.T) {
	t.Parallel()
	b := setup(t, stream.Options{})
	// tree enqueues a root job and a child routed from it: a tree.
	tree := func(plugin string) (root, child string) {
		root = b.enqueue(t, plugin)
		res, err := commands.EnqueueJob(b.ctx, b.l, commands.Enqueue{Plugin: plugin, Command: "handle", SubmittedBy: events.ActorRoute,
			ParentJobID: root, Correlation: root, Depth: 1, MaxAttempts: 1, BackoffBase: time.Second, Now: time.Now()})
		require.NoError(t, err)
		return root, res.JobID
	}
	rootB, childB := tree("bravo") // first: unfiltered, its events would come first
	rootA, childA := tree("alpha")

	c, _ := b.open(t, "?after=0&correlation="+rootA, -1)
	defer c.close()
	var streams []string
	for _, m := range c.events(t, 2) {
		streams = append(streams, m.Data.Stream)
		require.Equal(t, events.JobEnqueued, m.Event)
	}
	require.Equal(t, []string{events.JobStream(rootA), events.JobStream(childA)}, streams, "tree A's two jobs, not tree B's")

	// Live: B's child's cancel is left out, A's child's comes next.
	for _, id := range []string{childB, rootB, childA} {
		_, err := commands.CancelJob(b.ctx, b.l, commands.Cancel{JobID: id, Reason: "test", Actor: events.ActorCLI, Now: time.Now()})
		require.NoError(t, err)
	}
	m := c.events(t, 1)[0]
	require.Equal(t, events.JobStream(childA), m.Data.Stream)
	require.Equal(t, events.JobCanceled, m.Event)
	require.Contains(t, string(m.Data.Meta), `"correlation_id":"`+rootA+`"`)

	resp, err := http.Get(b.srv.URL + "/events?correlation=")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestHeartbeat: an idle stream writes ": ping" comments.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, stream.Options{Heartbeat: 20 * time.Millisecond})
	c, _ := b.open(t, "", -1)
	defer c.close()
	for range 3 {
		require.Equal(t, message{Comment: "ping"}, c.next(t))
	}
	// An event in between is delivered as usual.
	id := b.enqueue(t, "alpha")
	for {
		if m := c.next(t); m.Comment == "" {
			require.Equal(t, events.JobStream(id), m.Data.Stream)
			break
		}
	}
}

// TestConcurrentStreams: 50 streams all receive the same events, and every
// handler returns once its client goes.
func TestConcurrentStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, stream.Options{})
	const streams, jobs = 50, 100
	clients := make([]*client, streams)
	for i := range clients {
		var start int64
		clients[i], start = b.open(t, "", -1)
		require.Equal(t, int64(0), start)
	}
	for range jobs {
		b.enqueue(t, "alpha")
	}
	var wg sync.WaitGroup
	got := make([][]int64, streams)
	for i, c := range clients {
		wg.Go(func() {
			for _, m := range c.events(t, jobs) {
				got[i] = append(got[i], m.ID)
			}
		})
	}
	wg.Wait()
	for i := range got {
		require.Len(t, got[i], jobs)
		require.Equal(t, got[0], got[i], fmt.Sprintf("stream %d", i))
	}
	for _, c := range clients {
		c.close()
	}
	// Each handler returns once its client is gone (no goroutine is left:
	// TestMain checks, and the server's Close waits for them).
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.served == streams
	}, 10*time.Second, 5*time.Millisecond)
}

// A client that stops reading loses its stream once a write to it has
// waited WriteTimeout: the handler returns instead of holding the stream
// (and its follower) for as long as the client keeps the connection open.
func TestAStreamWhoseClientStopsReadingEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, stream.Options{WriteTimeout: 200 * time.Millisecond})
	pad := strings.Repeat("z", 8<<10)
	for i := range 500 { // 4 MB: far more than the sockets' buffers
		_, err := b.l.Append(b.ctx, ledger.NewEvent{Stream: fmt.Sprintf("pad/%d", i), Type: "test.padded", Data: map[string]string{"pad": pad}})
		require.NoError(t, err)
	}
	conn, err := net.Dial("tcp", b.srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(1024))
	_, err = fmt.Fprintf(conn, "GET /?after=0 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	line, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "200")
	// Never read again: the handler must return on its own.
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.served == 1
	}, 20*time.Second, 10*time.Millisecond, "the stream of a client that stopped reading is still served")
}
