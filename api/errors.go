package api

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/views"
)

// Error is every error response's body: a stable code (package errcode,
// the same the CLI and the webhook listener use), what went wrong and
// what to do next.
type Error struct {
	Status  int                 `json:"-"`
	Code    errcode.Code        `json:"code" enum:"invalid_input,unauthorized,forbidden,not_found,conflict,idempotency_conflict,stale_fence,unknown_worker,worker_name_taken,plugin_not_permitted,archived,too_large,unavailable,too_many_sync,too_many_streams,error" doc:"Stable error code"`
	Message string              `json:"message" doc:"What went wrong"`
	Hint    string              `json:"hint,omitempty" doc:"What to do next"`
	Scope   string              `json:"scope,omitempty" doc:"The scope the route needs, which the token lacks (403 forbidden)"`
	Errors  []*huma.ErrorDetail `json:"errors,omitempty" doc:"Details of invalid input"`
}

func (e *Error) Error() string { return e.Message }

// GetStatus is the HTTP status (huma.StatusError).
func (e *Error) GetStatus() int { return e.Status }

// codeOf is the code of an HTTP status.
func codeOf(status int) errcode.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed:
		return errcode.InvalidInput
	case http.StatusUnauthorized:
		return errcode.Unauthorized
	case http.StatusForbidden:
		return errcode.Forbidden
	case http.StatusNotFound:
		return errcode.NotFound
	case http.StatusConflict:
		return errcode.Conflict
	case http.StatusGone:
		return errcode.Archived
	case http.StatusRequestEntityTooLarge:
		return errcode.TooLarge
	case http.StatusServiceUnavailable:
		return errcode.Unavailable
	}
	return errcode.Error
}

func newError(status int, hint, message string) *Error {
	return &Error{Status: status, Code: codeOf(status), Message: message, Hint: hint}
}

// humaError makes huma's own errors (validation, body too large) this
// package's shape; validation failures are 400 invalid_input.
func humaError(status int, message string, errs ...error) huma.StatusError {
	for _, err := range errs {
		if w, ok := err.(withHint); ok {
			return w.e
		}
	}
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	var tooLarge *http.MaxBytesError
	for _, err := range errs {
		if errors.As(err, &tooLarge) {
			// capBody's cap, met while reading a body of no declared
			// length (chunked): huma reports it as a failed read.
			status, message, errs = http.StatusRequestEntityTooLarge, "the request body is larger than api.max_body_size", nil
		}
	}
	e := newError(status, "", message)
	for _, err := range errs {
		if err == nil {
			continue
		}
		var detailer huma.ErrorDetailer
		if errors.As(err, &detailer) {
			e.Errors = append(e.Errors, detailer.ErrorDetail())
		} else {
			e.Errors = append(e.Errors, &huma.ErrorDetail{Message: err.Error()})
		}
	}
	switch status {
	case http.StatusBadRequest:
		e.Hint = "see the operation's schema at /openapi.json"
	case http.StatusRequestEntityTooLarge:
		e.Hint = "send a smaller body, or raise api.max_body_size in the config"
	}
	return e
}

// useHumaErrors makes every error huma writes (its own and WriteErr's)
// this package's shape. huma.NewError is a variable of package huma, not a
// setting of one API, so it is set once per process, by New (before any
// operation is served), and never put back: only this package serves huma
// operations.
var useHumaErrors = sync.OnceFunc(func() { huma.NewError = humaError })

// tokenHint says how to get a token.
const tokenHint = "send Authorization: Bearer <key>; make a token with: ductile config token create NAME --scopes plugin:rw,jobs:rw"

