package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/config"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/projections"
	"github.com/ductile/ductile/queries"
	"github.com/ductile/ductile/views"
)

// topicBundle is an Engine on a real ledger with a running projector and
// a Fleet on a test clock that starts at the real time (so views, which
// judge claims by the real clock, agree with it until a test moves it).
type topicBundle struct {
	ctx   context.Context
	l     *ledger.Ledger
	p     *projections.Projector
	eng   *engine.Engine
	clock *clock
}

func setupTopics(t testing.TB, topics map[string]config.TopicConfig) *topicBundle {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, filepath.Join(t.TempDir(), "ductile.db"), ledger.Options{Synchronous: "NORMAL"})
	require.NoError(t, err)
	p := projections.New(l, projections.Options{})
	p.Start(ctx)
	t.Cleanup(func() {
		p.Stop()
		require.NoError(t, l.Close())
	})
	cfg := config.Default()
	cfg.Topics = topics
	c := &clock{t: time.Now().UTC()}
	fleet := engine.NewFleet(engine.FleetOptions{LeasePeriod: leasePeriod, Now: c.Now})
	fleet.Watch(p)
	return &topicBundle{ctx: ctx, l: l, p: p, eng: engine.New(engine.Options{Ledger: l, Config: cfg, Fleet: fleet}), clock: c}
}

func (b *topicBundle) publish(t testing.TB, topic, body, parent string) events.Message {
	t.Helper()
	m, err := b.eng.Publish(b.ctx, engine.Publish{Topic: topic, Body: body, ParentID: parent, Producer: "test"})
	require.NoError(t, err)
	return m
}

func (b *topicBundle) claim(t testing.TB, topic, group, worker string) *engine.ClaimedMessage {
	t.Helper()
	c, err := b.eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: topic, Group: group, Worker: worker})
	require.NoError(t, err)
	return c
}

func fenceOf(c *engine.ClaimedMessage) engine.MessageFence {
	return engine.MessageFence{Group: c.Group, Worker: c.Worker, Fence: c.Fence}
}

// eventsOf is every event of type typ in the ledger.
func (b *topicBundle) eventsOf(t testing.TB, typ string) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	_, err := b.l.ReadFrom(b.ctx, 0, 100_000, ledger.Filter{Type: typ}, func(ev ledger.Event) error {
		out = append(out, ev)
		return nil
	})
	require.NoError(t, err)
	return out
}

func (b *topicBundle) read(t testing.TB, f views.MessageFilter) []views.MessageRecord {
	t.Helper()
	page, err := views.ReadMessages(b.ctx, b.l, f)
	require.NoError(t, err)
	return page.Messages
}

