package commands_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
)

// parent is job p1 of echo poll with key k, a child itself of root-1's
// tree, running its first attempt.
func parent(edit ...func(*events.Enqueued)) *jobStream {
	s := job("p1", append([]func(*events.Enqueued){withKey("k")}, edit...)...)
	s.corr = "root-1"
	s.evs[0].Meta.CorrelationID = "root-1"
	return s.started(1)
}

// priorState is a plugin.state_merged event leaving echo's state as given.
func priorState(state string) ledger.NewEvent {
	return ledger.NewEvent{Stream: events.PluginStream("echo"), ExpectedVersion: 0, Type: events.PluginStateMerged,
		Data: events.StateMerged{JobID: "before", Command: "poll", Updates: raw(state), State: raw(state)}}
}

// child is a routed handle job with the key k.
func child(plugin string, edit ...func(*commands.Enqueue)) commands.Enqueue {
	c := commands.Enqueue{Plugin: plugin, Command: "handle", Payload: raw(`{"x":1}`), SourceEventID: "ev-1",
		Event:       raw(`{"type":"echo.item","payload":{"x":1},"event_id":"ev-1","source":"echo","timestamp":"2026-03-01T12:00:00Z"}`),
		MaxAttempts: 2, BackoffBase: 10 * time.Second, DedupeKey: "k", DefaultDedupeTTL: 24 * time.Hour}
	for _, e := range edit {
		e(&c)
	}
	return c
}

func childEnqueued(id, plugin string) string {
	return fmt.Sprintf(`{"job_id":%q,"plugin":%q,"command":"handle","payload":{"x":1},"max_attempts":2,"backoff_base_ms":10000,
		"submitted_by":"route","dedupe_key":"k","parent_job_id":"p1","source_event_id":"ev-1",
		"event":{"type":"echo.item","payload":{"x":1},"event_id":"ev-1","source":"echo","timestamp":"2026-03-01T12:00:00Z"}}`, id, plugin)
}

const childMeta = `{"correlation_id":"root-1","actor":"route"}`

// TestCompleteSucceededInOneAppend: the success, the merged state, the key
// release and the routed children land in one transaction.
func TestCompleteSucceededInOneAppend(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent().events()...)
	b.given(t, priorState(`{"a":1,"b":"old"}`))
	mark := b.mark(t)

	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Now: now,
		Outcome: commands.Outcome{Kind: events.OutcomeOK, Duration: 2 * time.Second, Stderr: "log line",
			Response: raw(`{"status":"ok","state_updates":{"b":"new","c":[1]}}`), StateUpdates: raw(` {"b":"new","c":[1]} `)},
		Children: []commands.Enqueue{child("notify"), child("store")},
	})

	require.NoError(t, err)
	require.Equal(t, events.StatusSucceeded, res.Status)
	require.Equal(t, events.OutcomeOK, res.Kind)
	require.True(t, res.NextRetryAt.IsZero())
	require.Len(t, res.Children, 2)
	c1, c2 := res.Children[0].JobID, res.Children[1].JobID
	require.Equal(t, []commands.EnqueueResult{{JobID: c1}, {JobID: c2}}, res.Children)
	got := b.since(t, mark)
	requireEvents(t, []want{
		{Stream: "job/p1", Version: 3, Type: events.JobSucceeded,
			Data: `{"attempt":1,"kind":"ok","retryable":false,"exit_code":0,"duration_ms":2000,"stderr":"log line",
				"response":{"status":"ok","state_updates":{"b":"new","c":[1]}}}`,
			Meta: `{"correlation_id":"root-1","actor":"dispatcher"}`},
		{Stream: "plugin/echo", Version: 2, Type: events.PluginStateMerged,
			Data: `{"job_id":"p1","command":"poll","updates":{"b":"new","c":[1]},"state":{"a":1,"b":"new","c":[1]}}`,
			Meta: `{"correlation_id":"root-1","causation_id":"p1","actor":"echo"}`},
		{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased,
			Data: `{"job_id":"p1","status":"succeeded","completed_at":"2026-03-01T12:00:00Z"}`,
			Meta: `{"correlation_id":"root-1","actor":"dispatcher"}`},
		{Stream: events.JobStream(c1), Version: 1, Type: events.JobEnqueued, Data: childEnqueued(c1, "notify"), Meta: childMeta},
		{Stream: "dedupe/notify/handle/k", Version: 1, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, c1), Meta: childMeta},
		{Stream: events.JobStream(c2), Version: 1, Type: events.JobEnqueued, Data: childEnqueued(c2, "store"), Meta: childMeta},
		{Stream: "dedupe/store/handle/k", Version: 1, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, c2), Meta: childMeta},
	}, got)
	requireOneTransaction(t, res.Seqs, got)

	require.Equal(t, events.StatusSucceeded, b.fold(t, "p1").Status)
	for _, id := range []string{c1, c2} {
		j := b.fold(t, id)
		require.Equal(t, events.StatusQueued, j.Status)
		require.Equal(t, "root-1", j.Correlation)
		require.Equal(t, "p1", j.ParentJobID)
	}
}

