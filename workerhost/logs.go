package workerhost

import (
	"context"
	"log/slog"
	"sync"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/pluginhost"
)

// logSender sends a job's stderr batches to the daemon from a goroutine of
// its own, in order, so that a daemon that is slow or away never holds
// the plugin up. A batch the daemon cannot take now waits, with the ones
// after it, and is sent again until it is taken, refused, or the job's
// reporting ends. What waits is bounded by what pluginhost streams of one
// run (pluginhost.MaxStreamedStderr); the rest of the plugin's stderr
// travels in the completion's excerpt only.
type logSender struct {
	client *Client
	claim  *engine.Claimed
	log    *slog.Logger
	ctx    context.Context

	mu      sync.Mutex
	queue   []pluginhost.StderrLines
	closing bool
	stale   bool // the daemon refused a batch as stale: the job is not this worker's
	wake    chan struct{}
	done    chan struct{}
}

// newLogSender starts the sender of claim's stderr batches; ctx bounds
// its sends.
func newLogSender(ctx context.Context, c *Client, claim *engine.Claimed, log *slog.Logger) *logSender {
	s := &logSender{client: c, claim: claim, log: log, ctx: ctx, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s
}

// take is pluginhost.RunOptions.OnStderr: it queues lines.
func (s *logSender) take(lines pluginhost.StderrLines) {
	s.mu.Lock()
	if !s.stale {
		s.queue = append(s.queue, lines)
	}
	s.mu.Unlock()
	s.poke()
}

func (s *logSender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *logSender) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return
			}
			select {
			case <-s.wake:
			case <-s.ctx.Done():
				return
			}
			continue
		}
		batch := s.queue[0]
		s.mu.Unlock()
		err := retry(s.ctx, s.log, "stderr lines", func(ctx context.Context) error {
			return s.client.Logs(ctx, s.claim, batch)
		})
		s.mu.Lock()
		s.queue = s.queue[1:]
		switch {
		case err == nil:
		case IsStaleFence(err):
			s.stale, s.queue = true, nil
			s.log.Warn("stderr lines refused: the job's lease passed to another worker (stale fence); its lines are no longer sent")
		case s.ctx.Err() != nil:
			s.log.Warn("stderr lines not delivered before the worker stopped; dropped (the completion carries the stderr's excerpt)",
				"batches", len(s.queue)+1, "err", err)
			s.queue = nil
			s.mu.Unlock()
			return
		default:
			s.log.Warn("stderr lines refused; dropped (the completion carries the stderr's excerpt)", "lines", len(batch.Lines), "err", err)
		}
		s.mu.Unlock()
	}
}

// close sends what waits and stops: it returns once every batch was
// delivered or dropped, or the sender's context ended.
func (s *logSender) close() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.poke()
	<-s.done
}