func TestPublishAndFollowUpsThreadAConversationOverThreeHops(t *testing.T) {
	b := setupTopics(t, nil)
	root, err := b.eng.Publish(b.ctx, engine.Publish{Topic: "summarize.request", Body: "a long text", Producer: "me",
		Metadata: []byte(`{"lang": "en"}`)})
	require.NoError(t, err)
	require.Equal(t, root.ID, root.ConversationID, "a message with no parent and no conversation starts its own")
	require.JSONEq(t, `{"lang":"en"}`, string(root.Metadata))

	topics := []string{"summarize.request", "translate.request", "review.request", "review.done"}
	last := root
	for hop := 0; hop < 3; hop++ {
		c := b.claim(t, topics[hop], "", "w1")
		require.NotNil(t, c)
		require.Equal(t, last.ID, c.Message.ID)
		require.Equal(t, events.DefaultGroup, c.Group)
		f, err := b.eng.FinishMessage(b.ctx, c.Message.ID, fenceOf(c), engine.FollowUp{Status: "completed", Topic: topics[hop+1],
			Body: fmt.Sprintf("hop %d", hop+1)})
		require.NoError(t, err)
		require.Equal(t, last.ID, f.ParentID)
		require.Equal(t, root.ID, f.ConversationID, "a follow-up keeps the conversation")
		require.JSONEq(t, `{"lang":"en"}`, string(f.Metadata), "a follow-up without metadata keeps the message's")
		require.Equal(t, events.DefaultGroup, f.Producer)
		last = f
	}
	thread := b.read(t, views.MessageFilter{Conversation: root.ID})
	require.Len(t, thread, 4)
	for i, m := range thread {
		require.Equal(t, topics[i], m.Topic)
		if i > 0 {
			require.Equal(t, thread[i-1].ID, m.ParentID)
			require.Greater(t, m.Seq, thread[i-1].Seq)
		}
	}
	// A publisher's own follow-up (parent given, no conversation) inherits.
	reply := b.publish(t, "note", "by hand", last.ID)
	require.Equal(t, root.ID, reply.ConversationID)

	check, err := views.CheckConversation(b.ctx, b.l, root.ID, "review.done", "review.failed")
	require.NoError(t, err)
	require.Equal(t, views.ConversationSuccess, check.State)
	require.Equal(t, last.ID, check.Reply.ID)
	check, err = views.CheckConversation(b.ctx, b.l, root.ID, "other.done", "other.failed")
	require.NoError(t, err)
	require.Equal(t, views.ConversationPending, check.State)

	// Paging: after a message, a limit; Next names the last of a full page.
	page, err := views.ReadMessages(b.ctx, b.l, views.MessageFilter{Conversation: root.ID, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Messages, 2)
	rest := b.read(t, views.MessageFilter{Conversation: root.ID, After: page.Next})
	require.Len(t, rest, 3)
	require.Equal(t, thread[2].ID, rest[0].ID)

	inspected, err := views.InspectConversation(b.ctx, b.l, root.ID)
	require.NoError(t, err)
	require.Len(t, inspected.Messages, 5)
	require.Len(t, inspected.Messages[0].Claims, 1)
	require.Equal(t, views.ClaimTerminal, inspected.Messages[0].Claims[0].State)
	require.Equal(t, "completed", inspected.Messages[0].Claims[0].Status)
	require.Equal(t, inspected.Messages[1].ID, inspected.Messages[0].Claims[0].FollowUpID)
}

func TestPublishRefusesWhatTheExchangeCannotKeep(t *testing.T) {
	b := setupTopics(t, nil)
	_, err := b.eng.Publish(b.ctx, engine.Publish{Topic: "t", Body: "x", ParentID: "0193a1b2-0000-7000-8000-00000000dead"})
	require.ErrorIs(t, err, commands.ErrMessageNotFound, "an unknown parent is not_found")
	for name, p := range map[string]engine.Publish{
		"topic":          {Topic: "no spaces", Body: "x"},
		"empty topic":    {Topic: "", Body: "x"},
		"body":           {Topic: "t", Body: string(make([]byte, events.MaxMessageBody+1))},
		"metadata array": {Topic: "t", Metadata: []byte(`[1]`)},
		"metadata json":  {Topic: "t", Metadata: []byte(`{`)},
	} {
		_, err := b.eng.Publish(b.ctx, p)
		require.ErrorIs(t, err, commands.ErrInvalidCommand, name)
	}
	dry, err := b.eng.Publish(b.ctx, engine.Publish{Topic: "t", Body: "x", DryRun: true})
	require.NoError(t, err)
	require.NotEmpty(t, dry.ID)
	require.Empty(t, b.eventsOf(t, events.MessagePublished), "nothing was recorded")
}

func TestClaimIsFIFOPerTopicPerGroup(t *testing.T) {
	b := setupTopics(t, nil)
	var ids []string
	for i := range 5 {
		ids = append(ids, b.publish(t, "jobs", fmt.Sprint(i), "").ID)
		b.publish(t, "other", fmt.Sprint(i), "")
	}
	for _, group := range []string{"a", "b"} {
		for _, want := range ids {
			c := b.claim(t, "jobs", group, "w")
			require.NotNil(t, c)
			require.Equal(t, want, c.Message.ID, "group %s claims in seq order", group)
		}
		require.Nil(t, b.claim(t, "jobs", group, "w"), "group %s had every message once", group)
	}
}

func TestClaimsRacingClaimEachMessageOncePerGroup(t *testing.T) {
	b := setupTopics(t, nil)
	const messages, workers = 200, 8
	for i := range messages {
		b.publish(t, "work", fmt.Sprint(i), "")
	}
	var mu sync.Mutex
	claims := map[string]map[string]int{"g1": {}, "g2": {}}
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers)
	for _, group := range []string{"g1", "g2"} {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := b.eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "work", Group: group, Worker: fmt.Sprintf("%s-%d", group, w)})
					if err != nil || c == nil {
						errs <- err
						return
					}
					mu.Lock()
					claims[group][c.Message.ID]++
					mu.Unlock()
					if _, err := b.eng.FinishMessage(b.ctx, c.Message.ID, fenceOf(c), engine.FollowUp{Status: "completed"}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for group, got := range claims {
		require.Len(t, got, messages, "group %s claimed every message", group)
		for id, n := range got {
			require.Equal(t, 1, n, "group %s claimed %s once", group, id)
		}
	}
	require.Len(t, b.eventsOf(t, events.MessageClaimed), 2*messages)

	// Each group's cursor stands past the last message: a claim reads
	// from there, not from the topic's first message.
	last := b.read(t, views.MessageFilter{Topic: "work", Limit: views.MaxMessageLimit})[messages-1]
	require.NoError(t, b.l.ReadSnapshot(b.ctx, func(conn *sqlite.Conn) error {
		for _, group := range []string{"g1", "g2"} {
			cursor, err := queries.TopicCursor(conn, queries.TopicCursorParams{Topic: "work", WorkerGroup: group})
			require.NoError(t, err)
			require.Equal(t, last.Seq, cursor, "group %s", group)
		}
		return nil
	}))
}

