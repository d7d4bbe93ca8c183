package commands

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// Refused is the completion to record instead of cmd once the ledger has
// refused cmd for what it holds (err, for which ContentRefused is true): the
// attempt fails, not retryably, with the ledger's reason, and none of the
// plugin's output (response, stdout, stderr, state, facts, routed jobs) is
// kept, since any of it may be what was refused. The job ends, dead (or
// canceled, if a cancel was pending), instead of staying running while the
// same outcome is refused again and again.
func (cmd Complete) Refused(err error) Complete {
	out := cmd.Outcome
	what := string(out.Kind)
	if out.Error != "" {
		what += ": " + cutError(out.Error, 512)
	}
	return Complete{
		JobID: cmd.JobID, Attempt: cmd.Attempt, MaxStateBytes: cmd.MaxStateBytes, Breaker: cmd.Breaker, Jitter: cmd.Jitter, Now: cmd.Now,
		Pipelines: cmd.Pipelines, Fence: cmd.Fence,
		Outcome: Outcome{
			Kind: events.OutcomeRefused, ExitCode: out.ExitCode, Duration: out.Duration, Worker: out.Worker,
			Error: fmt.Sprintf("the ledger refused to record the attempt's outcome (%s): %v; it is recorded without the plugin's output", what, err),
		},
	}
}

// cutError keeps at most n bytes of s (whole runes), "…" marking a cut.
func cutError(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ContentRefused reports whether err, from recording a completion, is the
// ledger refusing what the completion holds (a constraint such as the
// events table's json_valid CHECK, data it cannot encode, a routed job it
// cannot enqueue), which the same completion would meet again, rather than
// the ledger being unable to write for now (busy, locked, disk full, an I/O
// error, closed, no longer durable) or the job having moved on.
func ContentRefused(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, ErrInvalidTransition),
		errors.Is(err, ledger.ErrClosed),
		errors.Is(err, ledger.ErrNotDurable),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		return false
	}
	switch sqlite.ErrCode(err).ToPrimary() {
	case sqlite.ResultBusy, sqlite.ResultLocked, sqlite.ResultFull, sqlite.ResultIOErr, sqlite.ResultNoMem,
		sqlite.ResultCantOpen, sqlite.ResultProtocol, sqlite.ResultReadOnly, sqlite.ResultInterrupt,
		sqlite.ResultCorrupt, sqlite.ResultNotADB, sqlite.ResultNoLFS, sqlite.ResultPerm, sqlite.ResultAuth,
		sqlite.ResultSchema, sqlite.ResultAbort:
		return false
	}
	return true
}