// TestCompleteRootParentCorrelation: a root job's children carry the root's
// own id as correlation, whatever the child command said.
func TestCompleteRootParentCorrelation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("p1").started(1).events()...)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
		Children: []commands.Enqueue{child("notify", func(c *commands.Enqueue) {
			c.Correlation, c.ParentJobID, c.SubmittedBy, c.DedupeKey = "forged", "forged", events.ActorAPI, ""
		})}})
	require.NoError(t, err)
	j := b.fold(t, res.Children[0].JobID)
	require.Equal(t, "p1", j.Correlation)
	require.Equal(t, "p1", j.ParentJobID)
	require.Equal(t, events.ActorAPI, j.SubmittedBy, "a submitter given is kept; route is the default")
}

// TestCompleteChildrenDedupe: children with one target and key inside one
// decision, and against jobs already in the ledger.
func TestCompleteChildrenDedupe(t *testing.T) {
	t.Parallel()
	withTTL := func(c *commands.Enqueue) { c.DedupeTTL = time.Minute }

	t.Run("two children, one target, one key, an override: the second is a duplicate of the first", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.given(t, parent().events()...)
		mark := b.mark(t)
		res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
			Children: []commands.Enqueue{child("notify", withTTL), child("notify", withTTL), child("store", withTTL)}})
		require.NoError(t, err)
		c1, c3 := res.Children[0].JobID, res.Children[2].JobID
		require.Equal(t, []commands.EnqueueResult{{JobID: c1}, {Deduped: true, ExistingJobID: c1}, {JobID: c3}}, res.Children)
		got := b.since(t, mark)
		requireEvents(t, []want{
			{Stream: "job/p1", Version: 3, Type: events.JobSucceeded, Data: dataSucceeded1},
			{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased, Data: `{"job_id":"p1","status":"succeeded","completed_at":"2026-03-01T12:00:00Z"}`},
			{Stream: events.JobStream(c1), Version: 1, Type: events.JobEnqueued, Data: strings.Replace(childEnqueued(c1, "notify"), `"dedupe_key":"k"`, `"dedupe_key":"k","dedupe_ttl_ms":60000`, 1)},
			{Stream: "dedupe/notify/handle/k", Version: 1, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, c1)},
			{Stream: events.JobStream(c3), Version: 1, Type: events.JobEnqueued, Data: strings.Replace(childEnqueued(c3, "store"), `"dedupe_key":"k"`, `"dedupe_key":"k","dedupe_ttl_ms":60000`, 1)},
			{Stream: "dedupe/store/handle/k", Version: 1, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, c3)},
		}, got)
		requireOneTransaction(t, res.Seqs, got)
	})

	t.Run("two children, one target, one key, no override: both are enqueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.given(t, parent().events()...)
		mark := b.mark(t)
		res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
			Children: []commands.Enqueue{child("notify"), child("notify")}})
		require.NoError(t, err)
		c1, c2 := res.Children[0].JobID, res.Children[1].JobID
		require.Equal(t, []commands.EnqueueResult{{JobID: c1}, {JobID: c2}}, res.Children)
		got := b.since(t, mark)
		requireEvents(t, []want{
			{Stream: "job/p1", Version: 3, Type: events.JobSucceeded, Data: dataSucceeded1},
			{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased, Data: `{"job_id":"p1","status":"succeeded","completed_at":"2026-03-01T12:00:00Z"}`},
			{Stream: events.JobStream(c1), Version: 1, Type: events.JobEnqueued, Data: childEnqueued(c1, "notify")},
			{Stream: "dedupe/notify/handle/k", Version: 1, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, c1)},
			{Stream: events.JobStream(c2), Version: 1, Type: events.JobEnqueued, Data: childEnqueued(c2, "notify")},
			{Stream: "dedupe/notify/handle/k", Version: 2, Type: events.DedupeReserved, Data: fmt.Sprintf(`{"job_id":%q}`, c2)},
		}, got)
		requireOneTransaction(t, res.Seqs, got)
	})

	t.Run("a child whose target succeeded with the key within the window is a duplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.given(t, job("done", withKey("k"), target("notify", "handle")).started(1).endedAt(-time.Hour).succeeded(1).events()...)
		b.given(t, parent().events()...)
		mark := b.mark(t)
		res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
			Children: []commands.Enqueue{child("notify")}})
		require.NoError(t, err)
		require.Equal(t, []commands.EnqueueResult{{Deduped: true, ExistingJobID: "done"}}, res.Children)
		requireEvents(t, []want{
			{Stream: "job/p1", Version: 3, Type: events.JobSucceeded, Data: dataSucceeded1},
			{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased, Data: `{"job_id":"p1","status":"succeeded","completed_at":"2026-03-01T12:00:00Z"}`},
		}, b.since(t, mark))
	})
}

