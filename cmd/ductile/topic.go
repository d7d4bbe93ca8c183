package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/views"
)

// topicCommand is `topic`: the topic exchange (docs/topics-cli.md).
func topicCommand() *cli.Command {
	return &cli.Command{
		Name:  "topic",
		Usage: "the topic exchange: publish messages, read them, wait for replies, inspect claims (docs/topics-cli.md)",
		Description: "A topic is a name; a message is an immutable event on it, with a conversation that its follow-ups share.\n" +
			"Topic workers (ductile worker --topic T … -- CMD) claim messages under a lease and publish the replies.\n" +
			"Every command works on the local ledger (with or without a daemon) or on a daemon's API with --api URL\n" +
			"and a token (scope topics:ro to read, topics:rw to publish).",
		Subcommands: []*cli.Command{topicPublishCommand(), topicReadCommand(), topicCheckCommand(), topicRequestCommand(),
			topicNotifyCommand(), topicInspectCommand()},
	}
}

// defaultProducer is the producer of a message the CLI publishes without
// --producer.
const defaultProducer = "cli"

// messageFlags are the flags of a message's parts beside its body.
func messageFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "producer", Value: defaultProducer, Usage: "who publishes it: a `NAME` recorded on the message"},
		&cli.StringSliceFlag{Name: "meta", Usage: "a metadata entry `K=V` (repeatable; V is a string; workers see it as $DUCTILE_META_K)"},
		&cli.StringFlag{Name: "metadata-json", Usage: "the metadata as a JSON `OBJECT` (--meta entries are added to it, replacing its keys)"},
	}
}

// readBody is a message's body: text as it is, or stdin for "-".
func readBody(c *cli.Context, text string) (string, error) {
	if text != "-" {
		return text, nil
	}
	b, err := io.ReadAll(io.LimitReader(c.App.Reader, events.MaxMessageBody+1))
	if err != nil {
		return "", failf("read the body from stdin: %v", err)
	}
	if len(b) > events.MaxMessageBody {
		return "", usagef("the body on stdin is larger than %d bytes: put large content in a file and send its path", events.MaxMessageBody)
	}
	return string(b), nil
}

// readMetadata is the metadata of --metadata-json and --meta K=V.
func readMetadata(c *cli.Context) (json.RawMessage, error) {
	fields := map[string]any{}
	if s := c.String("metadata-json"); s != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&fields); err != nil || fields == nil {
			return nil, usagef(`--metadata-json must be a JSON object, like '{"reply_to":"me"}'`)
		}
	}
	for _, kv := range c.StringSlice("meta") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--meta %q: give K=V", kv)
		}
		fields[k] = v
	}
	if len(fields) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, failf("encode the metadata: %v", err)
	}
	if len(b) > events.MaxMessageMetadata {
		return nil, usagef("the metadata is %d bytes of JSON: at most %d", len(b), events.MaxMessageMetadata)
	}
	return b, nil
}

// topicPublishCommand is `topic publish`.
func topicPublishCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "publish a message to a topic; prints its id and conversation id",
		ArgsUsage: "TOPIC [BODY|-]",
		Description: "BODY - reads the body from stdin (none: an empty body). A message with --parent-id is a follow-up: it joins\n" +
			"its parent's conversation unless --conversation-id says otherwise; without either it starts its own.",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "parent-id", Usage: "the `ID` of the message this one follows up"},
			&cli.StringFlag{Name: "conversation-id", Usage: "the conversation `ID` (default: the parent's, else the message's own id)"},
		}, messageFlags()...), append(remoteFlags("topics:rw"), jsonFlag(), dryRunFlag())...),
		Action: topicPublish,
	}
}

// publishOutput is what publish prints with --json.
type publishOutput struct {
	MessageID      string         `json:"message_id"`
	ConversationID string         `json:"conversation_id"`
	Message        events.Message `json:"message"`
	DryRun         bool           `json:"dry_run,omitempty"`
}

func topicPublish(c *cli.Context) error {
	if c.NArg() == 0 || c.NArg() > 2 {
		return usagef("publish takes a TOPIC and an optional BODY (- reads it from stdin): ductile topic publish TOPIC [BODY|-]")
	}
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	p, err := publishOf(c, c.Args().Get(0), c.Args().Get(1))
	if err != nil {
		return err
	}
	p.DryRun = c.Bool("dry-run")
	front, err := openTopicFront(c, e, true)
	if err != nil {
		return err
	}
	defer front.close()
	m, err := front.publish(c.Context, p)
	if err != nil {
		return topicError(err)
	}
	out := publishOutput{MessageID: m.ID, ConversationID: m.ConversationID, Message: m, DryRun: p.DryRun}
	if c.Bool("json") {
		return printJSON(e.stdout, out)
	}
	if p.DryRun {
		fmt.Fprintf(e.stdout, "would publish to %s (%d bytes); nothing recorded (run without --dry-run to publish)\n", m.Topic, len(m.Body))
		return nil
	}
	fmt.Fprintf(e.stdout, "message_id=%s\nconversation_id=%s\n", m.ID, m.ConversationID)
	return nil
}

// publishOf is the message of the command line: topic, body (text or
// "-"), and the message flags.
func publishOf(c *cli.Context, topic, bodyArg string) (engine.Publish, error) {
	body, err := readBody(c, bodyArg)
	if err != nil {
		return engine.Publish{}, err
	}
	meta, err := readMetadata(c)
	if err != nil {
		return engine.Publish{}, err
	}
	p := engine.Publish{Topic: topic, Body: body, Producer: c.String("producer"), Metadata: meta}
	if c.Command.HasName("publish") {
		p.ParentID, p.ConversationID = c.String("parent-id"), c.String("conversation-id")
	}
	return p, nil
}

// printMessage prints one message for a reader: a header line, then the
// body indented.
func printMessage(w io.Writer, m views.MessageRecord) {
	fmt.Fprintf(w, "%s  %s  %s  conversation %s", m.CreatedAt, m.Topic, m.ID, m.ConversationID)
	if m.ParentID != "" {
		fmt.Fprintf(w, "  parent %s", m.ParentID)
	}
	if m.Producer != "" {
		fmt.Fprintf(w, "  by %s", m.Producer)
	}
	if len(m.Metadata) > 0 {
		fmt.Fprintf(w, "  meta %s", m.Metadata)
	}
	fmt.Fprintln(w)
	for line := range strings.SplitSeq(strings.TrimRight(m.Body, "\n"), "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}
