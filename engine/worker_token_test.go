package engine_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// A worker name is bound to the token that registered it while that token
// is configured: another token is refused (worker_name_taken), a name
// bound to a token no longer configured (revoked), or to an operator's
// token (scope *), is free, and a name registered with no token is taken
// by the first token that registers it.
func TestWorkerNameBinding(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil, func(c *config.Config) {
		hash := config.HashBytes([]byte("k"))
		c.Tokens = []config.Token{{Name: "gpu-token", KeyHash: hash, Scopes: []string{"worker"}},
			{Name: "cpu-token", KeyHash: hash, Scopes: []string{"worker"}}, {Name: "admin", KeyHash: hash, Scopes: []string{"*"}}}
	})
	reg := func(name, token string) error {
		return b.eng.RegisterWorker(b.ctx, events.WorkerRegisteredData{Name: name, Host: "h", Version: "test", Token: token,
			Plugins: []events.WorkerPlugin{{Name: "render", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}}}})
	}
	require.NoError(t, reg("gpu", "gpu-token"))
	err := reg("gpu", "cpu-token")
	var taken *engine.WorkerNameTakenError
	require.ErrorAs(t, err, &taken)
	require.ErrorIs(t, err, engine.ErrWorkerNameTaken)
	require.Equal(t, engine.WorkerNameTakenError{Name: "gpu", Token: "gpu-token"}, *taken)
	require.ErrorIs(t, b.eng.CheckWorkerToken(b.ctx, "gpu", "cpu-token"), engine.ErrWorkerNameTaken)
	require.NoError(t, b.eng.CheckWorkerToken(b.ctx, "gpu", "gpu-token"))
	require.NoError(t, b.eng.CheckWorkerToken(b.ctx, "nobody", "cpu-token"), "an unregistered name: the claim refuses it")

	require.NoError(t, reg("old", "revoked-token"), "registered by a token since revoked")
	require.NoError(t, reg("old", "cpu-token"), "a revoked token's name is free")
	require.ErrorIs(t, reg("old", "gpu-token"), engine.ErrWorkerNameTaken, "and now bound to cpu-token")

	require.NoError(t, reg("ops", "admin"), "an operator's token (scope *) binds nothing")
	require.NoError(t, reg("ops", "cpu-token"))
	require.ErrorIs(t, reg("ops", "admin"), engine.ErrWorkerNameTaken, "but may not take a name bound to a worker token")

	require.NoError(t, reg("anon", ""), "a registration without a token binds nothing")
	require.NoError(t, reg("anon", "gpu-token"))
	require.ErrorIs(t, reg("anon", "cpu-token"), engine.ErrWorkerNameTaken)
}

// Two tokens racing to register a new name: one gets it, every
// registration of the other is refused, and none fails otherwise.
func TestWorkerNameRace(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil, func(c *config.Config) {
		hash := config.HashBytes([]byte("k"))
		c.Tokens = []config.Token{{Name: "t0", KeyHash: hash, Scopes: []string{"worker"}}, {Name: "t1", KeyHash: hash, Scopes: []string{"worker"}}}
	})
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = b.eng.RegisterWorker(b.ctx, events.WorkerRegisteredData{Name: "race", Host: "h", Version: "test", Token: fmt.Sprintf("t%d", i%2),
				Plugins: []events.WorkerPlugin{{Name: "render", Commands: []events.AppliedCommand{{Name: "handle", Type: "write"}}}}})
		}()
	}
	wg.Wait()
	workers, err := b.eng.Workers(b.ctx)
	require.NoError(t, err)
	winner := workers["race"].Token
	for i, err := range errs {
		if fmt.Sprintf("t%d", i%2) == winner {
			require.NoError(t, err, "registration %d", i)
		} else {
			require.ErrorIs(t, err, engine.ErrWorkerNameTaken, "registration %d", i)
		}
	}
}