// TestCompleteBadChild: a child that is not a valid command fails the
// whole completion; nothing is appended and the job is still running.
func TestCompleteBadChild(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent().events()...)
	mark := b.mark(t)
	_, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now,
		Children: []commands.Enqueue{child("notify"), child("store", func(c *commands.Enqueue) { c.MaxAttempts = 0 })}})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	require.EqualError(t, err, "complete job: route to store handle: invalid command: max_attempts must be at least 1")
	require.Empty(t, b.since(t, mark))
	require.Equal(t, events.StatusRunning, b.fold(t, "p1").Status)
}

// TestCompletePreparedChildren: a completion prepares its children (off the
// writer's goroutine), routes the children it prepared, ids included, says
// which they were, and leaves the caller's slice of children as it was.
func TestCompletePreparedChildren(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent().events()...)
	given := []commands.Enqueue{child("notify"), child("store")}
	cmd := commands.Complete{JobID: "p1", Attempt: 1, Outcome: outOK, Now: now, Children: given}
	res, err := commands.CompleteJob(b.ctx, b.l, cmd)
	require.NoError(t, err)
	require.Empty(t, given[0].JobID, "the caller's children are not touched")
	require.Empty(t, given[1].JobID)
	require.Len(t, res.Enqueued, 2)
	ids := []string{res.Enqueued[0].JobID, res.Enqueued[1].JobID}
	require.NotEmpty(t, ids[0])
	require.NotEqual(t, ids[0], ids[1])
	require.Len(t, res.Children, 2)
	require.Equal(t, ids, []string{res.Children[0].JobID, res.Children[1].JobID})
	for i, id := range ids {
		j := b.fold(t, id)
		require.Equal(t, "p1", j.ParentJobID)
		require.Equal(t, given[i].Plugin, j.Plugin)
	}
	require.Empty(t, given[0].JobID)
}

// TestCompleteFailedRoutesNothing: children and state belong to a success.
func TestCompleteFailedRoutesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent().events()...)
	mark := b.mark(t)
	out := outFailed
	out.StateUpdates = raw(`{"a":1}`)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: out, Now: now,
		Jitter: fixedJitter(5 * time.Second), Children: []commands.Enqueue{child("notify")}})
	require.NoError(t, err)
	require.Empty(t, res.Children)
	requireEvents(t, []want{
		{Stream: "job/p1", Version: 3, Type: events.JobFailed, Data: dataFailed1},
		{Stream: "job/p1", Version: 4, Type: events.JobRetryScheduled, Data: dataRetry2},
	}, b.since(t, mark))
}

