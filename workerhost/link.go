package workerhost

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// outageReminder is how often the host says again that it still waits
// for the daemon.
const outageReminder = 30 * time.Second

// link is what the host knows of its connection to the daemon. An outage
// (calls that cannot reach it: refused, reset, timed out, or a proxy's
// 502/503/504) is logged when it begins, every outageReminder while it
// lasts and when it ends, however many calls fail meanwhile.
type link struct {
	log *slog.Logger
	api string

	mu        sync.Mutex
	downSince time.Time // zero: the daemon answers
	said      time.Time // when the outage was last logged
}

// failed notes that a call to path could not reach the daemon.
func (l *link) failed(path string, err error) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	switch {
	case l.downSince.IsZero():
		l.downSince, l.said = now, now
		l.log.Warn("the daemon cannot be reached: waiting for it to come back. Running plugins go on; their renewals, "+
			"log batches and completions are kept and sent again; claims resume once it answers",
			"api", l.api, "call", path, "err", err,
			"hint", "a daemon restart shorter than a third of the lease period is ridden out; else is it running, and --api its address?")
	case now.Sub(l.said) >= outageReminder:
		l.said = now
		l.log.Warn("still waiting for the daemon to answer", "api", l.api, "down_for", now.Sub(l.downSince).Round(time.Second), "err", err)
	}
}

// answered notes that the daemon answered a call sent at sent: one sent
// before the outage began says nothing of its end.
func (l *link) answered(sent time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.downSince.IsZero() && !sent.Before(l.downSince) {
		l.log.Info("the daemon answers again: claiming and reporting resume", "api", l.api,
			"down_for", time.Since(l.downSince).Round(time.Millisecond))
		l.downSince = time.Time{}
	}
}

// note records how a call to path sent at sent went: err is what it
// returned (nil, an *APIError, or a transport error) and ctx its context.
func (l *link) note(ctx context.Context, path string, sent time.Time, err error) {
	switch {
	case err == nil:
		l.answered(sent)
	case errors.Is(ctx.Err(), context.Canceled):
		// The host gave up on the call (it stops): says nothing of the daemon.
	case unreachable(err):
		l.failed(path, err)
	default:
		l.answered(sent)
	}
}

// unreachable says err is a call that did not reach the daemon (a
// transport error, a timeout, or a gateway's 502/503/504), as opposed to
// the daemon's own answer.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var a *APIError
	if !errors.As(err, &a) {
		return true
	}
	switch a.Status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// logRetry logs a call that will be tried again: at debug level while the
// daemon is away (the link says so once), else as a warning.
func logRetry(log *slog.Logger, msg string, err error, wait time.Duration, attrs ...any) {
	attrs = append(attrs, "err", err, "retry_in", wait.Round(time.Millisecond))
	if unreachable(err) {
		log.Debug(msg, attrs...)
		return
	}
	log.Warn(msg, attrs...)
}

// retry calls send (each call bounded by callTimeout) until it succeeds,
// the daemon refuses it (permanent: asking again changes nothing, a stale
// fence included), or ctx ends; it returns nil or the last error. Between
// tries it waits the backoff (reconnectCap while the daemon is away).
func retry(ctx context.Context, log *slog.Logger, what string, send func(context.Context) error) error {
	var b backoff
	for {
		call, cancel := context.WithTimeout(ctx, callTimeout)
		err := send(call)
		cancel()
		if err == nil || permanent(err) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		wait := b.after(err)
		if b.failures == 1 {
			// Said once at its level whatever the cause: something of the
			// job waits on this worker.
			log.Warn(what+" not delivered: kept, and sent again until the daemon takes it", "err", err, "retry_in", wait.Round(time.Millisecond))
		} else {
			logRetry(log, what+" not delivered; trying again", err, wait)
		}
		if !sleep(ctx, wait) {
			return err
		}
	}
}
