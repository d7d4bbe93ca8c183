package main_test

// The world of the Run protocol's end-to-end tests (runs_e2e_test.go,
// runs_load_e2e_test.go): a daemon with the API on a free loopback port, a
// token with every scope, and an HTTP client for /runs and its two SSE
// streams. The tests read runs through the API's JSON (the contract of
// spec run-protocol.md §5.1 and §6.2), not through Go types of the daemon.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ductile/ductile/events"
	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/ledger"
)

// runsWorld is a jobWorld whose daemon serves the API on 127.0.0.1:0.
type runsWorld struct {
	*jobWorld
	env    []string // the daemon's environment
	key    string   // a bearer key with every scope
	base   string   // http://127.0.0.1:PORT of the running daemon
	daemon *proc
	client *http.Client
}

// runPluginsDir is the root of the Run protocol's fixture plugins.
func runPluginsDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "runplugins"))
	require.NoError(t, err)
	return dir
}

// newRunsWorld writes the config (yaml as newJobWorld takes it, plus
// $RUNPLUGINS for testdata/runplugins and $STATE for the state directory),
// makes a token with every scope and starts the daemon with the extra
// environment variables env.
func newRunsWorld(t *testing.T, yaml string, env ...string) *runsWorld {
	t.Helper()
	yaml = strings.ReplaceAll(yaml, "$RUNPLUGINS", runPluginsDir(t))
	w := &runsWorld{
		jobWorld: newJobWorld(t, yaml),
		env:      cleanEnv(t, env...),
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: procTimeout},
	}
	if strings.Contains(yaml, "$STATE") {
		b, err := os.ReadFile(w.config)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(w.config, []byte(strings.ReplaceAll(string(b), "$STATE", w.state)), 0o600))
	}
	t.Cleanup(w.client.CloseIdleConnections)
	w.key = lastLine(mustRun(t, nil, w.args("config", "token", "create", "runs-e2e", "--scopes", "*")...).stdout)
	require.Regexp(t, `^dtk_`, w.key)
	w.boot()
	return w
}

// boot starts the daemon and waits until its API listens and it has started.
func (w *runsWorld) boot() {
	w.t.Helper()
	p := start(w.t, w.env, w.args("system", "start")...)
	w.t.Cleanup(func() {
		if w.t.Failed() {
			lines, _ := p.snapshot()
			w.t.Logf("daemon (pid %d) log:\n%s\nstderr:\n%s", p.pid(), strings.Join(lines, "\n"), p.stderr.String())
		}
	})
	line, _ := p.waitLine(w.t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(w.t, json.Unmarshal([]byte(line), &listening))
	w.base = "http://" + listening.Addr
	p.waitLine(w.t, 0, messageIs("ductile started"))
	w.daemon = p
}

// call sends one request (body marshaled to JSON unless nil) and returns
// the status and body. It may run on any goroutine: it reports errors
// instead of failing the test.
func (w *runsWorld) call(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, err
}

// do is call that fails the test on a transport error.
func (w *runsWorld) do(method, path string, body any) (int, []byte) {
	w.t.Helper()
	code, raw, err := w.call(method, path, body)
	require.NoError(w.t, err, "%s %s", method, path)
	return code, raw
}

// doJSON is do that requires the status want and decodes the answer into out.
func (w *runsWorld) doJSON(want int, out any, method, path string, body any) []byte {
	w.t.Helper()
	code, raw := w.do(method, path, body)
	require.Equal(w.t, want, code, "%s %s: %s", method, path, raw)
	require.NoError(w.t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	return raw
}

// apiError is an error answer of the API.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
}

// runCreated is the answer of POST /runs.
type runCreated struct {
	RunID    string `json:"run_id"`
	Status   string `json:"status"`
	Existing bool   `json:"existing"`
}

// runError is a run's error object (spec §9).
type runError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details struct {
		Attempt   int    `json:"attempt"`
		ExitCode  *int   `json:"exit_code"`
		Kind      string `json:"kind"`
		Retryable bool   `json:"retryable"`
	} `json:"details"`
}

// runRecord is GET /runs/{id} of a plugin run (spec §5.1).
type runRecord struct {
	RunID             string    `json:"run_id"`
	Kind              string    `json:"kind"`
	PluginID          string    `json:"plugin_id"`
	EntryID           string    `json:"entry_id"`
	Status            string    `json:"status"`
	CreatedAt         float64   `json:"created_at"`
	UpdatedAt         float64   `json:"updated_at"`
	StartedAt         *float64  `json:"started_at"`
	FinishedAt        *float64  `json:"finished_at"`
	TaskID            *string   `json:"task_id"`
	TraceID           *string   `json:"trace_id"`
	IdempotencyKey    *string   `json:"idempotency_key"`
	RootRunID         *string   `json:"root_run_id"`
	ParentRunID       *string   `json:"parent_run_id"`
	Attempt           *int      `json:"attempt"`
	Progress          *float64  `json:"progress"`
	Stage             *string   `json:"stage"`
	Message           *string   `json:"message"`
	CancelRequested   bool      `json:"cancel_requested"`
	CancelReason      *string   `json:"cancel_reason"`
	CancelRequestedAt *float64  `json:"cancel_requested_at"`
	Error             *runError `json:"error"`
	ResultRefs        []string  `json:"result_refs"`
	Attempts          []struct {
		Attempt int       `json:"attempt"`
		Status  string    `json:"status"`
		Error   *runError `json:"error"`
	} `json:"attempts"`
	ExportsCount int `json:"exports_count"`

	raw string
}

