package workerhost

import (
	"math/rand/v2"
	"time"
)

// Backoff bounds of the waits between failed calls to the daemon.
const (
	backoffFirst = 500 * time.Millisecond
	backoffCap   = 30 * time.Second
	// reconnectCap bounds the wait while the daemon cannot be reached at
	// all (a restart, most often): asking costs a refused connection, and
	// the host should notice its return within seconds.
	reconnectCap = 5 * time.Second
)

// backoff is the wait before the next try after failures in a row: full
// jitter over an exponential bound, capped (so that workers the daemon
// turned away do not come back together).
type backoff struct{ failures int }

// next is the wait after one more failure.
func (b *backoff) next() time.Duration { return b.nextCapped(backoffCap) }

// after is the wait after one more failure, err: capped at reconnectCap
// when the daemon could not be reached, else at backoffCap.
func (b *backoff) after(err error) time.Duration {
	if unreachable(err) {
		return b.nextCapped(reconnectCap)
	}
	return b.next()
}

func (b *backoff) nextCapped(limit time.Duration) time.Duration {
	b.failures++
	bound := backoffFirst << min(b.failures-1, 16)
	bound = min(bound, limit)
	return bound/2 + rand.N(bound/2+1)
}

// reset forgets the failures after a success.
func (b *backoff) reset() { b.failures = 0 }
