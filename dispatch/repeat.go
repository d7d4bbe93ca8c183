package dispatch

import (
	"fmt"
	"time"
)

// repeatedFailure condenses a failure that repeats (a start the ledger keeps
// refusing) into a few log lines: the first failure of a run is logged at
// once, the following ones as one line per window saying how many there
// were, and a last such line when the run ends. Its caller serialises it
// and writes the lines it returns, outside any lock.
type repeatedFailure struct {
	msg    string
	window time.Duration

	since time.Time // when the lines logged so far ended (zero: no run)
	count int       // failures since then, not yet logged
	total int       // failures in this run
}

// failed records one failure at now and returns the line to log for it
// ("" for none).
func (r *repeatedFailure) failed(now time.Time) string {
	r.total++
	if r.since.IsZero() {
		r.since = now
		return r.msg
	}
	r.count++
	if now.Sub(r.since) < r.window {
		return ""
	}
	return r.summary(now)
}

// ended closes a run of failures (the operation succeeded at now). It
// returns the line that counts the failures not logged yet ("" if none) and
// how many failures the run had (0: there was no run).
func (r *repeatedFailure) ended(now time.Time) (line string, total int) {
	if r.count > 0 {
		line = r.summary(now)
	}
	total = r.total
	r.since, r.count, r.total = time.Time{}, 0, 0
	return line, total
}

func (r *repeatedFailure) summary(now time.Time) string {
	line := fmt.Sprintf("%s (repeated %d times in %v)", r.msg, r.count, now.Sub(r.since).Round(time.Second))
	r.since, r.count = now, 0
	return line
}
