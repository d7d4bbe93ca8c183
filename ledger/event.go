package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/zeebo/blake3"

	"github.com/ductile/ductile/events"
)

// AnyVersion as a NewEvent's ExpectedVersion appends at the stream's next
// version without checking it.
const AnyVersion int64 = -1

// TimeFormat is how recorded_at is stored: fixed-width UTC with nanoseconds,
// so the text sorts like the time. Ordering is still always by seq.
const TimeFormat = "2006-01-02T15:04:05.000000000Z"

// HashSize is the length of an event hash (BLAKE3-256).
const HashSize = 32

var (
	// ErrVersionConflict means a stream was not at the version the caller
	// expected: someone else appended first. Reload the stream and decide again.
	ErrVersionConflict = errors.New("stream version conflict")
	// ErrClosed is returned by calls on a closed Ledger.
	ErrClosed = errors.New("ledger is closed")
	// ErrInvalidEvent is wrapped by errors about a malformed NewEvent.
	ErrInvalidEvent = errors.New("invalid event")
)

// VersionConflictError says which stream conflicted and how.
type VersionConflictError struct {
	Stream   string
	Expected int64
	Actual   int64
}

func (e *VersionConflictError) Error() string {
	return fmt.Sprintf("stream %s: expected version %d, found %d: %v", e.Stream, e.Expected, e.Actual, ErrVersionConflict)
}

// Is makes errors.Is(err, ErrVersionConflict) true.
func (e *VersionConflictError) Is(target error) bool { return target == ErrVersionConflict }

// Meta is the context every event carries: which root job or conversation it
// belongs to (correlation), what caused it (causation), and who acted.
type Meta struct {
	CorrelationID string       `json:"correlation_id,omitempty"`
	CausationID   string       `json:"causation_id,omitempty"`
	Actor         events.Actor `json:"actor,omitempty"`
}

// NewEvent is an event to append.
type NewEvent struct {
	Stream string
	// ExpectedVersion is the version the stream must be at just before this
	// event (0: the stream must not exist yet), or AnyVersion. Several events
	// for one stream in one append each expect the version the previous one made.
	ExpectedVersion int64
	Type            string
	Data            any // marshalled to JSON; json.RawMessage and []byte are taken as JSON text; EncodedData as is
	Meta            Meta
}

// Event is an event as stored.
type Event struct {
	Seq        int64           `json:"seq"`
	Stream     string          `json:"stream"`
	Version    int64           `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	Meta       json.RawMessage `json:"meta"`
	RecordedAt time.Time       `json:"recorded_at"`
	PrevHash   []byte          `json:"prev_hash"`
	Hash       []byte          `json:"hash"`

	recordedAt string // as stored, for hashing
	// meta is Meta decoded, for an event this process appended (insertEvent
	// had it at hand): Metadata then decodes nothing. Nil otherwise.
	meta *Meta
}

// RecordedAtText is recorded_at as stored (TimeFormat), as projections keep it.
func (e Event) RecordedAtText() string {
	if e.recordedAt != "" {
		return e.recordedAt
	}
	return e.RecordedAt.UTC().Format(TimeFormat)
}

// Metadata decodes the event's meta.
func (e Event) Metadata() (Meta, error) {
	if e.meta != nil {
		return *e.meta, nil
	}
	var m Meta
	if err := json.Unmarshal(e.Meta, &m); err != nil {
		return Meta{}, fmt.Errorf("event %d: decode meta: %w", e.Seq, err)
	}
	return m, nil
}

// decodedMeta is m as Metadata would decode it from its JSON encoding, or
// nil if that might differ from m: encoding/json replaces invalid UTF-8.
func decodedMeta(m Meta) *Meta {
	if !utf8.ValidString(m.CorrelationID) || !utf8.ValidString(m.CausationID) || !utf8.ValidString(string(m.Actor)) {
		return nil
	}
	return &m
}

// genesis is the prev_hash of the first event.
var genesis = make([]byte, HashSize)

// chainHash is BLAKE3(prev_hash ‖ canonical(event)). The canonical encoding
// is a version tag, then seq and version as 8-byte big-endian integers, then
// stream, type, data, meta and recorded_at, each as a uvarint length and its
// bytes. Covering seq and prev_hash makes any edit, insertion, deletion or
// reordering visible to Verify.
func chainHash(prev []byte, seq int64, stream string, version int64, typ, data, meta, recordedAt string) []byte {
	h := blake3.New()
	var buf [binary.MaxVarintLen64]byte
	str := func(s string) {
		n := binary.PutUvarint(buf[:], uint64(len(s)))
		h.Write(buf[:n])
		h.WriteString(s)
	}
	h.Write(prev)
	str("ductile.event.v1")
	binary.BigEndian.PutUint64(buf[:8], uint64(seq))
	h.Write(buf[:8])
	binary.BigEndian.PutUint64(buf[:8], uint64(version))
	h.Write(buf[:8])
	str(stream)
	str(typ)
	str(data)
	str(meta)
	str(recordedAt)
	return h.Sum(nil)
}

// EncodedData is a NewEvent's Data encoded ahead of its append, by
// EncodeData: the writer stores its text as is. Encoding a large value
// (a megabyte of payload) is then work for the caller's goroutine, not the
// writer's, which every other append waits for. Only EncodeData makes one
// that holds something (so it is always valid, compact JSON); the zero
// value encodes nothing and is stored as {}, as nil Data is.
type EncodedData struct{ text string }

// EncodeData encodes v as the writer would encode it as a NewEvent's Data.
func EncodeData(v any) (EncodedData, error) {
	text, err := encodeData(v)
	return EncodedData{text}, err
}

// encodeData turns a NewEvent's Data into compact JSON text.
func encodeData(v any) (string, error) {
	var raw []byte
	switch d := v.(type) {
	case nil:
		return "{}", nil
	case EncodedData:
		if d.text == "" {
			return "{}", nil // the zero value: encoded nothing
		}
		return d.text, nil
	case json.RawMessage:
		raw = d
	case []byte:
		raw = d
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("%w: data: %v", ErrInvalidEvent, err)
		}
		return string(b), nil
	}
	if len(raw) == 0 {
		return "{}", nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return "", fmt.Errorf("%w: data is not valid JSON: %v", ErrInvalidEvent, err)
	}
	return out.String(), nil
}