func TestCompleteState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prior   []ledger.NewEvent
		updates string
		facts   []commands.FactRule
		want    []want // on plugin/echo
	}{
		{name: "no prior state: the state is the updates", updates: `{"cursor":"a"}`,
			want: []want{{Stream: "plugin/echo", Version: 1, Type: events.PluginStateMerged,
				Data: `{"job_id":"p1","command":"poll","updates":{"cursor":"a"},"state":{"cursor":"a"}}`}}},
		{name: "a shallow merge over the prior state", prior: []ledger.NewEvent{priorState(`{"cursor":"a","seen":{"x":1},"keep":true}`)},
			updates: `{"cursor":"b","seen":{"y":2}}`,
			want: []want{{Stream: "plugin/echo", Version: 2, Type: events.PluginStateMerged,
				Data: `{"job_id":"p1","command":"poll","updates":{"cursor":"b","seen":{"y":2}},"state":{"cursor":"b","seen":{"y":2},"keep":true}}`}}},
		{name: "a null value is kept, not a deletion", prior: []ledger.NewEvent{priorState(`{"a":1,"b":2}`)}, updates: `{"a":null}`,
			want: []want{{Stream: "plugin/echo", Version: 2, Type: events.PluginStateMerged,
				Data: `{"job_id":"p1","command":"poll","updates":{"a":null},"state":{"a":null,"b":2}}`}}},
		{name: "a merge over a fact starts from the fact's snapshot",
			prior: []ledger.NewEvent{{Stream: "plugin/echo", ExpectedVersion: 0, Type: events.PluginFactRecorded,
				Data: events.FactRecorded{FactType: "cursor", JobID: "before", Command: "poll", Fact: raw(`{"cursor":"a","n":1}`), View: "mirror_object"}}},
			updates: `{"n":2}`,
			want: []want{{Stream: "plugin/echo", Version: 2, Type: events.PluginStateMerged,
				Data: `{"job_id":"p1","command":"poll","updates":{"n":2},"state":{"cursor":"a","n":2}}`}}},
		{name: "a fact rule records the snapshot instead of a merge", prior: []ledger.NewEvent{priorState(`{"old":true}`)},
			updates: `{"cursor":"b"}`, facts: []commands.FactRule{{FactType: "feed_cursor", View: "mirror_object"}},
			want: []want{{Stream: "plugin/echo", Version: 2, Type: events.PluginFactRecorded,
				Data: `{"fact_type":"feed_cursor","job_id":"p1","command":"poll","fact":{"cursor":"b"},"compatibility_view":"mirror_object"}`,
				Meta: `{"correlation_id":"root-1","causation_id":"p1","actor":"echo"}`}}},
		{name: "one fact per rule", updates: `{"cursor":"b"}`,
			facts: []commands.FactRule{{FactType: "feed_cursor", View: "mirror_object"}, {FactType: "audit", View: "mirror_object"}},
			want: []want{
				{Stream: "plugin/echo", Version: 1, Type: events.PluginFactRecorded,
					Data: `{"fact_type":"feed_cursor","job_id":"p1","command":"poll","fact":{"cursor":"b"},"compatibility_view":"mirror_object"}`},
				{Stream: "plugin/echo", Version: 2, Type: events.PluginFactRecorded,
					Data: `{"fact_type":"audit","job_id":"p1","command":"poll","fact":{"cursor":"b"},"compatibility_view":"mirror_object"}`},
			}},
		{name: "no updates: no state event", prior: []ledger.NewEvent{priorState(`{"a":1}`)}, updates: ``},
		{name: "null updates: no state event", prior: []ledger.NewEvent{priorState(`{"a":1}`)}, updates: `null`,
			facts: []commands.FactRule{{FactType: "feed_cursor", View: "mirror_object"}}},
		{name: "an empty object is a merge that changes nothing", prior: []ledger.NewEvent{priorState(`{"a":1}`)}, updates: `{}`,
			want: []want{{Stream: "plugin/echo", Version: 2, Type: events.PluginStateMerged,
				Data: `{"job_id":"p1","command":"poll","updates":{},"state":{"a":1}}`}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, parent().events()...)
			b.given(t, tc.prior...)
			mark := b.mark(t)
			out := outOK
			out.StateUpdates = raw(tc.updates)

			res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: out, Facts: tc.facts, Now: now})

			require.NoError(t, err)
			require.Equal(t, events.StatusSucceeded, res.Status)
			got := b.since(t, mark)
			requireOneTransaction(t, res.Seqs, got)
			expect := append([]want{{Stream: "job/p1", Version: 3, Type: events.JobSucceeded, Data: dataSucceeded1}}, tc.want...)
			expect = append(expect, want{Stream: "dedupe/echo/poll/k", Version: 2, Type: events.DedupeReleased,
				Data: `{"job_id":"p1","status":"succeeded","completed_at":"2026-03-01T12:00:00Z"}`})
			requireEvents(t, expect, got)
		})
	}
}

