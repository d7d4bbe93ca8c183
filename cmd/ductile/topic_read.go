package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/views"
)

// topicRecheck bounds how long a waiter goes without reading again when
// no wake-up comes (the spec's fallback re-check): a wake-up is advisory,
// the read decides.
const topicRecheck = 250 * time.Millisecond

// waitChange waits for ch, the fallback re-check, or ctx's end.
func waitChange(ctx context.Context, ch <-chan struct{}) error {
	t := time.NewTimer(topicRecheck)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// topicReadCommand is `topic read`.
func topicReadCommand() *cli.Command {
	return &cli.Command{
		Name:  "read",
		Usage: "read messages by topic or by conversation, oldest first",
		Description: "--after ID starts after that message; --follow keeps printing new messages until interrupted\n" +
			"(with --json, one JSON object per line).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "topic", Usage: "the messages of topic `T`"},
			&cli.StringFlag{Name: "conversation", Aliases: []string{"conversation-id"}, Usage: "the messages of conversation `ID`"},
			&cli.StringFlag{Name: "after", Usage: "start after the message `ID`"},
			&cli.IntFlag{Name: "limit", Value: views.DefaultMessageLimit, Usage: fmt.Sprintf("at most `N` messages (at most %d; with --follow, per read)", views.MaxMessageLimit)},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep printing new messages until interrupted"},
		}, append(remoteFlags("topics:ro"), jsonFlag())...),
		Action: topicRead,
	}
}

func topicRead(c *cli.Context) error {
	f := views.MessageFilter{Topic: c.String("topic"), Conversation: c.String("conversation"), After: c.String("after"), Limit: c.Int("limit")}
	switch {
	case (f.Topic == "") == (f.Conversation == ""):
		return usagef("give one of --topic T or --conversation ID")
	case f.Limit < 1 || f.Limit > views.MaxMessageLimit:
		return usagef("--limit must be 1 to %d, got %d", views.MaxMessageLimit, f.Limit)
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	front, err := openTopicFront(c, e, false)
	if err != nil {
		return err
	}
	defer front.close()
	asJSON := c.Bool("json")
	if !c.Bool("follow") {
		page, err := front.read(c.Context, f)
		if err != nil {
			return topicError(err)
		}
		if asJSON {
			return printJSON(e.stdout, page)
		}
		for _, m := range page.Messages {
			printMessage(e.stdout, m)
		}
		if page.Next != "" {
			fmt.Fprintf(e.stdout, "… more after %s (see: ductile topic read --after %s)\n", page.Next, page.Next)
		}
		return nil
	}
	enc := json.NewEncoder(e.stdout)
	for {
		ch := front.changed()
		page, err := front.read(c.Context, f)
		if err != nil {
			if c.Context.Err() != nil {
				return nil
			}
			return topicError(err)
		}
		for _, m := range page.Messages {
			if asJSON {
				if err := enc.Encode(m); err != nil {
					return err
				}
			} else {
				printMessage(e.stdout, m)
			}
			f.After = m.ID
		}
		if page.Next != "" {
			continue
		}
		if waitChange(c.Context, ch) != nil {
			return nil // interrupted: the end of a follow
		}
	}
}

// topicCheckCommand is `topic check`.
func topicCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "say whether a conversation has a reply yet: pending, success or failure (exit 0, 0, 1)",
		Description: "success: a message on --success-topic in the conversation; failure: one on --failure-topic, or on\n" +
			"<topic>.timed_out of one of its messages. The first such reply decides.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "conversation-id", Aliases: []string{"conversation"}, Required: true, Usage: "the conversation `ID`"},
			&cli.StringFlag{Name: "success-topic", Required: true, Usage: "the topic `S` of a success reply"},
			&cli.StringFlag{Name: "failure-topic", Required: true, Usage: "the topic `F` of a failure reply"},
		}, append(remoteFlags("topics:ro"), jsonFlag())...),
		Action: topicCheck,
	}
}

func topicCheck(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	front, err := openTopicFront(c, e, false)
	if err != nil {
		return err
	}
	defer front.close()
	chk, err := front.check(c.Context, c.String("conversation-id"), c.String("success-topic"), c.String("failure-topic"))
	if err != nil {
		return topicError(err)
	}
	if c.Bool("json") {
		if err := printJSON(e.stdout, chk); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(e.stdout, chk.State)
	}
	if chk.State == views.ConversationFailure {
		return silent(exitFailure)
	}
	return nil
}

// topicInspectCommand is `topic inspect`.
func topicInspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "show a message's or a conversation's raw history with every claim and its state",
		Description: "Claim states: live_active (active, its lease holds), expired_active (active, its lease ran out: the\n" +
			"message is claimable again), terminal (ended: completed, failed, timed_out or expired).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "message", Aliases: []string{"message-id"}, Usage: "the message `ID`"},
			&cli.StringFlag{Name: "conversation", Aliases: []string{"conversation-id"}, Usage: "the conversation `ID`"},
		}, append(remoteFlags("topics:ro"), jsonFlag())...),
		Action: topicInspect,
	}
}

func topicInspect(c *cli.Context) error {
	id, conv := c.String("message"), c.String("conversation")
	if (id == "") == (conv == "") {
		return usagef("give one of --message ID or --conversation ID")
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	front, err := openTopicFront(c, e, false)
	if err != nil {
		return err
	}
	defer front.close()
	var messages []views.MessageInspection
	var out any
	if id != "" {
		m, err := front.inspectMessage(c.Context, id)
		if err != nil {
			return topicError(err)
		}
		messages, out = []views.MessageInspection{m}, m
	} else {
		ci, err := front.inspectConversation(c.Context, conv)
		if err != nil {
			return topicError(err)
		}
		messages, out = ci.Messages, ci
	}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	for _, m := range messages {
		printMessage(e.stdout, m.MessageRecord)
		fmt.Fprintf(e.stdout, "    seq %d\n", m.Seq)
		if len(m.Claims) == 0 {
			fmt.Fprintln(e.stdout, "    no claim")
		}
		for _, cl := range m.Claims {
			fmt.Fprintf(e.stdout, "    claim group %s worker %s: %s (%s), fence %d, attempts %d, claimed %s, lease until %s",
				cl.Group, cl.Worker, cl.State, cl.Status, cl.Fence, cl.Attempts, cl.ClaimedAt, cl.LeaseUntil)
			if cl.EndedAt != "" {
				fmt.Fprintf(e.stdout, ", ended %s", cl.EndedAt)
			}
			if cl.FollowUpID != "" {
				fmt.Fprintf(e.stdout, ", follow-up %s", cl.FollowUpID)
			}
			if cl.Error != "" {
				fmt.Fprintf(e.stdout, ", error: %s", oneLine(cl.Error, 200))
			}
			fmt.Fprintln(e.stdout)
		}
	}
	return nil
}
