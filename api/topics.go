package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ductile/ductile/auth"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// The topic exchange's routes (issue 24, docs/topics-cli.md): publish,
// read, check and inspect under topics:ro / topics:rw; claim, renew and
// finish for topic workers under the worker scope.

// topicWorkerDescription is what every topic worker operation says.
const topicWorkerDescription = "A route of topic workers (ductile worker --topic T … -- CMD --api URL; docs/topics-cli.md), scope worker. " +
	"A claim gives the message under a lease and a fence; the renewal and the finish carry the group, the worker and that fence. A fence that " +
	"no longer holds the claim (the lease expired and another worker claimed the message) is refused with 409 code stale_fence, recorded as " +
	"message.superseded and never applied: the worker drops the message. "

// TopicObserver counts what the topic routes do: the series
// ductile_topic_messages_published_total and ductile_topic_claims_total of
// /metrics (metrics.Metrics).
type TopicObserver interface {
	TopicPublished(topic string)
	// TopicClaim counts a claim (status claimed), a finish (its status) or
	// a refused request (superseded) of a message of topic.
	TopicClaim(topic, status string)
}

// registerTopics adds the topic routes.
func (s *Server) registerTopics() {
	maxBody := s.opts.Settings.MaxBodySize + 1
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "publish-message", Method: http.MethodPost, Path: "/topics/{topic}/messages", Summary: "Publish a message to a topic",
		Description: "Records message.published and answers with the message once it is durable. conversation_id defaults to the parent's " +
			"(parent_id given) or the message's own id; an unknown parent is 404. Caps: body 1 MiB, metadata (a JSON object) 16 KiB, topic " +
			"name [A-Za-z0-9._:-]{1,200}. dry_run checks and builds the message without recording it.",
		DefaultStatus: http.StatusCreated, MaxBodyBytes: maxBody,
		Errors: []int{http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge},
	}, auth.TopicsRW), s.handlePublishMessage)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "list-messages", Method: http.MethodGet, Path: "/messages", Summary: "Messages of a topic or a conversation, oldest first",
		Description: "Give topic or conversation. after (a message id) starts after it; next in the answer is the after of the next page " +
			"(absent: this page is the last one now).",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.TopicsRO), s.handleListMessages)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "inspect-message", Method: http.MethodGet, Path: "/messages/{id}", Summary: "A message with every claim of it and the claims' states",
		Description: "Claim states: live_active (active, its lease holds), expired_active (active, its lease ran out: claimable again), terminal.",
		Errors:      []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.TopicsRO), s.handleInspectMessage)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "inspect-conversation", Method: http.MethodGet, Path: "/conversations/{id}", Summary: "A conversation's messages, each with its claims",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.TopicsRO), s.handleInspectConversation)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "check-conversation", Method: http.MethodGet, Path: "/conversations/{id}/check", Summary: "Whether a conversation has its reply yet",
		Description: "state pending, success (a message on success_topic in the conversation) or failure (on failure_topic, or on " +
			"<topic>.timed_out of one of its messages); reply is the first such message.",
		Errors: []int{http.StatusBadRequest, http.StatusNotFound},
	}, auth.TopicsRO), s.handleCheckConversation)

	messageErrors := []int{http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge}
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "claim-message", Method: http.MethodPost, Path: "/worker/topics/{topic}/claim", Summary: "Claim a topic's oldest claimable message under a lease, waiting for one",
		Description: topicWorkerDescription + "Gives the group's oldest claimable message of the topic (FIFO by ledger seq): 200 with the claim. " +
			"With none, it waits up to wait_ms (at most 60 s), woken as soon as one is published or a lease expires, then answers 204 " +
			"(at once when the daemon begins to stop).",
		MaxBodyBytes: maxBody, Middlewares: huma.Middlewares{s.liftClaimDeadline},
		Errors: []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge},
	}, auth.Worker), s.handleClaimMessage)
	claim := s.api.OpenAPI().Paths["/worker/topics/{topic}/claim"].Post
	claim.Responses["204"] = &huma.Response{Description: "No message came within wait_ms: claim again"}
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "renew-message-lease", Method: http.MethodPost, Path: "/worker/messages/{id}/renew", Summary: "Renew the lease on a claimed message",
		Description:  topicWorkerDescription + "Extends the lease by lease_ms from now (recorded at most once per third of the lease).",
		MaxBodyBytes: maxBody, Errors: messageErrors,
	}, auth.Worker), s.handleRenewMessage)
	huma.Register(s.api, secured(huma.Operation{
		OperationID: "finish-message", Method: http.MethodPost, Path: "/worker/messages/{id}/finish", Summary: "End a claim and publish its follow-up",
		Description: topicWorkerDescription + "Ends the claim with status (completed, failed or timed_out) and publishes the follow-up to topic " +
			"with body, keeping the message's conversation (its parent is the claimed message), in one append: a follow-up is never published " +
			"twice. metadata absent: the claimed message's is kept.",
		MaxBodyBytes: maxBody, Errors: messageErrors,
	}, auth.Worker), s.handleFinishMessage)
}

