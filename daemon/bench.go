package daemon

import (
	"context"

	"github.com/ductile/ductile/pluginhost"
)

// OpenBench is Open with the plugins named in steps run in process instead
// of spawned, at start and after each reload: what ductile bench
// --in-process measures (the core's own path, without a plugin process).
// Only the benchmark opens a daemon so.
func OpenBench(ctx context.Context, opts Options, steps map[string]pluginhost.Step) (*Daemon, error) {
	return open(ctx, opts, steps)
}
