package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/ledger"
)

// Exit codes. Every error maps to one of these in exitCode, and only there.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and found a problem, or failed
	exitUsage   = 2 // bad flags or arguments
)

// exitStatus is the process exit status of an error of code: invalid
// input (bad flags or arguments) exits 2, every other code 1. The code is
// what --json prints as error.code (package errcode: the same list the API
// answers with).
func exitStatus(code errcode.Code) int {
	if code == errcode.InvalidInput {
		return exitUsage
	}
	return exitFailure
}

// exitError is an error with its code, what went wrong, and what to do
// next. Build one with the constructors below so that every error has a
// code; a plain error gets one from classify.
type exitError struct {
	code errcode.Code
	msg  string // "" when the command has reported already (silent)
	hint string // what to do next, when msg does not say it
	// status, when not 0, is the exit status instead of exitStatus(code)
	// (topic request's 124 at its timeout).
	status int
}

func (e *exitError) Error() string { return e.msg }

// errorf makes an error of code with a message saying what to do next.
func errorf(code errcode.Code, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// failf makes an error that exits 1 (code "error").
func failf(format string, args ...any) error { return errorf(errcode.Error, format, args...) }

// usagef makes an error that exits 2 (code "invalid_input").
func usagef(format string, args ...any) error { return errorf(errcode.InvalidInput, format, args...) }

// notFoundf makes an error for a job, plugin or file that does not exist.
func notFoundf(format string, args ...any) error { return errorf(errcode.NotFound, format, args...) }

// conflictf makes an error for a request the current state refuses.
func conflictf(format string, args ...any) error { return errorf(errcode.Conflict, format, args...) }

// hintf makes an error of code whose message says what is wrong and whose
// hint says what to do next (a separate field of a --json error).
func hintf(code errcode.Code, hint, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...), hint: hint}
}

// withHint makes an error of code whose message is err's, with hint.
func withHint(code errcode.Code, err error, hint string) error {
	return &exitError{code: code, msg: err.Error(), hint: hint}
}

// silent exits with status without printing anything more (the command
// has already reported, e.g. verify's findings).
func silent(status int) error {
	if status == exitUsage {
		return &exitError{code: errcode.InvalidInput}
	}
	return &exitError{code: errcode.Error}
}

// classify gives a plain error (one not built by the constructors above)
// its code, from the sentinels it wraps.
func classify(err error) errcode.Code {
	var ve *config.ValidationError
	switch {
	case requiredFlagsMissing(err):
		return errcode.InvalidInput // a usage error: exit 2
	case errors.Is(err, context.Canceled):
		return errcode.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return errcode.Timeout
	case errors.As(err, &ve):
		return errcode.InvalidConfig
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, commands.ErrJobNotFound):
		return errcode.NotFound
	case errors.Is(err, fs.ErrExist), errors.Is(err, daemon.ErrLocked),
		errors.Is(err, ledger.ErrVersionConflict), errors.Is(err, commands.ErrInvalidTransition):
		return errcode.Conflict
	}
	return errcode.Error
}

// requiredFlagsMissing reports whether err is urfave/cli's refusal of a
// command run without a flag it marks Required (its type is unexported:
// its message, `Required flag "x" not set` or `Required flags "x, y" not
// set`, is what there is to go by).
func requiredFlagsMissing(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, `Required flag "`) || strings.HasPrefix(msg, `Required flags "`)
}

// exitCode reports err on stderr, as one line of JSON when the command was
// given --json ({"error":{"code":…,"message":…,"hint":…}}), and returns
// the exit status. An interrupt is reported only in JSON.
func exitCode(err error, stderr io.Writer, asJSON bool) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: classify(err), msg: err.Error()}
		if ee.code == errcode.Canceled {
			ee.msg = "interrupted"
			if !asJSON {
				ee.msg = ""
			}
		}
	}
	switch {
	case ee.msg == "":
	case asJSON:
		type body struct {
			Code    errcode.Code `json:"code"`
			Message string       `json:"message"`
			Hint    string       `json:"hint,omitempty"`
		}
		b, _ := json.Marshal(struct {
			Error body `json:"error"`
		}{body{ee.code, ee.msg, ee.hint}})
		fmt.Fprintf(stderr, "%s\n", b)
	case ee.hint == "":
		fmt.Fprintf(stderr, "ductile: %s\n", ee.msg)
	case !strings.Contains(ee.msg, "\n"):
		fmt.Fprintf(stderr, "ductile: %s (%s)\n", ee.msg, ee.hint)
	default:
		// A message of several lines (a config's problems): the hint on
		// a line of its own after them.
		fmt.Fprintf(stderr, "ductile: %s\n(%s)\n", ee.msg, ee.hint)
	}
	if ee.status != 0 {
		return ee.status
	}
	return exitStatus(ee.code)
}