// countTopic counts with the observer, if any.
func (s *Server) countTopic(fn func(TopicObserver)) {
	if s.opts.Topics != nil {
		fn(s.opts.Topics)
	}
}

// topicOf is the topic of message id, for a count ("" if unknown).
func (s *Server) topicOf(ctx context.Context, id string) string {
	ev, ok, err := s.opts.Ledger.ReadStreamVersion(ctx, events.MessageStream(id), 1)
	if err != nil || !ok {
		return ""
	}
	var m events.Message
	_ = json.Unmarshal(ev.Data, &m)
	return m.Topic
}

// PublishInput is POST /topics/{topic}/messages's request.
type PublishInput struct {
	Topic string `path:"topic" minLength:"1" maxLength:"200" pattern:"^[A-Za-z0-9._:-]+$" doc:"A topic name: [A-Za-z0-9._:-]{1,200}"`
	Body  struct {
		Body           string          `json:"body,omitempty" maxLength:"1048576" doc:"The message's body (at most 1 MiB; default empty)"`
		ParentID       string          `json:"parent_id,omitempty" maxLength:"64" doc:"The message this one follows up"`
		ConversationID string          `json:"conversation_id,omitempty" maxLength:"64" doc:"Default: the parent's, else the message's own id"`
		Producer       string          `json:"producer,omitempty" maxLength:"256" doc:"Who publishes it (default: api)"`
		Metadata       json.RawMessage `json:"metadata,omitempty" doc:"A JSON object (at most 16 KiB)"`
		DryRun         bool            `json:"dry_run,omitempty" doc:"Check and build the message; record nothing"`
	}
}

// MessageAnswer is a message.
type MessageAnswer struct {
	Body events.Message
}

func (s *Server) handlePublishMessage(ctx context.Context, in *PublishInput) (*MessageAnswer, error) {
	b := in.Body
	if b.Producer == "" {
		b.Producer = string(events.ActorAPI)
	}
	m, err := s.opts.Engine().Publish(ctx, engine.Publish{Topic: in.Topic, Body: b.Body, ParentID: b.ParentID, ConversationID: b.ConversationID,
		Producer: b.Producer, Metadata: b.Metadata, DryRun: b.DryRun})
	if err != nil {
		return nil, topicErrorOf(err)
	}
	if !b.DryRun {
		s.countTopic(func(o TopicObserver) { o.TopicPublished(m.Topic) })
	}
	return &MessageAnswer{Body: m}, nil
}

// ListMessagesInput is GET /messages's query.
type ListMessagesInput struct {
	Topic        string `query:"topic" maxLength:"200" doc:"The messages of this topic"`
	Conversation string `query:"conversation" maxLength:"64" doc:"The messages of this conversation"`
	After        string `query:"after" maxLength:"64" doc:"Start after this message id (the previous page's next)"`
	Limit        int    `query:"limit" minimum:"0" maximum:"1000" doc:"At most this many (0: 100)"`
}

// MessagesAnswer is a page of messages.
type MessagesAnswer struct {
	Body views.MessagePage
}

func (s *Server) handleListMessages(ctx context.Context, in *ListMessagesInput) (*MessagesAnswer, error) {
	if (in.Topic == "") == (in.Conversation == "") {
		return nil, newError(http.StatusBadRequest, "give topic=T or conversation=ID", "give one of topic and conversation")
	}
	page, err := views.ReadMessages(ctx, s.opts.Ledger, views.MessageFilter{Topic: in.Topic, Conversation: in.Conversation, After: in.After, Limit: in.Limit})
	if err != nil {
		return nil, topicErrorOf(err)
	}
	if page.Messages == nil {
		page.Messages = []views.MessageRecord{}
	}
	return &MessagesAnswer{Body: page}, nil
}

// MessagePath is a message or conversation id in a path.
type MessagePath struct {
	ID string `path:"id" minLength:"1" maxLength:"64" doc:"A message id (conversation ids are message ids)"`
}

// MessageInspectionAnswer is a message with its claims.
type MessageInspectionAnswer struct {
	Body views.MessageInspection
}

