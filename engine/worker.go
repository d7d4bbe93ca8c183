package engine

import (
	"os"

	"github.com/ductile/ductile/events"
)

// LocalWorker is the identity of the workers of this process, recorded on
// the starts and ends of the attempts they run: "<host name>/local" (just
// "local" if the host name cannot be read) and this process's id.
func LocalWorker() events.Worker {
	name := "local"
	if host, err := os.Hostname(); err == nil && host != "" {
		name = host + "/local"
	}
	return events.Worker{Name: name, PID: os.Getpid()}
}
