package engine_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
)

// TestEnqueue: a job of a plugin command is queued with the config's
// defaults and who asked; the default command follows the payload; a
// target the Engine cannot run, a caller Allow refuses and a bad payload
// are refused with typed errors before anything is appended; a dedupe key
// makes a second ask a duplicate; a dry run checks and appends nothing.
func TestEnqueue(t *testing.T) {
	f := setup(t, nil)
	res, err := f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Payload: json.RawMessage(`{"a":1}`), By: events.ActorAPI, DedupeKey: "k"})
	require.NoError(t, err)
	require.False(t, res.Deduped)
	require.Equal(t, "handle", res.Command, "a payload picks handle")
	j := f.job(t, res.JobID)
	require.Equal(t, "handle", j.Command)
	require.Equal(t, events.ActorAPI, j.SubmittedBy)
	require.Equal(t, 7, j.MaxAttempts, "the config's retry default")
	require.JSONEq(t, `{"a":1}`, string(j.Payload))

	again, err := f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "handle", Payload: json.RawMessage(`{"a":2}`), By: events.ActorAPI,
		DedupeKey: "k", DedupeTTL: 3600e9})
	require.NoError(t, err)
	require.True(t, again.Deduped)
	require.Equal(t, res.JobID, again.ExistingJobID)

	head := f.head(t)
	var target *commands.TargetError
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "ecoh", By: events.ActorCLI})
	require.ErrorAs(t, err, &target)
	require.Equal(t, commands.ErrPluginUnknown, target.Kind)
	require.Equal(t, "echo", target.Nearest, "did you mean")
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "quiet", By: events.ActorCLI})
	require.ErrorIs(t, err, commands.ErrPluginDisabled)
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "broken", By: events.ActorCLI})
	require.ErrorIs(t, err, commands.ErrPluginSkipped)
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "hadnle", By: events.ActorCLI})
	require.ErrorAs(t, err, &target)
	require.Equal(t, "handle", target.Nearest)
	require.Equal(t, []string{"poll", "handle"}, target.Known)

	refused := errors.New("not your scope")
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "handle", Payload: json.RawMessage(`[`), By: events.ActorAPI,
		Allow: func(c events.AppliedCommand) error {
			require.Equal(t, "write", c.Type)
			return refused
		}})
	require.ErrorIs(t, err, refused, "Allow is asked before the payload is checked")
	var bad *commands.PayloadError
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "handle", Payload: json.RawMessage(`[1]`), By: events.ActorAPI})
	require.ErrorAs(t, err, &bad)
	require.Contains(t, bad.Problem, "must be a JSON object")
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "handle", Payload: json.RawMessage(``), Kind: engine.PayloadDelivery, By: events.ActorWebhook})
	require.ErrorAs(t, err, &bad, "a delivery is never empty")

	dry, err := f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", By: events.ActorCLI, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, "poll", dry.Command, "no payload: poll")
	require.Empty(t, dry.JobID)

	require.NoError(t, os.Chmod(f.run, 0o644))
	_, err = f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "poll", By: events.ActorCLI})
	require.ErrorIs(t, err, commands.ErrPluginUnrunnable)
	require.Equal(t, head, f.head(t), "no refusal appends anything")

	require.NoError(t, os.Chmod(f.run, 0o755))
	delivered, err := f.eng.Enqueue(f.ctx, engine.Enqueue{Plugin: "echo", Command: "handle", Payload: json.RawMessage(`[1,2]`),
		Kind: engine.PayloadDelivery, By: events.ActorWebhook, Causation: "webhook:d1"})
	require.NoError(t, err)
	require.JSONEq(t, `[1,2]`, string(f.job(t, delivered.JobID).Payload), "a delivery may be any JSON value")
}
