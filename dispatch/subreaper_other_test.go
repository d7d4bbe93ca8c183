//go:build !linux

package dispatch_test

// becomeSubreaper does nothing: outside Linux, an orphaned grandchild goes
// to init (launchd), which reaps it.
func becomeSubreaper() error { return nil }
