package projections

import (
	"io"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// CircuitBreakers is the current state of every circuit breaker, one row
// per plugin and command, from the newest event of its stream (each breaker
// event carries the whole state).
type CircuitBreakers struct{}

func (CircuitBreakers) Name() string { return "circuit_breakers" }

func (CircuitBreakers) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	plugin, command, d, ok, err := breakerEvent(ev)
	if !ok || err != nil {
		return err
	}
	return queries.UpsertBreaker(conn, queries.UpsertBreakerParams{
		Plugin: plugin, Command: command, State: string(d.State), Failures: int64(d.Failures), Threshold: int64(d.Threshold),
		OpenedAt: strPtr(d.OpenedAt), ProbeAt: strPtr(d.ProbeAt), ProbeJobID: strPtr(d.ProbeJobID),
		LastJobID: strPtr(d.JobID), LastError: strPtr(d.LastError), UpdatedAt: ev.RecordedAtText(), UpdatedSeq: ev.Seq,
	})
}

func (CircuitBreakers) Reset(conn *sqlite.Conn) error { return queries.DeleteBreakers(conn) }

func (CircuitBreakers) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpBreakers(conn, func(r queries.DumpBreakersRow) error { return dumpRow(w, r) })
}

// CircuitBreakerTransitions is the history of every circuit breaker: one
// row per change of state (opened, half_opened, closed, reset).
type CircuitBreakerTransitions struct{}

func (CircuitBreakerTransitions) Name() string { return "circuit_breaker_transitions" }

func (CircuitBreakerTransitions) Apply(conn *sqlite.Conn, ev ledger.Event) error {
	switch ev.Type {
	case events.BreakerOpened, events.BreakerHalfOpened, events.BreakerClosed, events.BreakerReset:
	default:
		return nil
	}
	plugin, command, d, ok, err := breakerEvent(ev)
	if !ok || err != nil {
		return err
	}
	job := d.JobID
	if ev.Type == events.BreakerHalfOpened {
		job = d.ProbeJobID
	}
	var actor string
	if m, err := ev.Metadata(); err == nil {
		actor = string(m.Actor)
	}
	return queries.InsertBreakerTransition(conn, queries.InsertBreakerTransitionParams{
		Seq: ev.Seq, Plugin: plugin, Command: command, FromState: strPtr(string(d.From)), ToState: string(d.State),
		Failures: int64(d.Failures), Reason: string(d.Reason), JobID: strPtr(job), Actor: strPtr(actor),
		LastError: strPtr(d.LastError), CreatedAt: ev.RecordedAtText(),
	})
}

func (CircuitBreakerTransitions) Reset(conn *sqlite.Conn) error {
	return queries.DeleteBreakerTransitions(conn)
}

func (CircuitBreakerTransitions) Dump(conn *sqlite.Conn, w io.Writer) error {
	return queries.DumpBreakerTransitions(conn, func(r queries.DumpBreakerTransitionsRow) error { return dumpRow(w, r) })
}

// breakerEvent decodes a breaker event; ok is false for any other event.
func breakerEvent(ev ledger.Event) (plugin, command string, d events.BreakerChanged, ok bool, err error) {
	switch ev.Type {
	case events.BreakerFailureRecorded, events.BreakerFailuresCleared, events.BreakerOpened,
		events.BreakerHalfOpened, events.BreakerClosed, events.BreakerReset:
	default:
		return "", "", d, false, nil
	}
	plugin, command, ok = events.BreakerFromStream(ev.Stream)
	if !ok {
		return "", "", d, false, nil // a breaker type on a foreign stream: not a breaker
	}
	err = decodeData(ev.Data, &d)
	return plugin, command, d, err == nil, err
}
