package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/events"
)

// The actors and triggers are stored words (meta actor, submitted_by,
// trigger): a constant's value changed would leave the events already on
// users' disks naming what no code names any more.
func TestActorsAndTriggersAreTheStoredWords(t *testing.T) {
	actors := []events.Actor{events.ActorCLI, events.ActorAPI, events.ActorWebhook, events.ActorScheduler, events.ActorRoute,
		events.ActorPipeline, events.ActorDaemon, events.ActorDispatcher, events.ActorRecovery, events.ActorWorker}
	require.Equal(t, []events.Actor{"cli", "api", "webhook", "scheduler", "route", "pipeline", "daemon", "dispatcher", "recovery", "worker"}, actors)
	triggers := []events.Trigger{events.TriggerAPI, events.TriggerCLI, events.TriggerEvent, events.TriggerHook}
	require.Equal(t, []events.Trigger{"api", "cli", "event", "hook"}, triggers)
}