// TestCompleteBadState: state the plugin cannot have fails the attempt (and
// it is retried): no state, no children, the key is still held.
func TestCompleteBadState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		prior    string
		updates  string
		facts    []commands.FactRule
		kind     events.Outcome
		errorMsg string // exact, or a prefix when ending in "…"
	}{
		{name: "the merged state is over the limit", prior: `{"blob":"` + strings.Repeat("x", 80) + `"}`, updates: `{"more":"` + strings.Repeat("y", 10) + `"}`,
			kind: events.OutcomeStateTooLarge, errorMsg: "state update exceeds the …"},
		{name: "a fact over the limit", updates: `{"blob":"` + strings.Repeat("x", 100) + `"}`, facts: []commands.FactRule{{FactType: "f", View: "mirror_object"}},
			kind: events.OutcomeStateTooLarge, errorMsg: "state update exceeds the …"},
		{name: "an array", updates: `[1,2]`, kind: events.OutcomeBadState,
			errorMsg: "state_updates must be a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
		{name: "a string", updates: `"s"`, kind: events.OutcomeBadState,
			errorMsg: "state_updates must be a JSON object: json: cannot unmarshal string into Go value of type map[string]json.RawMessage"},
		{name: "an array with a fact rule", updates: `[1]`, facts: []commands.FactRule{{FactType: "f", View: "mirror_object"}}, kind: events.OutcomeBadState,
			errorMsg: "state_updates must be a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, parent().events()...)
			if tc.prior != "" {
				b.given(t, priorState(tc.prior))
			}
			mark := b.mark(t)
			out := outOK
			out.StateUpdates = raw(tc.updates)

			res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: out, Facts: tc.facts,
				MaxStateBytes: 100, Jitter: fixedJitter(5 * time.Second), Now: now, Children: []commands.Enqueue{child("notify")}})

			require.NoError(t, err)
			require.Equal(t, events.StatusQueued, res.Status)
			require.Equal(t, tc.kind, res.Kind)
			require.Equal(t, now.Add(35*time.Second), res.NextRetryAt)
			require.Empty(t, res.Children)
			got := b.since(t, mark)
			requireOneTransaction(t, res.Seqs, got)
			require.Len(t, got, 2, describe(got))
			var ended events.AttemptEnded
			require.NoError(t, json.Unmarshal(got[0].Data, &ended))
			if prefix, ok := strings.CutSuffix(tc.errorMsg, "…"); ok {
				require.True(t, strings.HasPrefix(ended.Error, prefix), ended.Error)
				ended.Error = ""
				got[0].Data, _ = json.Marshal(ended)
			}
			wantErr := tc.errorMsg
			if strings.HasSuffix(wantErr, "…") {
				wantErr = ""
			}
			requireEvents(t, []want{
				{Stream: "job/p1", Version: 3, Type: events.JobFailed,
					Data: fmt.Sprintf(`{"attempt":1,"kind":%q,"retryable":true,"exit_code":0,"duration_ms":2000%s}`, tc.kind, errField(wantErr))},
				{Stream: "job/p1", Version: 4, Type: events.JobRetryScheduled, Data: dataRetry2},
			}, got)
			j := b.fold(t, "p1")
			require.Equal(t, events.StatusQueued, j.Status)
			require.Equal(t, 2, j.Attempt)
		})
	}
}