// errorOf maps an error of the guard, the views or the commands to its
// response.
func errorOf(err error) *Error {
	var (
		apiErr     *Error
		target     *commands.TargetError
		transition *commands.TransitionError
		retried    *commands.RetriedError
		ambiguous  *views.AmbiguousIDError
		badCut     *views.CutError
		archived   *views.ArchivedError
		badPayload *commands.PayloadError
		noPipeline *engine.PipelineNotFoundError
		idempotent *engine.IdempotencyConflictError
	)
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.Is(err, auth.ErrUnauthorized):
		return newError(http.StatusUnauthorized, tokenHint, err.Error())
	case errors.Is(err, auth.ErrForbidden):
		return newError(http.StatusForbidden, "use a token whose scopes grant it; see: ductile config token list", err.Error())
	case errors.As(err, &target):
		status := http.StatusNotFound
		hint := "see: GET /plugins"
		switch target.Kind {
		case commands.ErrPluginDisabled, commands.ErrPluginSkipped:
			status, hint = http.StatusConflict, "fix the plugin in the config, then reload the daemon; see: ductile plugin list"
		case commands.ErrPluginUnrunnable:
			status, hint = http.StatusServiceUnavailable, "nothing was enqueued: the operator must fix the plugin's files (see the message); send it again then"
		case commands.ErrCommandUnknown:
			hint = "its commands: " + joinOrNone(target.Known)
		}
		return newError(status, hint, target.Error())
	case errors.As(err, &retried):
		return newError(http.StatusConflict, "retry job "+retried.RetryJobID+" instead", retried.Error())
	case errors.As(err, &transition):
		return newError(http.StatusConflict, "see: GET /job/"+transition.JobID, transition.Error())
	case errors.As(err, &badCut):
		return newError(http.StatusBadRequest, "give at as a seq (digits) or an RFC 3339 time", "at: "+badCut.Error())
	case errors.As(err, &archived):
		return newError(http.StatusGone, fmt.Sprintf("ask for a later moment (after seq %d)", archived.Through), archived.Error())
	case errors.As(err, &ambiguous):
		return newError(http.StatusBadRequest, "give the whole id", ambiguous.Error())
	case errors.As(err, &noPipeline):
		return newError(http.StatusNotFound, "its pipelines: "+joinOrNone(noPipeline.Known)+"; see: ductile pipeline list", noPipeline.Error())
	case errors.As(err, &idempotent):
		return &Error{Status: http.StatusConflict, Code: errcode.IdempotencyConflict, Message: idempotent.Error(),
			Hint: "give another idempotency_key for another plugin or entry; the key's run: GET /runs/" + idempotent.JobID}
	case errors.Is(err, commands.ErrStaleFence):
		return &Error{Status: http.StatusConflict, Code: errcode.StaleFence, Message: err.Error(),
			Hint: "drop the job: another claim holds it now, or it ended (the sweeper ends an attempt whose lease ran out); claim again"}
	case errors.Is(err, engine.ErrUnknownWorker):
		return &Error{Status: http.StatusConflict, Code: errcode.UnknownWorker, Message: err.Error(),
			Hint: "register first (POST /worker/register), with the plugins the config places runs_on: remote or any"}
	case errors.Is(err, engine.ErrWorkerNameTaken):
		return &Error{Status: http.StatusConflict, Code: errcode.WorkerNameTaken, Message: err.Error(),
			Hint: "run this worker under another name (ductile worker --name NAME), or with the token that registered the name; revoking that token frees it"}
	case errors.Is(err, views.ErrUnknownRunStatus):
		return newError(http.StatusBadRequest, "give a run status: queued, running, cancel_requested, succeeded, failed, timeout or canceled", err.Error())
	case errors.Is(err, views.ErrBadCursor):
		return newError(http.StatusBadRequest, "pass the cursor the previous page gave, as it was, or none for the first page", err.Error())
	case errors.As(err, &badPayload):
		return payloadError(badPayload)
	case errors.Is(err, commands.ErrJobNotFound):
		return newError(http.StatusNotFound, "see: GET /jobs", err.Error())
	case errors.Is(err, commands.ErrInvalidCommand):
		return newError(http.StatusBadRequest, "", err.Error())
	}
	return newError(http.StatusInternalServerError, "see the daemon's log", err.Error())
}

// payloadError is the 400 of a request body refused as a payload.
func payloadError(bad *commands.PayloadError) *Error {
	hint := bad.Hint
	if hint == "" {
		hint = `send a JSON object, like {"url": "…"}, or no body`
	}
	return newError(http.StatusBadRequest, hint, "the body "+bad.Problem)
}

func joinOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	out := names[0]
	for _, n := range names[1:] {
		out += ", " + n
	}
	return out
}