func (s *Server) handleInspectMessage(ctx context.Context, in *MessagePath) (*MessageInspectionAnswer, error) {
	m, err := views.InspectMessage(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, topicErrorOf(err)
	}
	return &MessageInspectionAnswer{Body: m}, nil
}

// ConversationInspectionAnswer is a conversation with its messages' claims.
type ConversationInspectionAnswer struct {
	Body views.ConversationInspection
}

func (s *Server) handleInspectConversation(ctx context.Context, in *MessagePath) (*ConversationInspectionAnswer, error) {
	c, err := views.InspectConversation(ctx, s.opts.Ledger, in.ID)
	if err != nil {
		return nil, topicErrorOf(err)
	}
	return &ConversationInspectionAnswer{Body: c}, nil
}

// CheckConversationInput is GET /conversations/{id}/check's request.
type CheckConversationInput struct {
	ID           string `path:"id" minLength:"1" maxLength:"64" doc:"A message id (conversation ids are message ids)"`
	SuccessTopic string `query:"success_topic" required:"true" minLength:"1" maxLength:"200" doc:"The topic of a success reply"`
	FailureTopic string `query:"failure_topic" required:"true" minLength:"1" maxLength:"200" doc:"The topic of a failure reply"`
}

// ConversationCheckAnswer is a conversation's check.
type ConversationCheckAnswer struct {
	Body views.ConversationCheck
}

func (s *Server) handleCheckConversation(ctx context.Context, in *CheckConversationInput) (*ConversationCheckAnswer, error) {
	c, err := views.CheckConversation(ctx, s.opts.Ledger, in.ID, in.SuccessTopic, in.FailureTopic)
	if err != nil {
		return nil, topicErrorOf(err)
	}
	return &ConversationCheckAnswer{Body: c}, nil
}

// ClaimMessageInput is POST /worker/topics/{topic}/claim's request.
type ClaimMessageInput struct {
	Topic string `path:"topic" minLength:"1" maxLength:"200" pattern:"^[A-Za-z0-9._:-]+$" doc:"A topic name: [A-Za-z0-9._:-]{1,200}"`
	Body  struct {
		Group   string `json:"group,omitempty" maxLength:"200" doc:"The worker group (default: default): each group gets every message once"`
		Worker  string `json:"worker" minLength:"1" maxLength:"256" doc:"The worker instance, recorded on the claim"`
		LeaseMS int64  `json:"lease_ms,omitempty" minimum:"0" maximum:"3600000" doc:"The lease, in milliseconds (0: the topic's default)"`
		WaitMS  int64  `json:"wait_ms,omitempty" minimum:"0" doc:"How long to wait for a message, in milliseconds (at most 60000)"`
	}
}

// ClaimMessageAnswer is a claim: 200 with the message, or 204 with none.
type ClaimMessageAnswer struct {
	Status int
	Body   *engine.ClaimedMessage
}

func (s *Server) handleClaimMessage(ctx context.Context, in *ClaimMessageInput) (*ClaimMessageAnswer, error) {
	if err := s.topicWorkerPermitted(ctx); err != nil {
		return nil, err
	}
	b := in.Body
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.streams, cancel)()
	c, err := s.opts.Engine().ClaimMessage(ctx, engine.MessageClaimRequest{Topic: in.Topic, Group: b.Group, Worker: b.Worker,
		Lease: time.Duration(b.LeaseMS) * time.Millisecond, Wait: time.Duration(b.WaitMS) * time.Millisecond})
	if err != nil {
		switch {
		case s.streams.Err() != nil:
			return &ClaimMessageAnswer{Status: http.StatusNoContent}, nil
		case ctx.Err() != nil:
			return nil, newError(http.StatusServiceUnavailable, "claim again", "the claim's request ended before a message came")
		}
		return nil, topicErrorOf(err)
	}
	if c == nil {
		return &ClaimMessageAnswer{Status: http.StatusNoContent}, nil
	}
	s.countTopic(func(o TopicObserver) { o.TopicClaim(in.Topic, "claimed") })
	return &ClaimMessageAnswer{Status: http.StatusOK, Body: c}, nil
}

// MessageFenceBody is what a topic worker sends with a renewal or a finish.
type MessageFenceBody struct {
	Group  string `json:"group,omitempty" maxLength:"200" doc:"The claim's worker group (default: default)"`
	Worker string `json:"worker" minLength:"1" maxLength:"256" doc:"The worker instance that claimed it"`
	Fence  int64  `json:"fence" minimum:"1" doc:"The fence the claim gave"`
}

func (f MessageFenceBody) fence() engine.MessageFence {
	group := f.Group
	if group == "" {
		group = events.DefaultGroup
	}
	return engine.MessageFence{Group: group, Worker: f.Worker, Fence: f.Fence}
}