func TestAStaleFenceIsSupersededAndNotApplied(t *testing.T) {
	b := setupTopics(t, nil)
	m := b.publish(t, "work", "x", "")
	first := b.claim(t, "work", "", "w1")
	require.NotNil(t, first)
	b.clock.add(leasePeriod + config.DefaultTopicBackoff) // the lease ran out and its backoff passed
	second := b.claim(t, "work", "", "w2")
	require.NotNil(t, second)
	require.Equal(t, m.ID, second.Message.ID)
	require.Greater(t, second.Fence, first.Fence, "a claim again has a larger fence")
	require.Equal(t, 2, second.Attempt)

	_, err := b.eng.RenewMessage(b.ctx, m.ID, fenceOf(first), 0)
	require.ErrorIs(t, err, commands.ErrStaleFence)
	_, err = b.eng.FinishMessage(b.ctx, m.ID, fenceOf(first), engine.FollowUp{Status: "completed", Topic: "done", Body: "late"})
	require.ErrorIs(t, err, commands.ErrStaleFence)
	superseded := b.eventsOf(t, events.MessageSuperseded)
	require.Len(t, superseded, 2)
	require.JSONEq(t, fmt.Sprintf(`{"refused":"finish","group":"default","worker":"w1","fence":%d,"current_fence":%d}`, first.Fence, second.Fence),
		string(superseded[1].Data))
	require.Empty(t, b.read(t, views.MessageFilter{Topic: "done"}), "the late finish published nothing")

	f, err := b.eng.FinishMessage(b.ctx, m.ID, fenceOf(second), engine.FollowUp{Status: "failed", Topic: "failed", Body: "boom"})
	require.NoError(t, err)
	require.Equal(t, "failed", f.Topic)
	_, err = b.eng.FinishMessage(b.ctx, m.ID, fenceOf(second), engine.FollowUp{Status: "failed", Topic: "failed", Body: "again"})
	require.ErrorIs(t, err, commands.ErrStaleFence, "a claim ends once")
	require.Len(t, b.read(t, views.MessageFilter{Topic: "failed"}), 1)
}

