package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/api"
	"github.com/ductile/ductile/events"
)

// sseMessage is one SSE message of a stream.
type sseMessage struct {
	ID    int64
	Event string
	Data  map[string]any
}

// sseClient is one open stream.
type sseClient struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// openStream opens GET path as token (with Last-Event-ID if lastID ≥ 0)
// and reads its opening comment; a refused stream is returned as a
// response instead.
func (f *fixture) openStream(path, token string, lastID int64) (*sseClient, *response) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+path, nil)
	require.NoError(f.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	statuses.Lock()
	route := "GET " + routeOf("GET", req.URL.Path)
	if statuses.seen[route] == nil {
		statuses.seen[route] = map[int]bool{}
	}
	statuses.seen[route][resp.StatusCode] = true
	statuses.Unlock()
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(f.t, err)
		r := response{status: resp.StatusCode, raw: raw, header: resp.Header}
		_ = json.Unmarshal(raw, &r.body)
		return nil, &r
	}
	c := &sseClient{t: f.t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	f.t.Cleanup(c.close)
	line, err := c.r.ReadString('\n')
	require.NoError(f.t, err)
	require.True(f.t, strings.HasPrefix(line, ": after "), line)
	_, _ = c.r.ReadString('\n')
	return c, nil
}

func (c *sseClient) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next reads the next message (comments skipped); ok is false once the
// stream has ended.
func (c *sseClient) next() (m sseMessage, ok bool) {
	c.t.Helper()
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			require.Empty(c.t, line, "a message was cut short")
			return m, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if m.Event != "" {
				return m, true
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			m.ID, err = strconv.ParseInt(line[4:], 10, 64)
			require.NoError(c.t, err)
		case strings.HasPrefix(line, "event: "):
			m.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			require.NoError(c.t, json.Unmarshal([]byte(line[6:]), &m.Data))
		}
	}
}

// all reads messages until the stream ends.
func (c *sseClient) all() []sseMessage {
	c.t.Helper()
	var out []sseMessage
	for {
		m, ok := c.next()
		if !ok {
			return out
		}
		out = append(out, m)
	}
}

// TestRunStream: GET /runs/stream sends each change of the runs its
// filters pass, as of the event it comes from; with run_id it ends after
// the run's end; Last-Event-ID resumes after the last message read.
func TestRunStream(t *testing.T) {
	f := start(t, nil)
	head := f.l.Head()
	all, _ := f.openStream("/runs/stream", "jobs-ro", -1) // from the head: new changes only
	byTask, _ := f.openStream("/runs/stream?task_id=watched&after="+strconv.FormatInt(head, 10), "jobs-ro", -1)
	canceled, _ := f.openStream("/runs/stream?status=canceled", "jobs-ro", -1)

	other := f.newRun("other")
	id := f.newRun("watched")
	attempt := f.startAttempt(id)
	f.engineReport(id, attempt, 0.5)
	f.end(id, attempt, events.OutcomeOK)
	r := f.do("POST", "/runs/"+other+"/cancel", "jobs-rw", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))

	// The run's changes, in order: created, started, progressed, succeeded.
	var ofRun []sseMessage
	for len(ofRun) < 4 {
		m, ok := byTask.next()
		require.True(t, ok)
		require.Equal(t, "run", m.Event)
		require.Equal(t, id, m.Data["run_id"], "only the task's run")
		ofRun = append(ofRun, m)
	}
	require.Equal(t, []any{"add", "change", "change", "change"}, []any{ofRun[0].Data["op"], ofRun[1].Data["op"], ofRun[2].Data["op"], ofRun[3].Data["op"]})
	require.Equal(t, []any{"queued", "running", "running", "succeeded"},
		[]any{ofRun[0].Data["status"], ofRun[1].Data["status"], ofRun[2].Data["status"], ofRun[3].Data["status"]})
	require.Nil(t, ofRun[0].Data["progress"])
	require.Equal(t, 0.5, ofRun[2].Data["progress"])
	require.NotZero(t, ofRun[3].Data["updated_at"])

	// Everyone's: both runs, the other's add first.
	m, ok := all.next()
	require.True(t, ok)
	require.Equal(t, other, m.Data["run_id"])
	require.Equal(t, "add", m.Data["op"])
	// By status: only the cancel.
	m, ok = canceled.next()
	require.True(t, ok)
	require.Equal(t, other, m.Data["run_id"])
	require.Equal(t, "canceled", m.Data["status"])

	// One run's stream from the start ends after its end; resumed after its
	// second message, it sends the rest exactly once.
	one, _ := f.openStream("/runs/stream?run_id="+id+"&after=0", "jobs-ro", -1)
	whole := one.all()
	require.Len(t, whole, 4)
	for i := range whole {
		require.Equal(t, ofRun[i].ID, whole[i].ID)
	}
	resumed, _ := f.openStream("/runs/stream?run_id="+id+"&after=0", "jobs-ro", whole[1].ID) // the header wins
	rest := resumed.all()
	require.Len(t, rest, 2)
	require.Equal(t, whole[2].ID, rest[0].ID)
	require.Equal(t, "succeeded", rest[1].Data["status"])

	// Resumed after its end (or without a start, at the head), it ends at once.
	for _, last := range []int64{whole[3].ID, -1} {
		done, _ := f.openStream("/runs/stream?run_id="+id, "jobs-ro", last)
		require.Empty(t, done.all())
	}

	// A live one-run stream ends when the run does.
	live := f.newRun("live")
	follow, _ := f.openStream("/runs/stream?run_id="+live, "jobs-ro", -1)
	r = f.do("POST", "/runs/"+live+"/cancel", "jobs-rw", nil)
	require.Equal(t, http.StatusOK, r.status, string(r.raw))
	got := follow.all()
	require.Len(t, got, 1)
	require.Equal(t, "canceled", got[0].Data["status"])

	for _, bad := range []string{"?status=dead", "?after=x", "?run_id=a/b"} {
		_, refused := f.openStream("/runs/stream"+bad, "jobs-ro", -1)
		require.NotNil(t, refused, bad)
		requireError(t, *refused, http.StatusBadRequest, "invalid_input")
	}
}