// specRecordKeys are the keys every RunRecord answer holds, null or not
// (spec §5.1: the MUST fields and the SHOULD fields).
var specRecordKeys = []string{
	"run_id", "plugin_id", "entry_id", "status", "created_at", "updated_at",
	"task_id", "trace_id", "idempotency_key", "root_run_id", "parent_run_id", "attempt",
	"started_at", "finished_at", "progress", "cancel_requested", "cancel_reason",
	"cancel_requested_at", "error", "result_refs",
}

// runIsTerminal reports whether status is one of the spec's terminal statuses.
func runIsTerminal(status string) bool {
	switch status {
	case "succeeded", "failed", "canceled", "timeout":
		return true
	}
	return false
}

// getRun is GET /runs/{id}; it requires every key of spec §5.1.
func (w *runsWorld) getRun(id string) runRecord {
	w.t.Helper()
	var r runRecord
	raw := w.doJSON(http.StatusOK, &r, http.MethodGet, "/runs/"+id, nil)
	var keys map[string]json.RawMessage
	require.NoError(w.t, json.Unmarshal(raw, &keys))
	for _, k := range specRecordKeys {
		require.Contains(w.t, keys, k, "GET /runs/%s lacks %q: %s", id, k, raw)
	}
	r.raw = string(raw)
	return r
}

// waitRun reads run id until cond holds, failing after waitTimeout.
func (w *runsWorld) waitRun(id, what string, cond func(runRecord) bool) runRecord {
	w.t.Helper()
	return w.waitRunFor(waitTimeout, id, what, cond)
}

func (w *runsWorld) waitRunFor(timeout time.Duration, id, what string, cond func(runRecord) bool) runRecord {
	w.t.Helper()
	var r runRecord
	waitFor(w.t, timeout, fmt.Sprintf("run %s to be %s", id, what), func() bool {
		r = w.getRun(id)
		return cond(r)
	}, func() string { return "last seen: " + r.raw })
	return r
}

// waitTerminal waits until run id is in a terminal status.
func (w *runsWorld) waitTerminal(id string) runRecord {
	w.t.Helper()
	return w.waitRun(id, "terminal", func(r runRecord) bool { return runIsTerminal(r.Status) })
}

// createRun is POST /runs; it requires a 2xx answer with a run id.
func (w *runsWorld) createRun(body map[string]any) runCreated {
	w.t.Helper()
	code, raw := w.do(http.MethodPost, "/runs", body)
	require.True(w.t, code == http.StatusCreated || code == http.StatusAccepted || code == http.StatusOK,
		"POST /runs %v: %d %s", body, code, raw)
	var c runCreated
	require.NoError(w.t, json.Unmarshal(raw, &c), "%s", raw)
	require.NotEmpty(w.t, c.RunID, "%s", raw)
	return c
}

// exportItem is one export item (spec §6.2).
type exportItem struct {
	ExportItemID string          `json:"export_item_id"`
	RunID        string          `json:"run_id"`
	Type         string          `json:"type"`
	CreatedAt    float64         `json:"created_at"`
	Attempt      int             `json:"attempt"`
	Description  string          `json:"description"`
	Text         string          `json:"text"`
	URL          string          `json:"url"`
	BinaryURL    string          `json:"binary_url"`
	Binary       []byte          `json:"binary"`
	MIME         string          `json:"mime"`
	Metadata     json.RawMessage `json:"metadata"`
	TraceID      string          `json:"trace_id"`
}

// exportPage is GET /runs/{id}/export.
type exportPage struct {
	Items     []exportItem `json:"items"`
	NextAfter *string      `json:"next_after"`
}

// exports reads one page of run id's export items.
func (w *runsWorld) exports(id, after string, limit int) exportPage {
	w.t.Helper()
	path := "/runs/" + id + "/export?limit=" + strconv.Itoa(limit)
	if after != "" {
		path += "&after=" + after
	}
	var p exportPage
	raw := w.doJSON(http.StatusOK, &p, http.MethodGet, path, nil)
	require.NotNil(w.t, p.Items, "items is a list, never null: %s", raw)
	return p
}

// allExports pages through run id's export items, limit at a time.
func (w *runsWorld) allExports(id string, limit int) []exportItem {
	w.t.Helper()
	var all []exportItem
	after := ""
	for pages := 0; ; pages++ {
		require.Less(w.t, pages, 10000, "export pages never end")
		p := w.exports(id, after, limit)
		require.LessOrEqual(w.t, len(p.Items), limit)
		all = append(all, p.Items...)
		if p.NextAfter == nil || *p.NextAfter == "" {
			return all
		}
		require.NotEqual(w.t, after, *p.NextAfter, "next_after moves on")
		after = *p.NextAfter
	}
}