func TestAnExpiredClaimIsClaimedAgainAfterItsBackoff(t *testing.T) {
	b := setupTopics(t, map[string]config.TopicConfig{"work": {MaxAttempts: 5, Backoff: 2 * time.Second}})
	m := b.publish(t, "work", "x", "")
	first := b.claim(t, "work", "", "w1")
	require.NotNil(t, first)
	until, err := b.eng.RenewMessage(b.ctx, m.ID, fenceOf(first), 0)
	require.NoError(t, err)
	require.Equal(t, first.LeaseUntil, until, "a renewal within a third of the lease is coalesced")
	require.Empty(t, b.eventsOf(t, events.MessageLeaseRenewed))
	b.clock.add(leasePeriod / 2)
	until, err = b.eng.RenewMessage(b.ctx, m.ID, fenceOf(first), 0)
	require.NoError(t, err)
	require.Equal(t, b.clock.Now().Add(leasePeriod), until)
	require.Len(t, b.eventsOf(t, events.MessageLeaseRenewed), 1)

	b.clock.add(leasePeriod) // the renewed lease ran out
	require.Nil(t, b.claim(t, "work", "", "w2"), "not before the backoff (2s)")
	inspected, err := views.InspectMessage(b.ctx, b.l, m.ID)
	require.NoError(t, err)
	require.Equal(t, views.ClaimLiveActive, inspected.Claims[0].State, "the views judge by the real clock")

	// The sweeper records the expiry; the claim after the backoff is attempt 2.
	next, err := b.eng.SweepMessages(b.ctx, b.clock.Now())
	require.NoError(t, err)
	require.True(t, next.IsZero(), "no claim is active")
	inspected, err = views.InspectMessage(b.ctx, b.l, m.ID)
	require.NoError(t, err)
	require.Equal(t, "expired", inspected.Claims[0].Status)
	require.Equal(t, views.ClaimTerminal, inspected.Claims[0].State)
	b.clock.add(2 * time.Second)
	again := b.claim(t, "work", "", "w2")
	require.NotNil(t, again)
	require.Equal(t, 2, again.Attempt)
	require.Greater(t, again.Fence, first.Fence)

	// The second expiry waits twice as long (4s), with no sweeper.
	b.clock.add(leasePeriod + 3*time.Second)
	require.Nil(t, b.claim(t, "work", "", "w3"))
	b.clock.add(time.Second)
	third := b.claim(t, "work", "", "w3")
	require.NotNil(t, third)
	require.Equal(t, 3, third.Attempt)
	next, err = b.eng.SweepMessages(b.ctx, b.clock.Now())
	require.NoError(t, err)
	require.Equal(t, third.LeaseUntil, next, "the sweeper's next look is the earliest lease ahead")
}

func TestUsedUpAttemptsGoToExactlyOneDeadLetter(t *testing.T) {
	b := setupTopics(t, map[string]config.TopicConfig{"work": {MaxAttempts: 2, Backoff: time.Second}})
	m := b.publish(t, "work", "payload", "")
	require.NotNil(t, b.claim(t, "work", "", "w1"))
	b.clock.add(leasePeriod + time.Second)
	require.NotNil(t, b.claim(t, "work", "", "w2"))
	b.clock.add(leasePeriod)
	// The sweeper and eight claims race for the last expiry.
	var wg sync.WaitGroup
	errs := make(chan error, 9)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := b.eng.SweepMessages(b.ctx, b.clock.Now())
		errs <- err
	}()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := b.eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "work", Worker: fmt.Sprint("w", w)})
			if err == nil && c != nil {
				err = errors.New("a message whose attempts are used up was claimed")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	dead := b.read(t, views.MessageFilter{Topic: "work.dead"})
	require.Len(t, dead, 1)
	require.Equal(t, m.ID, dead[0].ParentID)
	require.Equal(t, "payload", dead[0].Body)
	require.Equal(t, m.ID, dead[0].ConversationID)
	require.Nil(t, b.claim(t, "work", "", "w9"), "the group is done with it")
	ends := b.eventsOf(t, events.MessageClaimEnded)
	require.Len(t, ends, 1)
	require.Contains(t, string(ends[0].Data), `"status":"expired"`)
	require.Contains(t, string(ends[0].Data), dead[0].ID)
}

func TestFinishRacingPublishesOneFollowUp(t *testing.T) {
	b := setupTopics(t, nil)
	m := b.publish(t, "work", "x", "")
	c := b.claim(t, "work", "", "w1")
	require.NotNil(t, c)
	var wg sync.WaitGroup
	results := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.eng.FinishMessage(b.ctx, m.ID, fenceOf(c), engine.FollowUp{Status: "completed", Topic: "done", Body: "ok"})
			results <- err
		}()
	}
	wg.Wait()
	close(results)
	ok, stale := 0, 0
	for err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, commands.ErrStaleFence):
			stale++
		default:
			require.NoError(t, err)
		}
	}
	require.Equal(t, 1, ok)
	require.Equal(t, 7, stale)
	require.Len(t, b.read(t, views.MessageFilter{Topic: "done"}), 1)
}