// engineReport records a progress value of run id's running attempt,
// through the engine's RunReport (flushed by Close).
func (f *fixture) engineReport(id string, attempt int, progress float64) {
	f.t.Helper()
	rep := f.engine().Report(id, attempt)
	rep.Progress(events.Progressed{Attempt: attempt, Progress: &progress, Stage: "halfway", Message: "half done"})
	rep.Close(context.Background())
}

// TestRunExportStream: GET /runs/{id}/export/stream sends the run's items
// from its first (durable before they are sent), then, once the run has
// ended, an end message, and ends; Last-Event-ID resumes after an item.
func TestRunExportStream(t *testing.T) {
	f := start(t, nil)
	id := f.newRun("")
	c, _ := f.openStream("/runs/"+id+"/export/stream", "jobs-ro", -1)
	attempt := f.startAttempt(id)
	first := f.export(id, attempt, "one")
	m, ok := c.next()
	require.True(t, ok)
	require.Equal(t, "export", m.Event)
	require.Equal(t, first.ExportItemID, m.Data["export_item_id"])
	require.Equal(t, id, m.Data["run_id"])
	require.Equal(t, "one", m.Data["text"])
	c.close() // a disconnect: items go on being made

	second := f.export(id, attempt, "two")
	third := f.export(id, attempt, "three")
	f.end(id, attempt, events.OutcomeOK)

	resumed, _ := f.openStream("/runs/"+id[len(id)-12:]+"/export/stream", "jobs-ro", m.ID)
	rest := resumed.all()
	require.Len(t, rest, 3)
	require.Equal(t, second.ExportItemID, rest[0].Data["export_item_id"])
	require.Equal(t, third.ExportItemID, rest[1].Data["export_item_id"])
	require.Equal(t, "end", rest[2].Event)
	require.Equal(t, map[string]any{"run_id": id, "status": "succeeded"}, rest[2].Data)

	// From the start: every item, then the end.
	whole, _ := f.openStream("/runs/"+id+"/export/stream", "jobs-ro", -1)
	require.Len(t, whole.all(), 4)

	_, refused := f.openStream("/runs/0190aaaa-0000-7000-8000-000000000000/export/stream", "jobs-ro", -1)
	requireError(t, *refused, http.StatusNotFound, "not_found")
	_, refused = f.openStream("/runs/"+strings.Repeat("x", 65)+"/export/stream", "jobs-ro", -1)
	requireError(t, *refused, http.StatusBadRequest, "invalid_input")
	_, refused = f.openStream("/runs/"+id+"/export/stream?after=-1", "jobs-ro", -1)
	requireError(t, *refused, http.StatusBadRequest, "invalid_input")
}

// TestRunStreamsPerTokenAreCapped: the run streams count against
// api.max_streams_per_token as GET /events does.
func TestRunStreamsPerTokenAreCapped(t *testing.T) {
	f := start(t, func(o *api.Options) { o.Settings.MaxStreamsPerToken = 1 })
	id := f.newRun("")
	open, _ := f.openStream("/runs/stream", "jobs-ro", -1)
	for _, path := range []string{"/runs/stream", "/runs/" + id + "/export/stream"} {
		_, refused := f.openStream(path, "jobs-ro", -1)
		require.NotNil(t, refused, path)
		requireError(t, *refused, http.StatusTooManyRequests, "too_many_streams")
	}
	open.close()
	require.Eventually(t, func() bool {
		c, refused := f.openStream("/runs/"+id+"/export/stream", "jobs-ro", -1)
		if c != nil {
			c.close()
		}
		return refused == nil
	}, 10*time.Second, 10*time.Millisecond, "a closed stream's place is free")
}
