package views

import (
	"context"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/queries"
)

// DefaultBreakerHistory is how many transitions a breaker view carries.
const DefaultBreakerHistory = 20

// Breaker is a plugin command's circuit breaker as the circuit_breakers
// projection holds it, with its newest transitions. A plugin command
// with no row has never had a scheduled job fail: it is closed.
type Breaker struct {
	Plugin   string `json:"plugin"`
	Command  string `json:"command"`
	State    string `json:"state"` // closed | open | half_open
	Failures int64  `json:"failures"`
	// Threshold is the setting in force at its last change.
	Threshold int64 `json:"threshold"`
	// OpenedAt is when it last opened (open and half_open).
	OpenedAt *string `json:"opened_at"`
	// ProbeAt is when an open breaker lets its probe through.
	ProbeAt *string `json:"probe_at"`
	// ProbeJobID is a half-open breaker's probe.
	ProbeJobID *string `json:"probe_job_id"`
	LastJobID  *string `json:"last_job_id"`
	LastError  *string `json:"last_error"`
	// UpdatedAt is when its state or count last changed.
	UpdatedAt  string `json:"updated_at"`
	UpdatedSeq int64  `json:"updated_seq"`
	// History is its newest transitions first.
	History []BreakerTransition `json:"history"`
}

// BreakerTransition is one change of a breaker's state.
type BreakerTransition struct {
	Seq       int64   `json:"seq"`
	From      *string `json:"from"`
	To        string  `json:"to"`
	Failures  int64   `json:"failures"`
	Reason    string  `json:"reason"`
	JobID     *string `json:"job_id"`
	Actor     *string `json:"actor"`
	LastError *string `json:"last_error"`
	At        string  `json:"at"`
}

// Summary says in one line where the breaker is and what comes next, for
// a person: "open until …", "half-open: probe job …".
func (b Breaker) Summary() string {
	switch b.State {
	case "open":
		return fmt.Sprintf("breaker open until %s (%d consecutive failures)", deref(b.ProbeAt), b.Failures)
	case "half_open":
		return fmt.Sprintf("breaker half-open: probe job %s decides", deref(b.ProbeJobID))
	}
	if b.Failures > 0 {
		return fmt.Sprintf("breaker closed, %d of %d failures", b.Failures, b.Threshold)
	}
	return "breaker closed"
}

// refuses reports whether the breaker refuses a scheduled firing at now:
// open before its probe time, or half-open with its probe under way.
func (b Breaker) refuses(now time.Time) bool {
	switch b.State {
	case "open":
		at, err := time.Parse(time.RFC3339Nano, deref(b.ProbeAt))
		return err != nil || now.Before(at)
	case "half_open":
		return true
	}
	return false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// breakerOf is a circuit_breakers row without its history.
func breakerOf(r queries.ListBreakersRow) Breaker {
	return Breaker{Plugin: r.Plugin, Command: r.Command, State: r.State, Failures: r.Failures, Threshold: r.Threshold,
		OpenedAt: r.OpenedAt, ProbeAt: r.ProbeAt, ProbeJobID: r.ProbeJobID, LastJobID: r.LastJobID, LastError: r.LastError,
		UpdatedAt: r.UpdatedAt, UpdatedSeq: r.UpdatedSeq, History: []BreakerTransition{}}
}

// ReadBreakers reads the breakers of plugin (every plugin's when plugin is
// ""), in plugin and command order, each with its newest history
// transitions (none when history ≤ 0), in one read transaction.
func ReadBreakers(ctx context.Context, l *ledger.Ledger, plugin string, history int) (out []Breaker, err error) {
	out = []Breaker{}
	err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error {
		add := func(r queries.ListBreakersRow) error {
			out = append(out, breakerOf(r))
			return nil
		}
		var err error
		if plugin == "" {
			err = queries.ListBreakers(conn, add)
		} else {
			err = queries.ListPluginBreakers(conn, plugin, func(r queries.ListPluginBreakersRow) error { return add(queries.ListBreakersRow(r)) })
		}
		if err != nil || history <= 0 {
			return err
		}
		for i := range out {
			if err := readBreakerHistory(conn, &out[i], history); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read breakers: %w", err)
	}
	return out, nil
}

// ReadBreaker reads one breaker with its newest history transitions; a
// plugin command with no row is closed with nothing counted (ok false).
func ReadBreaker(ctx context.Context, l *ledger.Ledger, plugin, command string, history int) (b Breaker, ok bool, err error) {
	all, err := ReadBreakers(ctx, l, plugin, 0)
	if err != nil {
		return b, false, err
	}
	for _, x := range all {
		if x.Command == command {
			b, ok = x, true
		}
	}
	if !ok {
		return Breaker{Plugin: plugin, Command: command, State: "closed", History: []BreakerTransition{}}, false, nil
	}
	if history > 0 {
		err = l.ReadSnapshot(ctx, func(conn *sqlite.Conn) error { return readBreakerHistory(conn, &b, history) })
	}
	return b, true, err
}

func readBreakerHistory(conn *sqlite.Conn, b *Breaker, n int) error {
	return queries.BreakerTransitions(conn, queries.BreakerTransitionsParams{Plugin: b.Plugin, Command: b.Command, MaxRows: int64(n)},
		func(r queries.BreakerTransitionsRow) error {
			b.History = append(b.History, BreakerTransition{Seq: r.Seq, From: r.FromState, To: r.ToState, Failures: r.Failures,
				Reason: r.Reason, JobID: r.JobID, Actor: r.Actor, LastError: r.LastError, At: r.CreatedAt})
			return nil
		})
}