// itemIDs are the export item ids of items, in order.
func itemIDs(items []exportItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ExportItemID)
	}
	return out
}

// sseEvent is one event of a text/event-stream.
type sseEvent struct {
	ID, Event, Data string
}

// sseStream is an open SSE connection read on a goroutine of its own.
type sseStream struct {
	resp   *http.Response
	ctx    context.Context // canceled by close
	cancel context.CancelFunc
	events chan sseEvent
	done   chan struct{} // closed once the reader goroutine has returned
	mu     sync.Mutex
	err    error // why the reader stopped
}

// openSSE opens GET path as an event stream, with Last-Event-ID if
// lastEventID is not empty; the test's cleanup closes it.
func (w *runsWorld) openSSE(path, lastEventID string) *sseStream {
	w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.base+path, nil)
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer "+w.key)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	client := &http.Client{Transport: w.client.Transport} // no overall timeout: a stream lasts
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		require.NoError(w.t, err, "GET %s", path)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		w.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
	}
	require.Contains(w.t, resp.Header.Get("Content-Type"), "text/event-stream")
	s := &sseStream{resp: resp, ctx: ctx, cancel: cancel, events: make(chan sseEvent, 1<<16), done: make(chan struct{})}
	go s.read()
	w.t.Cleanup(s.close)
	return s
}

// read parses events until the stream ends or is closed.
func (s *sseStream) read() {
	defer close(s.done)
	defer close(s.events)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(data) > 0 || ev.ID != "" || ev.Event != "" {
				ev.Data = strings.Join(data, "\n")
				select {
				case s.events <- ev:
				case <-s.ctx.Done():
					return // closed while nobody reads
				}
			}
			ev, data = sseEvent{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: a heartbeat
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		}
	}
	s.mu.Lock()
	s.err = sc.Err()
	s.mu.Unlock()
}

// next returns the next event whose data is not empty, failing the test if
// none comes within timeout or the stream ends.
func (s *sseStream) next(t *testing.T, timeout time.Duration) sseEvent {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.mu.Lock()
				defer s.mu.Unlock()
				t.Fatalf("the event stream ended (%v) before the expected event", s.err)
			}
			if ev.Data == "" {
				continue
			}
			return ev
		case <-deadline.C:
			t.Fatalf("no event within %v", timeout)
		}
	}
}

// close ends the connection and waits for its reader.
func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// readPIDs waits for a fixture to write its pids (space-separated
// integers) to file, and returns them.
func readPIDs(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	waitFor(t, waitTimeout, "the plugin's pids in "+file, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		fields := strings.Fields(string(b))
		if len(fields) != n || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pids = pids[:0]
		for _, f := range fields {
			pid, err := strconv.Atoi(f)
			require.NoError(t, err, "pids file %s: %q", file, b)
			pids = append(pids, pid)
		}
		return true
	})
	return pids
}

// groupMembers are the live (not zombie) processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			out = append(out, pid)
		}
	}
	return out
}

// jobEvents are the events of a job's stream, oldest first, read from the
// ledger file (a second connection, as another process would).
func jobEvents(t *testing.T, stateDir, jobID string) []ledger.Event {
	t.Helper()
	l := openLedger(t, stateDir)
	evs, err := l.ReadStream(context.Background(), events.JobStream(jobID))
	require.NoError(t, err)
	return evs
}

// jobEventTypes are the types of jobEvents.
func jobEventTypes(t *testing.T, stateDir, jobID string) []string {
	t.Helper()
	var out []string
	for _, ev := range jobEvents(t, stateDir, jobID) {
		out = append(out, ev.Type)
	}
	return out
}

// treeJobAt is a job of `job tree --at SEQ --json`: as it was then, with
// its progress and export items.
type treeJobAt struct {
	ID       string `json:"job_id"`
	Status   string `json:"status"`
	Progress *struct {
		Progress *float64 `json:"progress"`
		Stage    string   `json:"stage"`
		Message  string   `json:"message"`
	} `json:"progress"`
	Exports []string `json:"exports"`
}

// jobAt is run id's job as `job tree ID --at SEQ --json` shows it (time travel).
func (w *runsWorld) jobAt(id string, seq int64) treeJobAt {
	w.t.Helper()
	var tree struct {
		AtSeq int64       `json:"at_seq"`
		Jobs  []treeJobAt `json:"jobs"`
	}
	w.runJSON(0, &tree, "job", "tree", id, "--at", strconv.FormatInt(seq, 10), "--json")
	require.Equal(w.t, seq, tree.AtSeq)
	for _, j := range tree.Jobs {
		if j.ID == id {
			return j
		}
	}
	w.t.Fatalf("job tree %s --at %d lists no job %s", id, seq, id)
	return treeJobAt{}
}
