package views

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ductile/ductile/ledger"
)

// Event is an event of the ledger, with its data and meta as JSON and its
// hash in hex.
type Event struct {
	Seq        int64           `json:"seq"`
	Stream     string          `json:"stream"`
	Version    int64           `json:"version"`
	Type       string          `json:"type"`
	Data       json.RawMessage `json:"data"`
	Meta       json.RawMessage `json:"meta"`
	RecordedAt string          `json:"recorded_at"` // ledger.TimeFormat, UTC
	Hash       string          `json:"hash"`
}

// EventOf is the Event shape of ev.
func EventOf(ev ledger.Event) Event {
	return Event{Seq: ev.Seq, Stream: ev.Stream, Version: ev.Version, Type: ev.Type, Data: ev.Data, Meta: ev.Meta,
		RecordedAt: ev.RecordedAt.UTC().Format(ledger.TimeFormat), Hash: fmt.Sprintf("%x", ev.Hash)}
}

// TailStart is the seq after which the last n events that match f begin
// (the head if n ≤ 0): where a tail of the last n starts.
func TailStart(ctx context.Context, l *ledger.Ledger, f ledger.Filter, n int) (int64, error) {
	head, err := l.LastSeq(ctx)
	if err != nil || n <= 0 {
		return head, err
	}
	if f == (ledger.Filter{}) {
		return max(head-int64(n), 0), nil
	}
	// Filtered: keep a ring of the last n matching seqs.
	ring := make([]int64, 0, n)
	err = readAll(ctx, l, 0, 4096, f, func(ev ledger.Event) error {
		if len(ring) == n {
			ring = ring[1:]
		}
		ring = append(ring, ev.Seq)
		return nil
	})
	if err != nil || len(ring) == 0 {
		return head, err
	}
	return ring[0] - 1, nil
}

// ReadEvents calls fn for every event after seq after that matches f,
// oldest first, up to the head.
func ReadEvents(ctx context.Context, l *ledger.Ledger, after int64, f ledger.Filter, fn func(Event) error) error {
	return readAll(ctx, l, after, 1000, f, func(ev ledger.Event) error { return fn(EventOf(ev)) })
}

// FollowEvents is ReadEvents that goes on with the events appended later,
// by this process or another, until ctx ends (its error) or fn returns
// ledger.ErrStopFollowing (nil) or another error.
func FollowEvents(ctx context.Context, l *ledger.Ledger, after int64, f ledger.Filter, fn func(Event) error) error {
	_, err := l.Follow(ctx, after, f, func(ev ledger.Event) error { return fn(EventOf(ev)) })
	return err
}

// readAll calls fn for every event after seq after that matches f, reading
// pages of page events, until a read finds no more.
func readAll(ctx context.Context, l *ledger.Ledger, after int64, page int, f ledger.Filter, fn func(ledger.Event) error) error {
	for {
		last, err := l.ReadFrom(ctx, after, page, f, fn)
		if err != nil || last == after {
			return err
		}
		after = last
	}
}
