package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// attemptOf is how the plugin run res of job went, for the Engine to
// record (engine.Attempt), and logs what the plugin wrote to stderr and its
// logs. A canceled run is recorded as interrupted at shutdown, else as
// canceled with its cause.
func (r *runner) attemptOf(ctx context.Context, job *commands.Job, res pluginhost.Result, log *slog.Logger) engine.Attempt {
	a := engine.Attempt{
		JobID: job.JobID, Attempt: job.Attempt, Worker: r.worker, Kind: res.Kind, Retryable: res.Retryable, Error: res.Err,
		ExitCode: res.ExitCode, Duration: res.Duration, Stderr: string(res.Stderr), StderrTruncated: res.StderrTruncated,
	}
	if res.StderrTruncated {
		a.StderrBytes = res.StderrBytes
	}
	if res.Response != nil {
		// ParseResponse accepted exactly this (one JSON object, trimmed).
		a.Response = json.RawMessage(bytes.TrimSpace(res.Stdout))
	} else if len(res.Stdout) > 0 {
		// Not a response: what the plugin wrote is kept for diagnosis, an
		// excerpt of it (a flood must not bloat the ledger for ever).
		stdout, cut := pluginhost.Excerpt(res.Stdout, res.StdoutBytes)
		a.Stdout = string(stdout)
		if cut {
			a.StdoutBytes = max(res.StdoutBytes, int64(len(res.Stdout)))
		}
	}
	if res.Kind == events.OutcomeCanceled {
		if errors.Is(context.Cause(ctx), errShutdown) {
			a.Kind, a.Retryable, a.Error = events.OutcomeInterrupted, true, errShutdown.Error()
		} else {
			a.Kind, a.Error = events.OutcomeCanceled, cancelCause(ctx).Error()
		}
	}
	if len(res.Stderr) > 0 {
		log.Info("plugin wrote to stderr", "stderr", tail(string(res.Stderr), 2048), "truncated", res.StderrTruncated)
	}
	if res.Response != nil {
		for _, l := range res.Response.Logs {
			log.Log(ctx, pluginLevel(l.Level), l.Message, "source", "plugin")
		}
	}
	return a
}

// cancelCause is why a canceled run was canceled, as recorded: the cause
// its context was canceled with (RunJob's caller may give one, such as a
// timeout of its own), else a cancel request.
func cancelCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return cause
	}
	return errCanceledByUser
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func pluginLevel(l string) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warn", "warning":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