func TestAWaitingClaimIsWokenByAPublish(t *testing.T) {
	b := setupTopics(t, nil)
	got := make(chan *engine.ClaimedMessage, 1)
	errs := make(chan error, 1)
	start := time.Now()
	go func() {
		c, err := b.eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "work", Worker: "w", Wait: 30 * time.Second})
		errs <- err
		got <- c
	}()
	m := b.publish(t, "work", "x", "")
	require.NoError(t, <-errs)
	c := <-got
	require.NotNil(t, c, "the claim got the message published while it waited (else it ends empty after 30s)")
	require.Equal(t, m.ID, c.Message.ID)
	t.Logf("claimed %s after the claim began", time.Since(start))

	// A wait with nothing coming ends empty at its limit; a canceled one at once.
	c, err := b.eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "work", Worker: "w", Wait: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Nil(t, c)
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, err = b.eng.ClaimMessage(ctx, engine.MessageClaimRequest{Topic: "work", Worker: "w", Wait: time.Minute})
	require.ErrorIs(t, err, context.Canceled)
}

func TestReplayOfTopicsIsExact(t *testing.T) {
	b := setupTopics(t, map[string]config.TopicConfig{"work": {MaxAttempts: 1, Backoff: time.Second}})
	for i := range 20 {
		b.publish(t, "work", fmt.Sprint(i), "")
	}
	for i := range 20 {
		c := b.claim(t, "work", "g", "w")
		require.NotNil(t, c)
		switch i % 3 {
		case 0:
			_, err := b.eng.FinishMessage(b.ctx, c.Message.ID, fenceOf(c), engine.FollowUp{Status: "completed", Topic: "done", Body: "ok"})
			require.NoError(t, err)
		case 1:
			_, err := b.eng.RenewMessage(b.ctx, c.Message.ID, fenceOf(c), time.Hour)
			require.NoError(t, err)
		}
	}
	b.clock.add(2 * leasePeriod)
	_, err := b.eng.SweepMessages(b.ctx, b.clock.Now())
	require.NoError(t, err)
	head, err := b.l.LastSeq(b.ctx)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, b.p.WaitFor(ctx, head))
	b.p.Stop()
	var before, after strings.Builder
	_, err = projections.Dump(b.ctx, b.l, &before)
	require.NoError(t, err)
	_, err = projections.Rebuild(b.ctx, b.l, 0)
	require.NoError(t, err)
	_, err = projections.Dump(b.ctx, b.l, &after)
	require.NoError(t, err)
	require.Contains(t, before.String(), `"WorkerGroup":"g"`)
	require.Equal(t, before.String(), after.String())
}

// TestAWaitingClaimSeesAnotherProcesssPublish opens a second ledger on the
// file, as another process does: a CLI beside a daemon that publishes with
// no projector of its own. A claim waiting in the daemon (its projector
// applies the other process's append) and one waiting in a third process
// with no projector (it follows the daemon's projections through the
// file's watcher) are both woken, with no sleep loop.
func TestAWaitingClaimSeesAnotherProcesssPublish(t *testing.T) {
	b := setupTopics(t, nil)
	open := func() *ledger.Ledger {
		l, err := ledger.Open(b.ctx, b.l.Path(), ledger.Options{Synchronous: "NORMAL"})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, l.Close()) })
		return l
	}
	publisher, beside := open(), open()
	besideEngine := engine.New(engine.Options{Ledger: beside, Config: config.Default(),
		Fleet: engine.NewFleet(engine.FleetOptions{Now: b.clock.Now})})

	type claimed struct {
		c   *engine.ClaimedMessage
		err error
	}
	inDaemon, inCLI := make(chan claimed, 1), make(chan claimed, 1)
	start := time.Now()
	go func() {
		c, err := b.eng.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "work", Group: "daemon", Worker: "d", Wait: 30 * time.Second})
		inDaemon <- claimed{c, err}
	}()
	go func() {
		c, err := besideEngine.ClaimMessage(b.ctx, engine.MessageClaimRequest{Topic: "work", Group: "cli", Worker: "c", Wait: 30 * time.Second})
		inCLI <- claimed{c, err}
	}()
	m, err := commands.PublishMessage(b.ctx, publisher, commands.Publish{Topic: "work", Body: "from afar", Now: time.Now()})
	require.NoError(t, err)
	for name, ch := range map[string]chan claimed{"daemon": inDaemon, "cli": inCLI} {
		got := <-ch
		require.NoError(t, got.err, name)
		require.NotNil(t, got.c, name)
		require.Equal(t, m.ID, got.c.Message.ID, name)
	}
	t.Logf("both claims woken %s after they began waiting", time.Since(start))
}
