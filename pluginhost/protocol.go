package pluginhost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ductile/ductile/events"
)

// Request is the protocol v2 request envelope written to the plugin's stdin.
//
// Config, State, Context and Event are raw JSON so the bytes the core holds
// reach the plugin unchanged (only insignificant whitespace is removed: the
// request is always one compact line). Config, State and Context must be JSON
// objects; empty means {}. Event is omitted from the envelope when empty: the
// dispatcher sets it only for event-triggered commands (handle).
type Request struct {
	Protocol   int             `json:"protocol"` // 0 means ProtocolVersion
	JobID      string          `json:"job_id"`
	Command    string          `json:"command"`
	Config     json.RawMessage `json:"config"`
	State      json.RawMessage `json:"state"`
	Context    json.RawMessage `json:"context"`
	Event      json.RawMessage `json:"event,omitempty"`
	DeadlineAt time.Time       `json:"deadline_at"` // written as RFC 3339 (nanoseconds) in UTC; omitted when zero
}

// MarshalJSON writes the envelope as one compact line with the keys in
// protocol order: protocol, job_id, command, config, state, context, event,
// deadline_at.
func (r Request) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	proto := r.Protocol
	if proto == 0 {
		proto = ProtocolVersion
	}
	b.WriteString(`{"protocol":`)
	b.WriteString(strconv.Itoa(proto))
	for _, f := range []struct{ key, val string }{{"job_id", r.JobID}, {"command", r.Command}} {
		s, err := json.Marshal(f.val)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, `,"%s":%s`, f.key, s)
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
	}{{"config", r.Config}, {"state", r.State}, {"context", r.Context}, {"event", r.Event}} {
		raw := bytes.TrimSpace(f.raw)
		if len(raw) == 0 || string(raw) == "null" {
			if f.key == "event" {
				continue
			}
			raw = []byte("{}")
		}
		if raw[0] != '{' {
			return nil, fmt.Errorf("request %s must be a JSON object", f.key)
		}
		fmt.Fprintf(&b, `,"%s":`, f.key)
		if err := json.Compact(&b, raw); err != nil {
			return nil, fmt.Errorf("request %s: %w", f.key, err)
		}
	}
	if !r.DeadlineAt.IsZero() {
		fmt.Fprintf(&b, `,"deadline_at":"%s"`, r.DeadlineAt.UTC().Format(time.RFC3339Nano))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Response statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Response is the protocol v2 response envelope a plugin writes to stdout.
type Response struct {
	Status string `json:"status"`
	// Result is the short human summary. A non-string result from a lenient
	// plugin is kept as its JSON text.
	Result string `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
	// Retry is the plugin's hint; nil means true. false makes the failure
	// non-retryable.
	Retry        *bool           `json:"retry,omitempty"`
	Events       []Event         `json:"events,omitempty"`
	StateUpdates json.RawMessage `json:"state_updates,omitempty"` // a JSON object, or nil
	Logs         []Log           `json:"logs,omitempty"`
}

// Event is one event a plugin emits; the router matches Type exactly.
type Event struct {
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	DedupeKey string          `json:"dedupe_key,omitempty"`
}

// Log is one log line a plugin returns; Level is info, warn or error.
type Log struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// UnmarshalJSON decodes a response, tolerating a non-string result.
func (r *Response) UnmarshalJSON(data []byte) error { return decodeResponse(data, r) }

// decodeResponse is Response.UnmarshalJSON, called directly by
// ParseResponse: through json.Unmarshal, the response would be checked
// and decoded twice.
func decodeResponse(data []byte, r *Response) error {
	var aux responseJSON
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*r = Response(aux.plainResponse)
	r.Result = ""
	if res := bytes.TrimSpace(aux.Result); len(res) > 0 && string(res) != "null" {
		if res[0] == '"' {
			if err := json.Unmarshal(res, &r.Result); err != nil {
				return fmt.Errorf("result: %w", err)
			}
		} else {
			r.Result = string(res)
		}
	}
	return nil
}

// responseJSON is a Response as decodeResponse reads it: its result as raw
// JSON. (Types declared at package level: a decoding reaches the pointer
// type of each at once, where an anonymous one is looked up in a map.)
type responseJSON struct {
	plainResponse
	Result json.RawMessage `json:"result"`
}

// plainResponse is a Response without its UnmarshalJSON.
type plainResponse Response

// MaxResponseDepth is how deeply a response may nest objects and arrays.
// The ledger keeps a response inside an event's data, one level deeper
// (its events' payloads and its state_updates go no deeper than the
// response itself), and SQLite's json_valid, which every stored event must
// pass, refuses JSON nested more than 1000 levels (JSON_MAX_DEPTH in its
// json.c): the limit leaves room for any further wrapping.
const MaxResponseDepth = 512

// ParseResponse parses stdout as exactly one response object and checks the
// envelope: status ok or error, every event typed, state_updates an object.
// A missing result on status ok is accepted (Result is ""). stdout must be
// UTF-8 and nest at most MaxResponseDepth levels: what the ledger cannot
// store exactly (SQLite stores invalid UTF-8, but no strict JSON reader
// accepts it back) is a protocol error here, not a refused completion.
func ParseResponse(stdout []byte) (*Response, error) {
	data := bytes.TrimSpace(stdout)
	if len(data) == 0 {
		return nil, errors.New("empty stdout")
	}
	if data[0] != '{' {
		return nil, fmt.Errorf("stdout is not a JSON object (starts with %q)", firstRunes(data, 20))
	}
	if at := invalidUTF8(data); at >= 0 {
		return nil, fmt.Errorf("stdout is not valid UTF-8 (byte %d of the response is 0x%02x): JSON text must be UTF-8; encode binary data, e.g. as base64", at, data[at])
	}
	if events.JSONDepth(data) > MaxResponseDepth {
		return nil, fmt.Errorf("the response nests objects and arrays more than %d levels deep: flatten it", MaxResponseDepth)
	}
	r, simple := parseSimpleResponse(data)
	if !simple {
		if err := decodeResponse(data, &r); err != nil {
			return nil, fmt.Errorf("stdout is not a single JSON object: %w", err)
		}
	}
	switch r.Status {
	case StatusOK, StatusError:
	case "":
		return &r, errors.New(`response has no "status"`)
	default:
		return &r, fmt.Errorf("response status %q is neither %q nor %q", r.Status, StatusOK, StatusError)
	}
	for i, e := range r.Events {
		if e.Type == "" {
			return &r, fmt.Errorf("events[%d] has no type", i)
		}
	}
	if su := bytes.TrimSpace(r.StateUpdates); len(su) > 0 {
		if string(su) == "null" {
			r.StateUpdates = nil
		} else if su[0] != '{' {
			return &r, errors.New("state_updates must be a JSON object")
		}
	}
	return &r, nil
}

func firstRunes(b []byte, n int) string {
	r := []rune(string(b[:min(len(b), 4*n)]))
	return string(r[:min(len(r), n)])
}

// invalidUTF8 is the offset of the first byte of b that is not part of a
// valid UTF-8 sequence, or -1.
func invalidUTF8(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// parseSimpleResponse reads the response most plugins write, a status and
// perhaps a result, in compact JSON with plain ASCII text
// ({"status":"ok","result":"done"}), without reflection; anything else is
// not simple (false) and left to decodeResponse, which reads a simple one
// the same way.
func parseSimpleResponse(data []byte) (r Response, simple bool) {
	rest, ok := bytes.CutPrefix(data, []byte{'{'})
	seen := 0
	for ok && seen < 2 {
		var key, value []byte
		if key, rest, ok = plainString(rest); !ok {
			break
		}
		if rest, ok = bytes.CutPrefix(rest, []byte{':'}); !ok {
			break
		}
		if value, rest, ok = plainString(rest); !ok {
			break
		}
		switch string(key) {
		case "status":
			if r.Status != "" || len(value) == 0 {
				return Response{}, false
			}
			r.Status = string(value)
		case "result":
			if seen > 0 && r.Status == "" {
				return Response{}, false // a second result
			}
			r.Result = string(value)
		default:
			return Response{}, false
		}
		seen++
		if string(rest) == "}" && r.Status != "" {
			return r, true
		}
		rest, ok = bytes.CutPrefix(rest, []byte{','})
	}
	return Response{}, false
}

// plainString cuts a JSON string of printable ASCII without escapes off the
// start of b: its text and what follows it.
func plainString(b []byte) (text, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return b[1:i], b[i+1:], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, nil, false
		}
	}
	return nil, nil, false
}
