package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/errcode"
	"github.com/ductile/ductile/views"
)

// exitRequestTimeout is topic request's exit status when no reply came
// within --timeout (the status timeout(1) exits with).
const exitRequestTimeout = 124

// defaultRequestTimeout is how long topic request waits without --timeout.
const defaultRequestTimeout = 5 * time.Minute

// topicRequestCommand is `topic request`.
func topicRequestCommand() *cli.Command {
	return &cli.Command{
		Name:      "request",
		Usage:     "publish a request and wait for its first reply; prints both ids, then the reply's body (exit 0 success, 1 failure, 124 timeout)",
		ArgsUsage: "TOPIC",
		Description: "The reply is the first message of the request's conversation on --success-topic (exit 0) or on\n" +
			"--failure-topic or TOPIC.timed_out (exit 1). At --timeout it gives up (exit 124; the request stays published,\n" +
			"and ductile topic check or notify can see its reply later). The conversation is tracked for ductile topic notify.",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "success-topic", Required: true, Usage: "the topic `S` of a success reply"},
			&cli.StringFlag{Name: "failure-topic", Required: true, Usage: "the topic `F` of a failure reply"},
			&cli.StringFlag{Name: "body", Usage: "the request's body `B` (- reads it from stdin; default: empty)"},
			&cli.DurationFlag{Name: "timeout", Value: defaultRequestTimeout, Usage: "give up waiting after `D` (exit 124)"},
		}, messageFlags()...), append(remoteFlags("topics:rw"), jsonFlag())...),
		Action: topicRequest,
	}
}

// requestOutput is what request prints with --json.
type requestOutput struct {
	MessageID      string               `json:"message_id"`
	ConversationID string               `json:"conversation_id"`
	State          string               `json:"state"` // success, failure or timeout
	Reply          *views.MessageRecord `json:"reply,omitempty"`
}

func topicRequest(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("request takes one TOPIC: ductile topic request TOPIC --success-topic S --failure-topic F [--body B|-]")
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return usagef("--timeout must be more than 0 (a request never waits for ever), got %v", timeout)
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	topic, success, failure := c.Args().First(), c.String("success-topic"), c.String("failure-topic")
	p, err := publishOf(c, topic, c.String("body"))
	if err != nil {
		return err
	}
	front, err := openTopicFront(c, e, true)
	if err != nil {
		return err
	}
	defer front.close()
	// The deadline runs from the start, publishing included.
	ctx, cancel := context.WithTimeout(c.Context, timeout)
	defer cancel()
	m, err := front.publish(ctx, p)
	if err != nil {
		return topicError(err)
	}
	tracked := trackedRequest{MessageID: m.ID, ConversationID: m.ConversationID, Topic: topic, SuccessTopic: success, FailureTopic: failure,
		API: c.String("api"), PublishedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	if err := trackRequest(e, tracked); err != nil {
		fmt.Fprintf(e.stderr, "warning: the request is not tracked for ductile topic notify: %v\n", err)
	}
	asJSON := c.Bool("json")
	if !asJSON {
		fmt.Fprintf(e.stdout, "message_id=%s\nconversation_id=%s\n", m.ID, m.ConversationID)
	}
	out := requestOutput{MessageID: m.ID, ConversationID: m.ConversationID}
	chk, err := waitReply(ctx, front, m.ConversationID, success, failure)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && c.Context.Err() == nil:
		out.State = "timeout"
		if asJSON {
			_ = printJSON(e.stdout, out)
		}
		return &exitError{code: errcode.Timeout, status: exitRequestTimeout,
			msg:  fmt.Sprintf("no reply on %s or %s within %v", success, failure, timeout),
			hint: fmt.Sprintf("the request stays published: ductile topic check --conversation-id %s --success-topic %s --failure-topic %s", m.ConversationID, success, failure)}
	case err != nil:
		return topicError(err)
	}
	out.State, out.Reply = chk.State, chk.Reply
	if asJSON {
		if err := printJSON(e.stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprint(e.stdout, chk.Reply.Body)
	}
	if chk.State == views.ConversationFailure {
		return silent(exitFailure)
	}
	return nil
}

// waitReply checks conversation conv until it has a reply, waking on the
// front's changes with a bounded re-check, until ctx ends.
func waitReply(ctx context.Context, front topicFront, conv, success, failure string) (views.ConversationCheck, error) {
	for {
		ch := front.changed()
		chk, err := front.check(ctx, conv, success, failure)
		if err != nil {
			if ctx.Err() != nil {
				return chk, ctx.Err()
			}
			return chk, err
		}
		if chk.State != views.ConversationPending && chk.Reply != nil {
			return chk, nil
		}
		if err := waitChange(ctx, ch); err != nil {
			return chk, err
		}
	}
}
