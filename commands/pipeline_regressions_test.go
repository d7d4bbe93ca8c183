package commands_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/events"
)

// TestPipelineRecoveredDeadStepSaysWhy: a step whose process died on its
// last attempt fails the run with the recovery's reason, not a bare "ended
// dead" (found end to end: the run's error said nothing of why).
func TestPipelineRecoveredDeadStepSaysWhy(t *testing.T) {
	b := setup(t)
	cfg := config.Default()
	pc := config.DefaultPlugin()
	pc.Retry.MaxAttempts = 1 // no earlier attempt's error to fall back on
	cfg.Plugins["pa"] = pc
	run, err := commands.StartPipeline(b.ctx, b.l, commands.StartRun{Pipeline: linear(), Trigger: events.TriggerAPI, Payload: raw(`{}`),
		SubmittedBy: "api", Config: cfg, Now: now})
	require.NoError(t, err)
	_, err = commands.StartJob(b.ctx, b.l, commands.Start{JobID: run.JobID, Timeout: time.Minute, PID: 1, Now: now})
	require.NoError(t, err)
	rec, err := commands.RecoverJob(b.ctx, b.l, commands.Recover{JobID: run.JobID, Reason: "the daemon was killed", Now: now})
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, rec.Status)
	fin := finished(t, b, run.RunID)
	require.NotNil(t, fin)
	require.Equal(t, events.RunFailed, fin.Status)
	require.Contains(t, fin.Error, "the daemon was killed")
	require.Len(t, fin.Results, 1)
	require.Contains(t, fin.Results[0].Error, "the daemon was killed")
}
