package pluginhost

import (
	"bytes"
	"sync"
	"time"
)

// Streaming a plugin's stderr while it runs (RunOptions.OnStderr).
const (
	// StderrInterval is how long a line waits to be handed on with those
	// that follow it: a plugin writing a line every millisecond makes one
	// delivery every 250 ms, not a thousand.
	StderrInterval = 250 * time.Millisecond
	// StderrChunkSize is how much of lines makes a delivery at once,
	// without waiting for StderrInterval (16 KiB; each line counts
	// stderrLineCost more than its text).
	StderrChunkSize = 16 << 10
	// MaxStreamedStderr bounds what one run streams (256 KiB, counted like
	// StderrChunkSize: 64 KiB of text in lines of 64 bytes or more, fewer
	// very short lines). The rest of its stderr is in Result.Stderr only.
	MaxStreamedStderr = 256 << 10
	// MaxStderrLine is the longest line streamed: a longer one is cut into
	// pieces of this many bytes, each a line of its own.
	MaxStderrLine = 4 << 10

	// stderrLineCost is what a line costs besides its text: its time and
	// JSON framing in the event that records it.
	stderrLineCost = 64
)

// StderrLine is one line a plugin wrote to stderr, without its newline,
// and when the runner read it.
type StderrLine struct {
	At   time.Time
	Text string
}

// StderrLines is a run of consecutive lines of a plugin's stderr, as
// RunOptions.OnStderr receives them.
type StderrLines struct {
	// First is the index of the first line among all the lines of the run's
	// stderr, as SplitStderr cuts Result.Stderr (from 0).
	First int
	Lines []StderrLine
	// Truncated says the stream of this run's stderr ends here, at
	// MaxStreamedStderr or at the end of its first ExcerptBytes (a line
	// that goes on past them is not streamed): the lines after these are
	// in Result.Stderr only.
	Truncated bool
}

// SplitStderr cuts captured stderr into the lines a stream of it delivers:
// at every newline (dropped), and within a line after every MaxStderrLine
// bytes. A last line without a newline is a line; nothing after a final
// newline is.
func SplitStderr(b []byte) []string {
	var s lineSplitter
	lines := s.write(b, nil)
	if len(s.partial) > 0 {
		lines = append(lines, string(s.partial))
	}
	return lines
}

// lineSplitter is SplitStderr done as the bytes come.
type lineSplitter struct{ partial []byte }

// write appends to lines the lines b completes.
func (s *lineSplitter) write(b []byte, lines []string) []string {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.partial = append(s.partial, b...)
			b = nil
		} else {
			s.partial = append(s.partial, b[:i]...)
			b = b[i+1:]
		}
		// Only bytes known to be followed by more of the line are cut off.
		for len(s.partial) > MaxStderrLine {
			lines = append(lines, string(s.partial[:MaxStderrLine]))
			s.partial = s.partial[MaxStderrLine:]
		}
		if i >= 0 {
			lines = append(lines, string(s.partial))
			s.partial = s.partial[:0]
		}
	}
	return lines
}

// stderrStream hands what a plugin writes to stderr on as coalesced runs of
// lines (see RunOptions.OnStderr). The reader of the pipe makes it at the
// first byte (a plugin that writes nothing to stderr costs nothing), only
// appends bytes (write) and never waits for the delivery, which runs on a
// goroutine of its own.
type stderrStream struct {
	deliver func(StderrLines)

	mu      sync.Mutex
	pending []byte
	closed  bool // the pipe reached its end
	cut     bool // more was written than the stream was given
	running bool // run has started

	wake chan struct{} // buffered (1): pending grew, or the pipe closed
	done chan struct{} // closed when run returns
}

func newStderrStream(deliver func(StderrLines)) *stderrStream {
	return &stderrStream{deliver: deliver, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// write queues b (the caller keeps it; it is copied).
func (s *stderrStream) write(b []byte) {
	s.mu.Lock()
	s.pending = append(s.pending, b...)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		go s.run()
	}
	s.poke()
}

// close marks the end of what the stream is given: what is pending is
// delivered and run returns. cut says the plugin wrote more than the
// stream was given: the last line, if it has no newline, goes on past what
// the stream saw and is not delivered, and the last delivery is Truncated.
// Otherwise the last line is delivered, newline or not.
func (s *stderrStream) close(cut bool) {
	s.mu.Lock()
	s.closed, s.cut = true, cut
	running := s.running
	s.mu.Unlock()
	if running {
		s.poke()
	}
}

// wait returns once everything written has been delivered (after close).
func (s *stderrStream) wait() {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if running {
		<-s.done
	}
}

func (s *stderrStream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *stderrStream) run() {
	defer close(s.done)
	var (
		split   lineSplitter
		batch   StderrLines
		size    int  // of batch, in cost
		spent   int  // of MaxStreamedStderr
		stopped bool // the bound was reached: the rest is dropped
		timer   *time.Timer
		timerC  <-chan time.Time
		lines   []string
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	flush := func() {
		if len(batch.Lines) > 0 || batch.Truncated {
			s.deliver(batch)
		}
		batch = StderrLines{First: batch.First + len(batch.Lines)}
		size = 0
		if timer != nil {
			timer.Stop()
		}
		timerC = nil
	}
	add := func(text string, at time.Time) {
		if stopped {
			return
		}
		cost := len(text) + stderrLineCost
		if spent+cost > MaxStreamedStderr {
			stopped, batch.Truncated = true, true
			flush()
			return
		}
		spent += cost
		size += cost
		batch.Lines = append(batch.Lines, StderrLine{At: at, Text: text})
		if size >= StderrChunkSize {
			flush()
		}
	}
	for {
		select {
		case <-s.wake:
		case <-timerC:
			flush()
		}
		s.mu.Lock()
		data, closed, cut := s.pending, s.closed, s.cut
		s.pending = nil
		s.mu.Unlock()
		now := time.Now()
		lines = split.write(data, lines[:0])
		for _, text := range lines {
			add(text, now)
		}
		if closed {
			if cut && !stopped {
				stopped, batch.Truncated = true, true
			}
			if len(split.partial) > 0 {
				add(string(split.partial), now) // nothing once stopped
			}
			flush()
			return
		}
		if len(batch.Lines) > 0 && timerC == nil {
			if timer == nil {
				timer = time.NewTimer(StderrInterval)
			} else {
				timer.Reset(StderrInterval)
			}
			timerC = timer.C
		}
	}
}
