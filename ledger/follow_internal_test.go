package ledger

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A ledger that could not watch its file (no inotify instance left, say) is
// woken by nothing another process appends: Follow then looks again on a
// timer, so a follower still sees those appends.
func TestFollowWithoutAWatchLooksOnATimer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ductile.db")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	follower, err := Open(ctx, path, Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	defer follower.Close()
	require.NoError(t, follower.watcher.Close())
	follower.watcher = nil // as when the watch could not be set up
	require.False(t, follower.Watching())

	other, err := Open(ctx, path, Options{Synchronous: "NORMAL"}) // another process, as far as the file goes
	require.NoError(t, err)
	defer other.Close()

	seen := make(chan Event, 1)
	go func() {
		_, _ = follower.Follow(ctx, 0, Filter{Stream: "x/1"}, func(ev Event) error {
			seen <- ev
			return ErrStopFollowing
		})
	}()
	_, err = other.Append(ctx, NewEvent{Stream: "x/1", Type: "x.happened"})
	require.NoError(t, err)
	select {
	case ev := <-seen:
		require.Equal(t, "x.happened", ev.Type)
	case <-ctx.Done():
		t.Fatal("the follower never saw the other ledger's append")
	}
}
