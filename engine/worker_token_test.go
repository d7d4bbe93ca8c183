package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// A worker name is bound to the token that registered it while that token
// is configured: another token is refused (worker_name_taken), a name
// bound to a token no longer configured (revoked) is free, and a name
// registered with no token is taken by the first token that registers it.
func TestWorkerNameBinding(t *testing.T) {
	t.Parallel()
	b := setupLeases(t, nil, func(c *config.Config) {
		hash := config.HashBytes([]byte("k"))
		c.Tokens = []config.Token{{Name: "gpu-token", KeyHash: hash, Scopes: []string{"worker"}},
			{Name: "cpu-token", KeyHash: hash, Scopes: []string{"worker"}}}
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

	require.NoError(t, reg("anon", ""), "a registration without a token binds nothing")
	require.NoError(t, reg("anon", "gpu-token"))
	require.ErrorIs(t, reg("anon", "cpu-token"), engine.ErrWorkerNameTaken)
}
