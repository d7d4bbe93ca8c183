package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// Limits on what one attempt's plugin reports on its control channel
// (docs/plugin-development.md).
const (
	// MaxExportsPerAttempt caps the export items of one attempt: those
	// after it are refused.
	MaxExportsPerAttempt = 1000
	// ExportQueue is how many export items may wait to be recorded: the
	// plugin's lines are read without waiting for the ledger, and an item
	// that finds the queue full is refused.
	ExportQueue = 64
	// LoggedRefusals is how many refused control lines of one attempt are
	// logged one by one; the rest are counted in the attempt's summary line.
	LoggedRefusals = 10

	exportTries = 5 // tries of an export the ledger refuses for now
)

// attemptControl takes what the plugin of one running attempt writes on its
// control channel (pluginhost.RunOptions.Control) to the attempt's
// engine.RunReport: progress at once (it never blocks), export items
// through a queue that one goroutine records in order, durably, so the
// plugin's lines are never held up by the ledger. Its report and its
// goroutine are made at the first line that needs them: a plugin that
// writes nothing costs nothing. take is called from the run's goroutine
// only; close once the plugin has exited, before the attempt is completed.
type attemptControl struct {
	e       *engine.Engine
	jobID   string
	attempt int
	log     *slog.Logger
	// stopped ends the retries of exports the ledger keeps refusing.
	stopped context.Context

	report  *engine.RunReport
	exports chan events.Exported // nil until the first export
	done    chan struct{}        // closed when the recorder has recorded every queued export
	queued  int                  // export items queued
	refused int                  // lines refused, by pluginhost or here
	// lost counts export items the ledger refused (by the recorder, read
	// once done).
	lost   int
	logged int // refusals logged one by one
	last   string
	closed bool
}

// take handles one control line.
func (c *attemptControl) take(m pluginhost.ControlMessage) {
	if m.Refused != "" {
		c.refuse(m.Refused)
		return
	}
	if c.report == nil {
		c.report = c.e.Report(c.jobID, c.attempt)
	}
	if m.Progress != nil {
		c.report.Progress(*m.Progress)
	}
	if m.Export == nil {
		return
	}
	if c.queued >= MaxExportsPerAttempt {
		c.refuse("control line " + strconv.Itoa(m.Line) + " refused: over the cap of " + strconv.Itoa(MaxExportsPerAttempt) + " export items per attempt")
		return
	}
	if c.exports == nil {
		c.exports, c.done = make(chan events.Exported, ExportQueue), make(chan struct{})
		go c.record(c.exports)
	}
	select {
	case c.exports <- *m.Export:
		c.queued++
	default:
		c.refuse("control line " + strconv.Itoa(m.Line) + " refused: " + strconv.Itoa(ExportQueue) + " export items already wait to be recorded (the ledger is slow): export fewer, larger items")
	}
}

// refuse counts and logs a refused line (the first LoggedRefusals of them).
func (c *attemptControl) refuse(why string) {
	c.refused++
	c.last = why
	if c.logged < LoggedRefusals {
		c.logged++
		c.log.Warn("plugin control line refused", "reason", why)
	}
}

// record records the queued export items, in order, until the queue is
// closed. An item the ledger refuses for now is tried again a few times;
// one it refuses for good (over a cap, the job moved on) is logged.
func (c *attemptControl) record(items <-chan events.Exported) {
	defer close(c.done)
	for item := range items {
		var err error
		for try := range exportTries {
			var stored events.Exported
			stored, err = c.report.Export(c.stopped, item)
			if err == nil {
				c.log.Debug("export item recorded", "export_item_id", stored.ExportItemID, "type", stored.Type)
				break
			}
			if errors.Is(err, commands.ErrInvalidExport) || errors.Is(err, commands.ErrInvalidTransition) || try == exportTries-1 {
				break
			}
			t := time.NewTimer(100 * time.Millisecond << try)
			select {
			case <-c.stopped.Done():
			case <-t.C:
			}
			t.Stop()
			if c.stopped.Err() != nil {
				break
			}
		}
		if err != nil {
			c.lost++
			c.log.Warn("plugin export item not recorded", "type", item.Type, "err", err)
		}
	}
}

// close waits until every queued export item is recorded, then closes the
// report (writing the last progress), and logs how many lines were refused
// and export items not recorded, if any. Later calls do nothing.
func (c *attemptControl) close(ctx context.Context) {
	if c.closed {
		return
	}
	c.closed = true
	if c.exports != nil {
		close(c.exports)
		<-c.done
	}
	if c.report != nil {
		c.report.Close(ctx)
	}
	if c.refused+c.lost > 0 {
		c.log.Warn("plugin control lines refused", "refused", c.refused, "exports_not_recorded", c.lost, "last_reason", c.last)
	}
}