// RenewMessageInput is POST /worker/messages/{id}/renew's request.
type RenewMessageInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"A message id (conversation ids are message ids)"`
	Body struct {
		MessageFenceBody
		LeaseMS int64 `json:"lease_ms,omitempty" minimum:"0" maximum:"3600000" doc:"Extend the lease by this from now, in milliseconds (0: the topic's default)"`
	}
}

// RenewMessageAnswer is until when the lease holds.
type RenewMessageAnswer struct {
	Body struct {
		LeaseUntil time.Time `json:"lease_until"`
	}
}

func (s *Server) handleRenewMessage(ctx context.Context, in *RenewMessageInput) (*RenewMessageAnswer, error) {
	if err := s.topicWorkerPermitted(ctx); err != nil {
		return nil, err
	}
	until, err := s.opts.Engine().RenewMessage(ctx, in.ID, in.Body.fence(), time.Duration(in.Body.LeaseMS)*time.Millisecond)
	if err != nil {
		if errors.Is(err, commands.ErrStaleFence) {
			s.countTopic(func(o TopicObserver) { o.TopicClaim(s.topicOf(ctx, in.ID), "superseded") })
		}
		return nil, topicErrorOf(err)
	}
	out := &RenewMessageAnswer{}
	out.Body.LeaseUntil = until
	return out, nil
}

// FinishMessageInput is POST /worker/messages/{id}/finish's request.
type FinishMessageInput struct {
	ID   string `path:"id" minLength:"1" maxLength:"64" doc:"A message id (conversation ids are message ids)"`
	Body struct {
		MessageFenceBody
		Status   string          `json:"status" enum:"completed,failed,timed_out" doc:"How the claim ends"`
		Topic    string          `json:"topic,omitempty" maxLength:"200" doc:"The follow-up's topic (empty: no follow-up)"`
		Body     string          `json:"body,omitempty" maxLength:"1048576" doc:"The follow-up's body"`
		Metadata json.RawMessage `json:"metadata,omitempty" doc:"The follow-up's metadata (absent: the claimed message's)"`
	}
}

func (s *Server) handleFinishMessage(ctx context.Context, in *FinishMessageInput) (*MessageAnswer, error) {
	if err := s.topicWorkerPermitted(ctx); err != nil {
		return nil, err
	}
	b := in.Body
	m, err := s.opts.Engine().FinishMessage(ctx, in.ID, b.fence(), engine.FollowUp{Status: b.Status, Topic: b.Topic, Body: b.Body, Metadata: b.Metadata})
	status := b.Status
	if errors.Is(err, commands.ErrStaleFence) {
		status = "superseded"
	}
	if err == nil || status == "superseded" {
		s.countTopic(func(o TopicObserver) { o.TopicClaim(s.topicOf(ctx, in.ID), status) })
	}
	if err != nil {
		return nil, topicErrorOf(err)
	}
	if m.ID != "" {
		s.countTopic(func(o TopicObserver) { o.TopicPublished(m.Topic) })
	}
	return &MessageAnswer{Body: m}, nil
}

// topicErrorOf maps an error of the topic exchange to its response.
func topicErrorOf(err error) *Error {
	switch {
	case errors.Is(err, views.ErrMessageNotFound), errors.Is(err, commands.ErrMessageNotFound):
		return newError(http.StatusNotFound, "see the messages: GET /messages?topic=T", err.Error())
	case errors.Is(err, views.ErrBadMessageFilter):
		return newError(http.StatusBadRequest, "give topic=T or conversation=ID", err.Error())
	case errors.Is(err, commands.ErrStaleFence):
		e := errorOf(err)
		e.Hint = "drop the message: another claim holds it now (the lease expired), or the claim ended; claim again"
		return e
	}
	return errorOf(err)
}

// topicWorkerPermitted refuses a worker token limited to named plugins
// (worker:plugin=NAME) the topic worker routes: its limit names plugins,
// and a topic worker serves no plugin (403 forbidden, naming the scope a
// topic worker needs).
func (s *Server) topicWorkerPermitted(ctx context.Context) error {
	if allowed, limited := s.workerLimits(ctx); limited {
		return &Error{Status: http.StatusForbidden, Code: errcode.Forbidden, Scope: string(auth.Worker),
			Message: fmt.Sprintf("token %q may serve only the plugins %s as a worker, not claim topic messages", tokenOf(ctx), strings.Join(allowed, ", ")),
			Hint:    "use a token with the worker scope for topic workers (ductile config token create NAME --scopes worker, then ductile system reload)"}
	}
	return nil
}
