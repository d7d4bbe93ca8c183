package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// waitForJob follows one job's stream from a seq: it is given the job's
// events appended after it started waiting, skips other streams', returns
// once the job succeeds (with the seq of its job.succeeded) and fails as
// soon as the job fails.
func TestWaitForJobFollowsOneJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	appendEvent := func(job, typ string) int64 {
		seqs, err := l.Append(ctx, ledger.NewEvent{Stream: events.JobStream(job), ExpectedVersion: ledger.AnyVersion, Type: typ, Meta: ledger.Meta{Actor: "test"}})
		require.NoError(t, err)
		return seqs[0]
	}
	appendEvent("before", events.JobEnqueued) // before the wait: not this job's
	type waited struct {
		types []string
		last  int64
		err   error
	}
	wait := func(id string) chan waited {
		done := make(chan waited, 1)
		after := l.Head()
		go func() {
			evs, last, err := waitForJob(ctx, l, after, id)
			var types []string
			for _, ev := range evs {
				types = append(types, ev.Type)
			}
			done <- waited{types, last, err}
		}()
		return done
	}

	done := wait("a")
	appendEvent("a", events.JobEnqueued)
	appendEvent("other", events.JobEnqueued)
	appendEvent("a", events.JobStarted)
	succeeded := appendEvent("a", events.JobSucceeded)
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, []string{events.JobEnqueued, events.JobStarted, events.JobSucceeded}, got.types)
	require.Equal(t, succeeded, got.last)

	done = wait("b")
	appendEvent("b", events.JobEnqueued)
	appendEvent("b", events.JobStarted)
	appendEvent("b", events.JobFailed)
	got = <-done
	require.ErrorContains(t, got.err, "bench job b failed")
}
