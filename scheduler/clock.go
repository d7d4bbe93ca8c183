package scheduler

import "time"

// Clock is where the scheduler reads the time and sleeps: the system clock,
// or a fake one that a test advances.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// SystemClock is the real clock.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
