package main_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// topicWorld is a state directory the topic commands act on, with no
// daemon (the CLI on the ledger).
type topicWorld struct {
	t     *testing.T
	state string
	env   []string
}

func newTopicWorld(t *testing.T) *topicWorld {
	t.Helper()
	return &topicWorld{t: t, state: filepath.Join(t.TempDir(), "state"), env: cleanEnv(t)}
}

func (w *topicWorld) args(args ...string) []string {
	return append([]string{"--state-dir", w.state}, args...)
}

// run runs the binary on the world's state directory.
func (w *topicWorld) run(args ...string) result {
	w.t.Helper()
	return ductile(w.t, w.env, w.args(args...)...)
}

// mustJSON runs the binary, requires exit code want and decodes stdout.
func (w *topicWorld) mustJSON(want int, out any, args ...string) result {
	w.t.Helper()
	r := w.run(args...)
	require.Equal(w.t, want, r.code, "ductile %q:\n%s", args, r)
	require.NoError(w.t, json.Unmarshal([]byte(r.stdout), out), "ductile %q:\n%s", args, r)
	return r
}

// topicMessage is a message as topic read --json prints it.
type topicMessage struct {
	ID             string          `json:"id"`
	Topic          string          `json:"topic"`
	Body           string          `json:"body"`
	ParentID       string          `json:"parent_id"`
	ConversationID string          `json:"conversation_id"`
	Producer       string          `json:"producer"`
	Metadata       json.RawMessage `json:"metadata"`
	CreatedAt      string          `json:"created_at"`
	Seq            int64           `json:"seq"`
}

type topicPage struct {
	Messages []topicMessage `json:"messages"`
	Next     string         `json:"next"`
}

type published struct {
	MessageID      string `json:"message_id"`
	ConversationID string `json:"conversation_id"`
}

// publish publishes body to topic with the extra flags and returns its ids.
func (w *topicWorld) publish(topic, body string, flags ...string) published {
	w.t.Helper()
	var out published
	w.mustJSON(0, &out, append([]string{"topic", "publish", topic, body, "--json"}, flags...)...)
	require.NotEmpty(w.t, out.MessageID)
	return out
}

// read reads the messages of --topic T or --conversation ID (by is the flag).
func (w *topicWorld) read(by, value string) []topicMessage {
	w.t.Helper()
	var page topicPage
	w.mustJSON(0, &page, "topic", "read", "--"+by, value, "--limit", "1000", "--json")
	return page.Messages
}

// worker starts a topic worker on the world with the extra flags and the
// command, in env (nil: the world's).
func (w *topicWorld) worker(env []string, flags []string, cmd ...string) *proc {
	w.t.Helper()
	if env == nil {
		env = w.env
	}
	args := w.args(append(append([]string{"--log-format", "json", "worker"}, flags...), append([]string{"--"}, cmd...)...)...)
	p := start(w.t, env, args...)
	w.t.Cleanup(func() {
		if w.t.Failed() {
			select {
			case <-p.done:
				w.t.Logf("worker %q stderr:\n%s", flags, p.stderr.String())
			default:
			}
		}
	})
	return p
}

