package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/apiclient"
	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/daemon"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/ledger"
	"github.com/ductile/ductile/views"
)

// topicFront is where the topic commands act: the state directory's
// ledger (with or without a daemon), or a daemon's HTTP API (--api). Both
// go through the same engine intents and views; this only carries them.
type topicFront interface {
	publish(ctx context.Context, p engine.Publish) (events.Message, error)
	read(ctx context.Context, f views.MessageFilter) (views.MessagePage, error)
	check(ctx context.Context, conv, success, failure string) (views.ConversationCheck, error)
	inspectMessage(ctx context.Context, id string) (views.MessageInspection, error)
	inspectConversation(ctx context.Context, conv string) (views.ConversationInspection, error)
	// changed fires when new messages may have come (take it before a
	// read, so nothing between the read and the wait is missed).
	changed() <-chan struct{}
	// where says where it acts, for messages.
	where() string
	close()
}

// remoteFlags are the flags of a command that may act on a daemon's API
// instead of the local ledger.
func remoteFlags(scope string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api", EnvVars: []string{"DUCTILE_API"}, Usage: "act on the daemon whose API is at `URL` (https://host:8443) instead of the local ledger"},
		&cli.StringFlag{Name: "token", EnvVars: []string{"DUCTILE_TOKEN"}, Usage: "with --api: a bearer `KEY` with the " + scope + " scope (rather $DUCTILE_TOKEN or --token-file: others see a process's arguments)"},
		&cli.StringFlag{Name: "token-file", Usage: "with --api: read the key from `FILE` (its first line)"},
		&cli.StringFlag{Name: "ca", Usage: "with --api: trust the CA certificates of `FILE` (PEM) for the daemon's TLS certificate"},
	}
}

