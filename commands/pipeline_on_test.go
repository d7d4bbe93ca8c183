package commands_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pipeline"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/views"
)

// emitting is a success whose response emits one event of type typ.
func emitting(typ string) commands.Outcome {
	return commands.Outcome{Kind: events.OutcomeOK, Response: raw(`{"status":"ok","result":"checked","events":[{"type":"` + typ + `","payload":{"t":"` + typ + `"}}]}`)}
}

// on is a uses node gated on event types.
func on(n *pipeline.Node, types ...string) *pipeline.Node {
	n.On = types
	return n
}

// TestPipelineBranchesOnEmittedType: the validator pattern. A step's on:
// lets the run branch on the type of the event the step before it
// emitted: the matching branch runs, the other is bypassed, and the run's
// stream records the event type each step was entered with and, for the
// bypassed one, why (so pipeline status, and any replay of the ledger,
// show why a step ran or was skipped).
func TestPipelineBranchesOnEmittedType(t *testing.T) {
	t.Parallel()
	validator := func() *pipeline.Pipeline {
		return graph("validator", "check", uses("check", "checker", "route"),
			&pipeline.Node{ID: "route", Kind: pipeline.KindSplit, Branches: []string{"store", "reject"}},
			on(uses("store", "db", ""), "schema.valid"), on(uses("reject", "notify", ""), "schema.invalid", "schema.partial"))
	}
	for _, tc := range []struct {
		emitted, runs, skipped string
	}{
		{"schema.valid", "store", "reject"},
		{"schema.invalid", "reject", "store"},
		{"schema.partial", "reject", "store"},
	} {
		t.Run(tc.emitted, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			run := startRun(t, b, validator(), `{}`)
			runOne(t, b, run.JobID, emitting(tc.emitted), nil)
			p := progress(t, b, run.RunID)
			require.Len(t, p.Enqueued, 1)
			require.Equal(t, tc.runs, p.Enqueued[0].Node)
			require.Equal(t, tc.emitted, p.Enqueued[0].Event)
			require.Equal(t, []events.SkippedStep{{Node: tc.skipped, Event: tc.emitted,
				Reason: "the event is " + tc.emitted + ", not " + map[string]string{"store": "schema.valid", "reject": "schema.invalid or schema.partial"}[tc.skipped] + " (on:)"}}, p.Skipped)
			require.JSONEq(t, `{"t":"`+tc.emitted+`"}`, string(b.fold(t, p.Enqueued[0].JobID).Payload), "the branch receives the emitted event")

			runOne(t, b, p.Enqueued[0].JobID, ok(`"stored"`), nil)
			fin := finished(t, b, run.RunID)
			require.NotNil(t, fin)
			require.Equal(t, events.RunSucceeded, fin.Status)
		})
	}

	// The same branches as a sequence: a bypassed step hands its input on
	// unchanged, so the step after it still sees the validator's event.
	t.Run("sequence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pl := graph("chain", "check", uses("check", "checker", "store"),
			on(uses("store", "db", "reject"), "schema.valid"), on(uses("reject", "notify", ""), "schema.invalid"))
		run := startRun(t, b, pl, `{}`)
		runOne(t, b, run.JobID, emitting("schema.invalid"), nil)
		p := progress(t, b, run.RunID)
		require.Equal(t, "reject", p.Enqueued[0].Node)
		require.Equal(t, "store", p.Skipped[0].Node)
	})
}

// TestRunStepsShowWhy: views.ReadRun (pipeline status, GET /run/{id})
// lists each step the run enqueued, with the event type it ran on, and
// each it bypassed, with why.
func TestRunStepsShowWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pr := projections.New(b.l, projections.Options{})
	pr.Start(b.ctx)
	defer pr.Stop()
	pl := graph("chain", "check", uses("check", "checker", "store"), on(uses("store", "db", ""), "schema.valid"))
	run := startRun(t, b, pl, `{}`)
	runOne(t, b, run.JobID, emitting("schema.invalid"), nil)
	head, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	require.NoError(t, pr.WaitFor(b.ctx, head))
	got, err := views.ReadRun(b.ctx, b.l, run.RunID)
	require.NoError(t, err)
	require.Equal(t, events.RunSucceeded, got.Status)
	require.Len(t, got.Steps, 2)
	require.Equal(t, views.RunStep{Seq: got.Steps[0].Seq, Node: "check", Outcome: views.StepEnqueued, JobID: run.JobID, Event: commands.EventPipeline}, got.Steps[0])
	require.Equal(t, views.RunStep{Seq: got.Steps[1].Seq, Node: "store", Outcome: views.StepSkipped, Event: "schema.invalid",
		Reason: "the event is schema.invalid, not schema.valid (on:)"}, got.Steps[1])
	require.Less(t, got.Steps[0].Seq, got.Steps[1].Seq)
}
