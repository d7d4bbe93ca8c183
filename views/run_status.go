package views

import (
	"errors"
	"fmt"

	"github.com/ductile/ductile/events"
)

// RunStatus is a run's status (spec run-protocol.md §4): derived from its
// job's, never stored apart from it.
type RunStatus string

// The run statuses.
const (
	// RunQueued: the job is queued, waiting for its first attempt or a retry.
	RunQueued RunStatus = "queued"
	// RunRunning: an attempt runs.
	RunRunning RunStatus = "running"
	// RunCancelRequested: a cancel was asked of the running attempt, which
	// has not stopped yet.
	RunCancelRequested RunStatus = "cancel_requested"
	// RunSucceeded: the job succeeded.
	RunSucceeded RunStatus = "succeeded"
	// RunFailed: the job is dead and its last attempt did not time out.
	RunFailed RunStatus = "failed"
	// RunTimeout: the job is dead and its last attempt timed out.
	RunTimeout RunStatus = "timeout"
	// RunCanceled: the job was canceled.
	RunCanceled RunStatus = "canceled"
)

// RunStatuses returns every run status.
func RunStatuses() []RunStatus {
	return []RunStatus{RunQueued, RunRunning, RunCancelRequested, RunSucceeded, RunFailed, RunTimeout, RunCanceled}
}

// Terminal reports whether a run in this status can no longer change.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunSucceeded, RunFailed, RunTimeout, RunCanceled:
		return true
	}
	return false
}

// ErrUnknownRunStatus means a status a caller gave is not a run status.
var ErrUnknownRunStatus = errors.New("unknown run status")

// ParseRunStatus checks a status a caller gave (a filter): one that is not
// a run status is an error wrapping ErrUnknownRunStatus.
func ParseRunStatus(s string) (RunStatus, error) {
	for _, st := range RunStatuses() {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("%w: %q (one of %v)", ErrUnknownRunStatus, s, RunStatuses())
}

// RunStatusOf is the run status of a job in status, whose last attempt
// timed out or not.
func RunStatusOf(status events.Status, timedOut bool) RunStatus {
	switch status {
	case events.StatusQueued:
		return RunQueued
	case events.StatusRunning:
		return RunRunning
	case events.StatusCancelRequested:
		return RunCancelRequested
	case events.StatusSucceeded:
		return RunSucceeded
	case events.StatusCanceled:
		return RunCanceled
	case events.StatusDead:
		if timedOut {
			return RunTimeout
		}
		return RunFailed
	}
	return RunStatus(status)
}

// RunErrorCode is the kind of a run's error (spec §9).
type RunErrorCode string

// The run error codes.
const (
	// RunErrorTimeout: the attempt ran past its timeout.
	RunErrorTimeout RunErrorCode = "TIMEOUT"
	// RunErrorCanceled: the run was canceled.
	RunErrorCanceled RunErrorCode = "CANCELED"
	// RunErrorPlugin: the plugin reported an error or exited with one.
	RunErrorPlugin RunErrorCode = "PLUGIN_ERROR"
	// RunErrorProtocol: the plugin's response broke the protocol (not
	// JSON, too large, bad state updates).
	RunErrorProtocol RunErrorCode = "PROTOCOL_ERROR"
	// RunErrorValidation: the run was refused before its plugin ran (its
	// input or the state did not allow it).
	RunErrorValidation RunErrorCode = "VALIDATION_ERROR"
	// RunErrorLost: the process running the attempt died; recovery ended
	// or requeued it.
	RunErrorLost RunErrorCode = "LOST"
)

// errorCodeOf is the code of an attempt that ended with outcome kind.
func errorCodeOf(kind events.Outcome) RunErrorCode {
	switch kind {
	case events.OutcomeTimeout:
		return RunErrorTimeout
	case events.OutcomeCanceled:
		return RunErrorCanceled
	case events.OutcomeProtocolError, events.OutcomeStateTooLarge, events.OutcomeBadState:
		return RunErrorProtocol
	case events.OutcomeRefused:
		return RunErrorValidation
	case events.OutcomeInterrupted:
		return RunErrorLost
	}
	return RunErrorPlugin
}