// apiClient is the client of --api with its token (--token, or
// --token-file's first line), or nil without --api.
func apiClient(c *cli.Context, scope string) (*apiclient.Client, error) {
	base := c.String("api")
	if base == "" {
		if c.String("token") != "" || c.String("token-file") != "" {
			return nil, usagef("--token and --token-file go with --api URL: without it the command acts on the local ledger")
		}
		return nil, nil
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--api %q is not an http:// or https:// URL with a host", base)
	}
	token := c.String("token")
	if f := c.String("token-file"); f != "" {
		if token != "" {
			return nil, usagef("give the key once: --token (or $DUCTILE_TOKEN) or --token-file, not both")
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		token, _, _ = strings.Cut(string(data), "\n")
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return nil, usagef("--api needs a key with the %s scope: $DUCTILE_TOKEN, --token-file FILE or --token KEY (made on the daemon's machine with: ductile config token create NAME --scopes %s)", scope, scope)
	}
	hc, err := apiclient.NewHTTPClient(apiclient.Options{CAFile: c.String("ca")})
	if err != nil {
		return nil, withHint(errcode.InvalidInput, err, "--ca takes a PEM file of CA certificates (ca.crt, never a key)")
	}
	return apiclient.NewClient(base, token, hc), nil
}

// openTopicFront is the front of the command: --api's daemon, else the
// local ledger (created if missing when write is set: the command
// publishes; its key needs topics:rw, a reader's topics:ro).
func openTopicFront(c *cli.Context, e *env, write bool) (topicFront, error) {
	scope := "topics:ro"
	if write {
		scope = "topics:rw"
	}
	client, err := apiClient(c, scope)
	if err != nil || client != nil {
		if err != nil {
			return nil, err
		}
		return &remoteTopics{client: client, base: c.String("api")}, nil
	}
	var l *ledger.Ledger
	if write {
		l, err = e.openLedger(c.Context)
	} else {
		l, err = e.openExistingLedger(c.Context)
	}
	if err != nil {
		return nil, err
	}
	eng, err := topicEngine(c.Context, e, l)
	if err != nil {
		l.Close()
		return nil, err
	}
	return &localTopics{e: e, l: l, eng: eng}, nil
}

// topicEngine is the Engine topic intents act with on l: the running
// daemon's applied config (its topics settings), else this process's.
func topicEngine(ctx context.Context, e *env, l *ledger.Ledger) (*engine.Engine, error) {
	h, err := daemon.Holder(e.stateDir)
	if err != nil {
		return nil, err
	}
	if h.Daemon() {
		eng, err := daemonEngine(ctx, e, l, h.PID)
		return eng.Engine, err
	}
	return engine.New(engine.Options{Ledger: l, Config: e.cfg}), nil
}

// localTopics acts on the state directory's ledger.
type localTopics struct {
	e   *env
	l   *ledger.Ledger
	eng *engine.Engine
}

func (f *localTopics) publish(ctx context.Context, p engine.Publish) (events.Message, error) {
	return f.eng.Publish(ctx, p)
}

// caughtUp brings the projections up to date when no daemon does.
func (f *localTopics) caughtUp(ctx context.Context) error {
	return daemon.CatchUpUnlessHeld(ctx, f.e.stateDir, f.l, f.e.quietLogger())
}

func (f *localTopics) read(ctx context.Context, filter views.MessageFilter) (views.MessagePage, error) {
	if err := f.caughtUp(ctx); err != nil {
		return views.MessagePage{}, err
	}
	return views.ReadMessages(ctx, f.l, filter)
}

func (f *localTopics) check(ctx context.Context, conv, success, failure string) (views.ConversationCheck, error) {
	if err := f.caughtUp(ctx); err != nil {
		return views.ConversationCheck{}, err
	}
	return views.CheckConversation(ctx, f.l, conv, success, failure)
}

func (f *localTopics) inspectMessage(ctx context.Context, id string) (views.MessageInspection, error) {
	if err := f.caughtUp(ctx); err != nil {
		return views.MessageInspection{}, err
	}
	return views.InspectMessage(ctx, f.l, id)
}

func (f *localTopics) inspectConversation(ctx context.Context, conv string) (views.ConversationInspection, error) {
	if err := f.caughtUp(ctx); err != nil {
		return views.ConversationInspection{}, err
	}
	return views.InspectConversation(ctx, f.l, conv)
}

func (f *localTopics) changed() <-chan struct{} { return f.l.Changed() }

func (f *localTopics) where() string { return "the ledger of " + f.e.stateDir }

func (f *localTopics) close() { f.l.Close() }

// remoteRecheck is how often a remote waiter (request, read --follow,
// check against --api) asks again: the spec's request fallback re-check.
const remoteRecheck = 250 * time.Millisecond

// remoteTopics acts on a daemon's HTTP API.
type remoteTopics struct {
	client *apiclient.Client
	base   string
}

func (f *remoteTopics) publish(ctx context.Context, p engine.Publish) (events.Message, error) {
	return f.client.Publish(ctx, p.Topic, apiclient.PublishRequest{Body: p.Body, ParentID: p.ParentID, ConversationID: p.ConversationID,
		Producer: p.Producer, Metadata: p.Metadata, DryRun: p.DryRun})
}

func (f *remoteTopics) read(ctx context.Context, filter views.MessageFilter) (views.MessagePage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"topic": filter.Topic, "conversation": filter.Conversation, "after": filter.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if filter.Limit > 0 {
		q.Set("limit", strconv.Itoa(filter.Limit))
	}
	var out views.MessagePage
	_, err := f.client.Do(ctx, http.MethodGet, "/messages", q, nil, &out)
	return out, err
}

func (f *remoteTopics) check(ctx context.Context, conv, success, failure string) (views.ConversationCheck, error) {
	var out views.ConversationCheck
	_, err := f.client.Do(ctx, http.MethodGet, "/conversations/"+url.PathEscape(conv)+"/check",
		url.Values{"success_topic": {success}, "failure_topic": {failure}}, nil, &out)
	return out, err
}

func (f *remoteTopics) inspectMessage(ctx context.Context, id string) (views.MessageInspection, error) {
	var out views.MessageInspection
	_, err := f.client.Do(ctx, http.MethodGet, "/messages/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

func (f *remoteTopics) inspectConversation(ctx context.Context, conv string) (views.ConversationInspection, error) {
	var out views.ConversationInspection
	_, err := f.client.Do(ctx, http.MethodGet, "/conversations/"+url.PathEscape(conv), nil, nil, &out)
	return out, err
}

func (f *remoteTopics) changed() <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(remoteRecheck, func() { close(ch) })
	return ch
}

func (f *remoteTopics) where() string { return "the daemon at " + f.base }

func (f *remoteTopics) close() {}

// topicError is the CLI's error for what the exchange refused: a message
// or conversation that is not there, a stale fence, or the API's answer
// with its code and hint.
func topicError(err error) error {
	var a *apiclient.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &a):
		return &exitError{code: a.Code, msg: err.Error(), hint: a.Hint}
	case errors.Is(err, views.ErrMessageNotFound), errors.Is(err, commands.ErrMessageNotFound):
		return withHint(errcode.NotFound, err, "see the messages with: ductile topic read --topic T")
	case errors.Is(err, commands.ErrInvalidCommand):
		return usagef("%v", err)
	}
	return err
}
