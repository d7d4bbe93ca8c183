package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// DefaultHeartbeat is how often an idle stream writes a comment line.
const DefaultHeartbeat = 15 * time.Second

// DefaultWriteTimeout is how long one write to a client may take before the
// stream gives up on it.
const DefaultWriteTimeout = 30 * time.Second

// Options configure a stream handler.
type Options struct {
	// Heartbeat is how often an idle stream writes ": ping" so proxies
	// keep the connection (default DefaultHeartbeat).
	Heartbeat time.Duration
	// WriteTimeout bounds each write (and flush) to the client (default
	// DefaultWriteTimeout): a client that stops reading for longer loses
	// its stream, and resumes with Last-Event-ID.
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

// Query is what a request asks to follow: events after seq After that
// match the filter.
type Query struct {
	After  int64    // the seq after which the stream starts
	Head   bool     // no Last-Event-ID nor ?after=: start at the head
	Types  []string // any of these types (none: every type)
	Stream string   // this stream only ("" every stream)
	// Topic and Conversation keep only the events of the messages of that
	// topic and/or conversation (stream/topics.go).
	Topic, Conversation string
	// Correlation keeps only the events whose meta.correlation_id is this
	// ("": every event): a job tree's events carry its root job's id.
	Correlation string
}

// UsageError is a request the handler refuses: a bad query value.
type UsageError struct {
	Message string
	Hint    string
}

func (e *UsageError) Error() string { return e.Message }

// ParseQuery reads a request's start and filters: Last-Event-ID (header)
// or ?after=SEQ, ?type= (repeated or a comma list), ?stream=, ?job=ID (the
// job's own stream job/ID; its children are other streams and are not
// included), ?topic= and ?conversation= (the events of those messages),
// ?correlation=ID (the events whose meta.correlation_id is ID: a job
// tree's, by its root job's id).
func ParseQuery(r *http.Request) (Query, error) {
	var q Query
	var err error
	if q.After, q.Head, err = parseStart(r); err != nil {
		return q, err
	}
	v := r.URL.Query()
	for _, t := range v["type"] {
		for _, one := range strings.Split(t, ",") {
			one = strings.TrimSpace(one)
			if one == "" {
				return q, &UsageError{fmt.Sprintf("type %q names an empty type", t), "give event types such as type=job.enqueued,job.succeeded"}
			}
			q.Types = append(q.Types, one)
		}
	}
	if v.Has("stream") {
		if q.Stream = v.Get("stream"); q.Stream == "" {
			return q, &UsageError{"stream is empty", "give a stream such as stream=job/<id>, or leave it out"}
		}
	}
	if v.Has("job") {
		job := v.Get("job")
		if job == "" || strings.ContainsAny(job, "/ ,") {
			return q, &UsageError{fmt.Sprintf("job %q is not a job id", job), "give a full job id, as job show prints it"}
		}
		if q.Stream != "" && q.Stream != events.JobStream(job) {
			return q, &UsageError{"stream and job name different streams", "give one of them"}
		}
		q.Stream = events.JobStream(job)
	}
	for _, name := range []string{"topic", "conversation"} {
		if v.Has(name) && v.Get(name) == "" {
			return q, &UsageError{name + " is empty", "give a " + name + " (the events of its messages), or leave it out"}
		}
	}
	q.Topic, q.Conversation = v.Get("topic"), v.Get("conversation")
	if v.Has("correlation") {
		if q.Correlation = v.Get("correlation"); q.Correlation == "" {
			return q, &UsageError{"correlation is empty", "give a correlation id (a job tree's root job id: its events), or leave it out"}
		}
	}
	return q, nil
}

// parseStart reads where a stream starts: after the seq of Last-Event-ID
// (header) or of ?after=SEQ (the header wins); neither: head.
func parseStart(r *http.Request) (after int64, head bool, err error) {
	v := r.URL.Query()
	seq, from := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if seq == "" && v.Has("after") {
		seq, from = v.Get("after"), "after"
	}
	if seq == "" && !v.Has("after") {
		return 0, true, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(seq), 10, 64)
	if err != nil || n < 0 {
		return 0, false, &UsageError{fmt.Sprintf("%s %q is not a seq", from, seq), "give the seq of the last event received: a whole number ≥ 0"}
	}
	return n, false, nil
}

// filter is the ledger filter for q and whether an event it passes must
// still be checked against q's types (a read filters one type at most).
func (q Query) filter() (ledger.Filter, bool) {
	f := ledger.Filter{Stream: q.Stream}
	if len(q.Types) == 1 {
		f.Type = q.Types[0]
		return f, false
	}
	return f, len(q.Types) > 1
}

func (q Query) wants(typ string) bool {
	for _, t := range q.Types {
		if t == typ {
			return true
		}
	}
	return len(q.Types) == 0
}

// Handler serves Server-Sent Events of l's events: "id:" the seq, "event:"
// the type, "data:" the JSON of views.Event. It follows the ledger until
// the request's context ends, writing ": ping" when idle for a heartbeat.
func Handler(l *ledger.Ledger, opts Options) http.Handler {
	return &handler{l: l, sse: newSSE(opts)}
}

type handler struct {
	l   *ledger.Ledger
	sse *sse
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q, err := ParseQuery(r)
	if err != nil {
		writeUsage(w, err)
		return
	}
	f, byType := q.filter()
	messages := newMessageFilter(h.l, q)
	h.sse.serveFrom(w, r, h.l, q.After, q.Head, func(ctx context.Context, after int64, send func(Message) error) error {
		return views.FollowEvents(ctx, h.l, after, f, func(ev views.Event) error {
			if byType && !q.wants(ev.Type) {
				return nil
			}
			if q.Correlation != "" && correlationOf(ev.Meta) != q.Correlation {
				return nil
			}
			if messages != nil {
				if ok, err := messages.passes(ctx, ev); err != nil || !ok {
					return err
				}
			}
			return send(Message{ID: ev.Seq, Event: ev.Type, Data: ev})
		})
	})
}

// correlationOf is the correlation_id of an event's meta ("" when it has
// none, or the meta is not an object).
func correlationOf(meta json.RawMessage) string {
	var m struct {
		CorrelationID string `json:"correlation_id"`
	}
	if len(meta) == 0 || json.Unmarshal(meta, &m) != nil {
		return ""
	}
	return m.CorrelationID
}

// Message is one SSE message: its id (the seq of the ledger event it
// comes from, what a client resumes after with Last-Event-ID), its event
// name and its data (written as JSON).
type Message struct {
	ID    int64
	Event string
	Data  any
}

// Source follows the ledger after seq after and calls send with each
// message in seq order, until ctx ends (its error then) or it has nothing
// more to say (nil: the response ends). send blocks until the message is
// handed to the writer; it fails once the stream ends.
type Source func(ctx context.Context, after int64, send func(Message) error) error

// sse writes a Source as Server-Sent Events: the machinery every stream of
// this package shares (start, heartbeats, write deadlines, shutdown).
type sse struct {
	heartbeat    time.Duration
	writeTimeout time.Duration
	log          *slog.Logger
}

func newSSE(opts Options) *sse {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &sse{heartbeat: opts.Heartbeat, writeTimeout: opts.WriteTimeout, log: opts.Logger.With("component", "stream")}
}

// writeUsage answers a request refused by its query: 400 for a
// UsageError, 500 otherwise.
func writeUsage(w http.ResponseWriter, err error) {
	var usage *UsageError
	if errors.As(err, &usage) {
		writeError(w, http.StatusBadRequest, errcode.InvalidInput, usage.Message, usage.Hint)
		return
	}
	writeError(w, http.StatusInternalServerError, errcode.Error, err.Error(), "try again")
}

// serveFrom answers r with the stream of src after seq after (head: after
// the ledger's last seq, read now).
func (s *sse) serveFrom(w http.ResponseWriter, r *http.Request, l *ledger.Ledger, after int64, head bool, src Source) {
	if head {
		var err error
		if after, err = l.LastSeq(r.Context()); err != nil {
			s.log.Error("read the ledger's head", "err", err)
			writeError(w, http.StatusInternalServerError, errcode.Error, "read the ledger's head: "+err.Error(), "try again")
			return
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // nginx: do not buffer
	w.WriteHeader(http.StatusOK)
	err := s.serve(r.Context(), w, rc, after, src)
	switch {
	case err == nil || r.Context().Err() != nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.log.Info("event stream ended: its client stopped reading", "after", s.writeTimeout, "remote", r.RemoteAddr)
	default:
		s.log.Warn("event stream ended", "err", err)
	}
}

// serve writes the stream: one goroutine follows the ledger (src) and
// hands messages over; this one writes them and the heartbeats, until ctx
// ends, a write fails or src has no more. Each write and flush has
// writeTimeout: a client that stops reading ends its stream rather than
// holding it for ever (the stream outlives the server's own write timeout
// for requests). The follower holds no database connection while it waits
// for this one, and is stopped and waited for before serve returns.
func (s *sse) serve(ctx context.Context, w io.Writer, rc *http.ResponseController, after int64, src Source) error {
	ctx, cancel := context.WithCancel(ctx)
	msgs := make(chan Message)
	followed := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	defer wg.Wait()
	defer cancel() // runs first: the follower stops, then is waited for
	go func() {
		defer wg.Done()
		followed <- src(ctx, after, func(m Message) error {
			select {
			case msgs <- m:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()

	deadline := newWriteDeadline(ctx, rc, s.writeTimeout)
	defer deadline.stop()
	// Say where the stream starts, so a client knows it is live.
	if err := deadline.next(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, ": after %d\n\n", after); err != nil {
		return err
	}
	if err := rc.Flush(); err != nil {
		return err
	}
	beat := time.NewTimer(s.heartbeat)
	defer beat.Stop()
	var buf []byte
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err = <-followed:
			return err
		case m := <-msgs:
			buf, err = appendMessage(buf[:0], m)
			if err == nil {
				err = deadline.next()
			}
			if err == nil {
				_, err = w.Write(buf)
			}
		case <-beat.C:
			if err = deadline.next(); err == nil {
				_, err = io.WriteString(w, ": ping\n\n")
			}
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return err
		}
		beat.Reset(s.heartbeat)
	}
}

// writeDeadline gives each write of a stream its deadline, and ends a write
// under way when the stream's context ends (a shutdown, the client gone):
// a write blocked on a client that does not read heeds no context.
type writeDeadline struct {
	rc      *http.ResponseController
	timeout time.Duration
	stop    func() bool

	mu    sync.Mutex
	ended bool
}

func newWriteDeadline(ctx context.Context, rc *http.ResponseController, timeout time.Duration) *writeDeadline {
	d := &writeDeadline{rc: rc, timeout: timeout}
	d.stop = context.AfterFunc(ctx, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.ended = true
		_ = rc.SetWriteDeadline(time.Now())
	})
	return d
}

// next sets the deadline of the next write, or says the stream has ended.
func (d *writeDeadline) next() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ended {
		return context.Canceled
	}
	_ = d.rc.SetWriteDeadline(time.Now().Add(d.timeout))
	return nil
}

// appendMessage appends m as one SSE message.
func appendMessage(buf []byte, m Message) ([]byte, error) {
	data, err := json.Marshal(m.Data)
	if err != nil {
		return buf, fmt.Errorf("encode message %d: %w", m.ID, err)
	}
	buf = append(buf, "id: "...)
	buf = strconv.AppendInt(buf, m.ID, 10)
	buf = append(buf, "\nevent: "...)
	buf = append(buf, m.Event...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...), nil
}

// writeError writes the API's error body (api.Error's shape).
func writeError(w http.ResponseWriter, status int, code errcode.Code, message, hint string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Code    errcode.Code `json:"code"`
		Message string       `json:"message"`
		Hint    string       `json:"hint,omitempty"`
	}{code, message, hint})
}