// pidAlive reports whether process pid exists.
func pidAlive(pid int) bool { return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// readPID reads the pid a command wrote to file, waiting for it.
func readPID(t *testing.T, file string) int {
	t.Helper()
	var pid int
	waitFor(t, waitTimeout, "pid in "+file, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// echoWorker is the command of the tests' workers: stdout is the body and
// the metadata's lang; "fail" fails on stderr; "slow" forks a grandchild
// that sleeps (its pid in $PIDFILE) and sleeps itself.
const echoWorker = `b=$(cat)
case "$b" in
fail) echo "cannot: $b" >&2; exit 3 ;;
slow) sh -c 'echo $$ > "$PIDFILE"; exec sleep 60' & sleep 60 ;;
esac
printf 'done: %s lang=%s' "$b" "$DUCTILE_META_LANG"`

// TestTopicPublishWorkerFollowUp: a message published with a producer and
// metadata is claimed by ductile worker --once, which runs the command with
// the body on stdin and the metadata as DUCTILE_META_*, and publishes the
// follow-up on the success topic with stdout, the message as its parent,
// its conversation and metadata, the worker group as producer. A failing
// command replies on the failure topic with its stderr; a command past
// --timeout is killed with its process group (the grandchild too) and
// replies on TOPIC.timed_out within about a second of the limit.
func TestTopicPublishWorkerFollowUp(t *testing.T) {
	t.Parallel()
	w := newTopicWorld(t)
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	env := append(append([]string{}, w.env...), "PIDFILE="+pidFile)
	flags := []string{"--topic", "echo.request", "--success-topic", "echo.done", "--failure-topic", "echo.failed", "--once", "--timeout", "1s"}

	req := w.publish("echo.request", "hello", "--producer", "tester", "--meta", "lang=en", "--metadata-json", `{"n":3}`)
	require.Equal(t, req.MessageID, req.ConversationID, "a message with no parent starts its own conversation")
	p := w.worker(env, flags, "sh", "-c", echoWorker)
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	replies := w.read("topic", "echo.done")
	require.Len(t, replies, 1)
	r := replies[0]
	require.Equal(t, "done: hello lang=en", r.Body)
	require.Equal(t, req.MessageID, r.ParentID)
	require.Equal(t, req.ConversationID, r.ConversationID)
	require.Equal(t, "default", r.Producer, "the follow-up's producer is the worker group")
	require.JSONEq(t, `{"lang":"en","n":3}`, string(r.Metadata))
	thread := w.read("conversation", req.ConversationID)
	require.Len(t, thread, 2)
	require.Equal(t, "tester", thread[0].Producer)

	// Failure: stderr on the failure topic.
	bad := w.publish("echo.request", "fail")
	p = w.worker(env, flags, "sh", "-c", echoWorker)
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	failed := w.read("topic", "echo.failed")
	require.Len(t, failed, 1)
	require.Equal(t, "cannot: fail\n", failed[0].Body)
	require.Equal(t, bad.MessageID, failed[0].ParentID)

	// Timeout: the whole process group is killed; the reply comes within
	// about a second of the 1 s limit.
	slow := w.publish("echo.request", "slow")
	p = w.worker(env, flags, "sh", "-c", echoWorker)
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	timedOut := w.read("topic", "echo.request.timed_out")
	require.Len(t, timedOut, 1)
	require.Equal(t, slow.MessageID, timedOut[0].ParentID)
	require.Contains(t, timedOut[0].Body, "timed out after")
	var inspected struct {
		Claims []struct {
			Status    string `json:"status"`
			State     string `json:"state"`
			ClaimedAt string `json:"claimed_at"`
		} `json:"claims"`
	}
	w.mustJSON(0, &inspected, "topic", "inspect", "--message", slow.MessageID, "--json")
	require.Len(t, inspected.Claims, 1)
	require.Equal(t, "timed_out", inspected.Claims[0].Status)
	require.Equal(t, "terminal", inspected.Claims[0].State)
	claimed, err := time.Parse(time.RFC3339Nano, inspected.Claims[0].ClaimedAt)
	require.NoError(t, err)
	replied, err := time.Parse(time.RFC3339Nano, timedOut[0].CreatedAt)
	require.NoError(t, err)
	took := replied.Sub(claimed)
	t.Logf("timeout reply %v after the claim (limit 1s)", took)
	require.Greater(t, took, time.Second)
	require.Less(t, took, 2*time.Second, "the reply comes within about a second of the limit")
	pid := readPID(t, pidFile)
	waitFor(t, 5*time.Second, "the grandchild is gone", func() bool { return !pidAlive(pid) })
	mustRun(t, w.env, w.args("ledger", "verify")...)
}

// TestTopicThreadingOverThreeHops: --parent-id threads three messages into
// one conversation, read back in order by --conversation.
func TestTopicThreadingOverThreeHops(t *testing.T) {
	t.Parallel()
	w := newTopicWorld(t)
	root := w.publish("plan.request", "plan it")
	second := w.publish("plan.step", "step one", "--parent-id", root.MessageID)
	third := w.publish("plan.step", "step two", "--parent-id", second.MessageID)
	require.Equal(t, root.ConversationID, second.ConversationID)
	require.Equal(t, root.ConversationID, third.ConversationID, "a follow-up inherits its parent's conversation")
	other := w.publish("plan.request", "unrelated")
	require.NotEqual(t, other.ConversationID, third.ConversationID)
	require.NotEqual(t, root.ConversationID, other.ConversationID)
	thread := w.read("conversation", root.ConversationID)
	require.Len(t, thread, 3)
	require.Equal(t, []string{"plan it", "step one", "step two"}, []string{thread[0].Body, thread[1].Body, thread[2].Body})
	require.Equal(t, []string{"", root.MessageID, second.MessageID}, []string{thread[0].ParentID, thread[1].ParentID, thread[2].ParentID})
	// read --follow prints what is there, then what comes, one JSON line each.
	follow := start(t, w.env, w.args("topic", "read", "--follow", "--json", "--conversation", root.ConversationID)...)
	follow.waitLine(t, 0, func(line string) bool { return strings.Contains(line, `"step two"`) })
	fourth := w.publish("plan.step", "step three", "--parent-id", third.MessageID)
	line, _ := follow.waitLine(t, 0, func(line string) bool { return strings.Contains(line, fourth.MessageID) })
	var followed topicMessage
	require.NoError(t, json.Unmarshal([]byte(line), &followed))
	require.Equal(t, third.MessageID, followed.ParentID)
	require.Equal(t, 0, follow.signal(t, syscall.SIGINT))
	// An unknown parent is refused, with its code.
	r := w.run("topic", "publish", "plan.step", "x", "--parent-id", "no-such-message", "--json")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `"code":"not_found"`)
	// A dry run records nothing.
	r = w.run("topic", "publish", "plan.request", "x", "--dry-run")
	require.Equal(t, 0, r.code, r.String())
	require.Len(t, w.read("topic", "plan.request"), 2)
	// A bad topic name is a usage error.
	r = w.run("topic", "publish", "bad topic", "x")
	require.Equal(t, 2, r.code, r.String())
}

// TestTopicRequestCheckNotify: check says pending before a reply and
// success or failure after (exit 0, 0, 1); request prints both ids and the
// reply's body and exits 0 on success, 1 on failure and 124 when no reply
// comes in time; notify notifies each tracked request with a reply once
// (notify-send when on $PATH), then stays silent.
func TestTopicRequestCheckNotify(t *testing.T) {
	t.Parallel()
	w := newTopicWorld(t)
	replyTopics := []string{"--success-topic", "up.done", "--failure-topic", "up.failed"}
	// Check before any reply.
	pending := w.publish("up.request", "before")
	r := w.run(append([]string{"topic", "check", "--conversation-id", pending.ConversationID}, replyTopics...)...)
	require.Equal(t, 0, r.code, r.String())
	require.Equal(t, "pending\n", r.stdout)

	w.worker(nil, append([]string{"--topic", "up.request"}, replyTopics...), "sh", "-c", `b=$(cat); [ "$b" = fail ] && { echo "no: $b" >&2; exit 1; }; echo "$b" | tr a-z A-Z`)
	r = w.run(append([]string{"topic", "request", "up.request", "--body", "hello", "--timeout", "20s"}, replyTopics...)...)
	require.Equal(t, 0, r.code, r.String())
	lines := strings.Split(r.stdout, "\n")
	require.Regexp(t, `^message_id=\S+$`, lines[0])
	require.Regexp(t, `^conversation_id=\S+$`, lines[1])
	require.Equal(t, "HELLO", lines[2])
	conv := strings.TrimPrefix(lines[1], "conversation_id=")

	r = w.run(append([]string{"topic", "request", "up.request", "--body", "fail", "--timeout", "20s"}, replyTopics...)...)
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stdout, "no: fail")
	failedConv := strings.TrimPrefix(strings.Split(r.stdout, "\n")[1], "conversation_id=")

	// No worker for this topic: 124 at the timeout, never a hang.
	began := time.Now()
	r = w.run("topic", "request", "nobody.request", "--body", "x", "--success-topic", "x.done", "--failure-topic", "x.failed", "--timeout", "500ms")
	require.Equal(t, 124, r.code, r.String())
	require.Less(t, time.Since(began), 5*time.Second)

	// Check after, and the pending one still pending (the worker answers it too now).
	r = w.run(append([]string{"topic", "check", "--conversation-id", conv}, replyTopics...)...)
	require.Equal(t, 0, r.code, r.String())
	require.Equal(t, "success\n", r.stdout)
	r = w.run(append([]string{"topic", "check", "--conversation-id", failedConv, "--json"}, replyTopics...)...)
	require.Equal(t, 1, r.code, r.String())
	var chk struct {
		State string       `json:"state"`
		Reply topicMessage `json:"reply"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &chk))
	require.Equal(t, "failure", chk.State)
	require.Equal(t, "up.failed", chk.Reply.Topic)

	// notify: once per request with a reply (the success and the failure;
	// the timed-out one has none), through notify-send when on $PATH.
	bin := t.TempDir()
	sent := filepath.Join(t.TempDir(), "sent")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "notify-send"), []byte("#!/bin/sh\necho \"$*\" >> "+sent+"\n"), 0o755))
	withNotify := append(append([]string{}, w.env...), "PATH="+bin+":"+os.Getenv("PATH"))
	r = ductile(t, withNotify, w.args("topic", "notify", "--once", "--json")...)
	require.Equal(t, 0, r.code, r.String())
	var notified []map[string]any
	for line := range strings.Lines(r.stdout) {
		var n map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &n))
		notified = append(notified, n)
	}
	require.Len(t, notified, 2, r.String())
	require.Equal(t, "success", notified[0]["state"])
	require.Equal(t, "failure", notified[1]["state"])
	got, err := os.ReadFile(sent)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(got), "\n"), string(got))
	require.Contains(t, string(got), "ductile: up.request success")
	// Then silent.
	r = ductile(t, withNotify, w.args("topic", "notify", "--once")...)
	require.Equal(t, 0, r.code, r.String())
	require.Empty(t, r.stderr)
	got2, _ := os.ReadFile(sent)
	require.Equal(t, string(got), string(got2))
}
