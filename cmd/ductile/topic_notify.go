package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ductile/ductile/views"
)

// trackedFile is where topic request records the conversations topic
// notify looks at, in the state directory.
const trackedFile = "topic-requests.json"

// trackedRequest is one request conversation topic notify watches.
type trackedRequest struct {
	MessageID      string `json:"message_id"`
	ConversationID string `json:"conversation_id"`
	Topic          string `json:"topic"`
	SuccessTopic   string `json:"success_topic"`
	FailureTopic   string `json:"failure_topic"`
	// API is the daemon the request went to ("": the local ledger).
	API         string `json:"api,omitempty"`
	PublishedAt string `json:"published_at"`
	// NotifiedAt is when notify reported its reply ("": not yet); State is
	// the reply's (success or failure).
	NotifiedAt string `json:"notified_at,omitempty"`
	State      string `json:"state,omitempty"`
}

// trackedRequests is the file's content.
type trackedRequests struct {
	Requests []trackedRequest `json:"requests"`
}

// withTracked runs fn on the tracked requests under an exclusive lock of
// the state directory's file, and writes them back (atomically: a
// temporary file renamed over it) if fn says they changed.
func withTracked(e *env, fn func(t *trackedRequests) (changed bool, err error)) error {
	if err := os.MkdirAll(e.stateDir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(e.stateDir, trackedFile)
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	var t trackedRequests
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, &t); err != nil {
			return fmt.Errorf("%s is not what ductile topic request writes (%v): move it away to start afresh", path, err)
		}
	}
	changed, err := fn(&t)
	if err != nil || !changed {
		return err
	}
	data, err = json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(e.stateDir, trackedFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// trackRequest adds r to the tracked requests.
func trackRequest(e *env, r trackedRequest) error {
	return withTracked(e, func(t *trackedRequests) (bool, error) {
		t.Requests = append(t.Requests, r)
		return true, nil
	})
}

// topicNotifyCommand is `topic notify`.
func topicNotifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "notify",
		Usage: "notify once per tracked request whose conversation got its reply (notify-send if on $PATH, else stderr)",
		Description: "Looks at the conversations ductile topic request tracked (in the state directory's " + trackedFile + ")\n" +
			"that went to this front (the local ledger, or --api's daemon), and emits one notification for each that reached\n" +
			"a terminal reply, never twice. Without --once it keeps watching until interrupted.",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "once", Usage: "look once, then exit"},
		}, append(remoteFlags("topics:ro"), jsonFlag())...),
		Action: topicNotify,
	}
}

// notification is what notify emits for one request, and prints with --json.
type notification struct {
	ConversationID string `json:"conversation_id"`
	MessageID      string `json:"message_id"`
	Topic          string `json:"topic"`
	State          string `json:"state"`
	ReplyID        string `json:"reply_id"`
	ReplyTopic     string `json:"reply_topic"`
	Body           string `json:"body"`
}

func topicNotify(c *cli.Context) error {
	e, err := loadEnv(c)
	if err != nil {
		return err
	}
	front, err := openTopicFront(c, e, false)
	if err != nil {
		return err
	}
	defer front.close()
	api := c.String("api")
	for {
		ch := front.changed()
		if err := notifyOnce(c.Context, e, front, api, c.Bool("json")); err != nil {
			if c.Context.Err() != nil && !c.Bool("once") {
				return nil
			}
			return topicError(err)
		}
		if c.Bool("once") || waitChange(c.Context, ch) != nil {
			return nil
		}
	}
}

// notifyOnce checks every tracked request of this front not notified yet
// and notifies those with a reply. The tracked file stays locked while it
// checks, so two notifiers never both notify one request.
func notifyOnce(ctx context.Context, e *env, front topicFront, api string, asJSON bool) error {
	return withTracked(e, func(t *trackedRequests) (bool, error) {
		changed := false
		for i := range t.Requests {
			r := &t.Requests[i]
			if r.NotifiedAt != "" || r.API != api {
				continue
			}
			chk, err := front.check(ctx, r.ConversationID, r.SuccessTopic, r.FailureTopic)
			if err != nil {
				return changed, err
			}
			if chk.State == views.ConversationPending || chk.Reply == nil {
				continue
			}
			n := notification{ConversationID: r.ConversationID, MessageID: r.MessageID, Topic: r.Topic, State: chk.State,
				ReplyID: chk.Reply.ID, ReplyTopic: chk.Reply.Topic, Body: chk.Reply.Body}
			emit(e, n, asJSON)
			r.NotifiedAt, r.State, changed = time.Now().UTC().Format(time.RFC3339Nano), chk.State, true
		}
		return changed, nil
	})
}

// emit shows n: a desktop notification with notify-send when it is on
// $PATH (and says so on stderr if it fails), else a line on stderr; with
// --json, also one JSON line on stdout.
func emit(e *env, n notification, asJSON bool) {
	title := fmt.Sprintf("ductile: %s %s", n.Topic, n.State)
	text := oneLine(n.Body, 200)
	sent := false
	if path, err := exec.LookPath("notify-send"); err == nil {
		cmd := exec.Command(path, "--app-name=ductile", title, text)
		if err := cmd.Run(); err == nil {
			sent = true
		} else {
			fmt.Fprintf(e.stderr, "notify-send failed (%v); the notification follows\n", err)
		}
	}
	if !sent {
		fmt.Fprintf(e.stderr, "%s: conversation %s, reply %s on %s: %s\n", title, n.ConversationID, n.ReplyID, n.ReplyTopic, text)
	}
	if asJSON {
		b, _ := json.Marshal(n)
		fmt.Fprintf(e.stdout, "%s\n", b)
	}
}