func errField(msg string) string {
	if msg == "" {
		return ""
	}
	b, _ := json.Marshal(msg)
	return `,"error":` + string(b)
}

// TestCompleteStateTooLargeOnTheLastAttempt: then the job is dead and the
// key released, still with no state and no children.
func TestCompleteStateTooLargeOnTheLastAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, parent(withMaxAttempts(1)).events()...)
	mark := b.mark(t)
	out := outOK
	out.StateUpdates = raw(`{"blob":"` + strings.Repeat("x", 200) + `"}`)
	res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: out, MaxStateBytes: 100, Now: now,
		Children: []commands.Enqueue{child("notify")}})
	require.NoError(t, err)
	require.Equal(t, events.StatusDead, res.Status)
	require.Equal(t, events.OutcomeStateTooLarge, res.Kind)
	got := b.since(t, mark)
	require.Len(t, got, 3, describe(got))
	require.Equal(t, []string{events.JobFailed, events.JobDead, events.DedupeReleased}, []string{got[0].Type, got[1].Type, got[2].Type})
	require.JSONEq(t, `{"job_id":"p1","status":"dead","completed_at":"2026-03-01T12:00:00Z"}`, string(got[2].Data))
}

// TestCompleteDefaultStateLimit: without MaxStateBytes the limit is 1 MiB.
func TestCompleteDefaultStateLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		size int
		kind events.Outcome
	}{{commands.DefaultMaxStateBytes, events.OutcomeOK}, {commands.DefaultMaxStateBytes + 1, events.OutcomeStateTooLarge}} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.given(t, parent().events()...)
			out := outOK
			// {"b":"…"} is 8 bytes of frame around the string.
			out.StateUpdates = raw(`{"b":"` + strings.Repeat("x", tc.size-8) + `"}`)
			res, err := commands.CompleteJob(b.ctx, b.l, commands.Complete{JobID: "p1", Attempt: 1, Outcome: out, Jitter: fixedJitter(0), Now: now})
			require.NoError(t, err)
			require.Equal(t, tc.kind, res.Kind)
		})
	}
}

// The job a start returns is exactly what its stream folds to once the
// start is in, fresh or after a retry; so a completion may start from it.
func TestStartedJobIsTheFoldedJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.given(t, job("fresh").events()...)
	b.given(t, job("again").started(1).failed(1, "boom").retry(2, at(-time.Minute)).events()...)
	for _, id := range []string{"fresh", "again"} {
		st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, Now: now})
		require.NoError(t, err)
		require.Equal(t, b.fold(t, id), st.Job, id)
	}
}

// A start carries the plugin's state as its newest state event stored it:
// {} before any, the merged state, or the latest fact.
func TestStartCarriesThePluginState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := func(id string) string {
		t.Helper()
		b.given(t, job(id).events()...)
		st, err := commands.StartJob(b.ctx, b.l, commands.Start{JobID: id, Timeout: time.Minute, Now: now})
		require.NoError(t, err)
		return string(st.State)
	}
	require.Equal(t, `{}`, start("none"))
	b.given(t, priorState(`{"b":2,"a":{"x":[1]}}`))
	require.JSONEq(t, `{"a":{"x":[1]},"b":2}`, start("merged"))
	b.given(t, ledger.NewEvent{Stream: events.PluginStream("echo"), ExpectedVersion: 1, Type: events.PluginFactRecorded,
		Data: events.FactRecorded{FactType: "echo.snapshot", JobID: "before", Command: "poll", Fact: raw(`{"cursor":"c"}`), View: "mirror_object"}})
	require.JSONEq(t, `{"cursor":"c"}`, start("fact"))
}
