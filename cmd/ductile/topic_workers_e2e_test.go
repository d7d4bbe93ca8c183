package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// topicDaemon is a daemon with its API on the state directory of a
// topicWorld: local topic workers and CLI commands act on its ledger,
// remote ones on its API.
type topicDaemon struct {
	*topicWorld
	api *runsWorld
}

func newTopicDaemon(t *testing.T) *topicDaemon {
	t.Helper()
	api := newRunsWorld(t, "api: {listen: 127.0.0.1:0}\n")
	return &topicDaemon{api: api, topicWorld: &topicWorld{t: t, state: api.state, env: cleanEnv(t)}}
}

// messages reads every message of topic through the API.
func (d *topicDaemon) messages(topic string) []topicMessage {
	d.t.Helper()
	var all []topicMessage
	after := ""
	for {
		q := url.Values{"topic": {topic}, "limit": {"1000"}}
		if after != "" {
			q.Set("after", after)
		}
		var page topicPage
		d.api.doJSON(http.StatusOK, &page, "GET", "/messages?"+q.Encode(), nil)
		all = append(all, page.Messages...)
		if page.Next == "" {
			return all
		}
		after = page.Next
	}
}

// publishAPI publishes body to topic through the API.
func (d *topicDaemon) publishAPI(topic, body string) topicMessage {
	d.t.Helper()
	var m topicMessage
	d.api.doJSON(http.StatusCreated, &m, "POST", "/topics/"+topic+"/messages", map[string]any{"body": body, "producer": "e2e"})
	return m
}

// TestTopicWorkerKilledMidMessage: a worker SIGKILLed while its command
// runs leaves its claim to its lease; once it runs out another worker
// claims the message and replies: exactly one follow-up, and the
// inspection shows the second attempt completed.
func TestTopicWorkerKilledMidMessage(t *testing.T) {
	t.Parallel()
	d := newTopicDaemon(t)
	pidFile := filepath.Join(t.TempDir(), "cmd.pid")
	cmd := []string{"sh", "-c", `echo $$ > "$PIDFILE"; [ -n "$SLOW" ] && sleep 60; echo "answered $(cat)"`}
	flags := []string{"--topic", "kill.request", "--success-topic", "kill.done", "--failure-topic", "kill.failed", "--lease", "2s"}
	m := d.publish("kill.request", "once")
	first := d.worker(append(append([]string{}, d.env...), "PIDFILE="+pidFile, "SLOW=1"), flags, cmd...)
	pgid := readPID(t, pidFile)
	// The command runs in its own process group, which SIGKILL of the
	// worker does not reach: the test ends it.
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	killed := time.Now()
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.done

	second := d.worker(append(append([]string{}, d.env...), "PIDFILE="+filepath.Join(t.TempDir(), "pid")), append(flags, "--once"), cmd...)
	require.Equal(t, 0, second.wait(t), second.stderr.String())
	t.Logf("the second worker replied %v after the first was killed (lease 2s, backoff 1s)", time.Since(killed).Round(time.Millisecond))
	replies := d.messages("kill.done")
	require.Len(t, replies, 1, "exactly one follow-up")
	require.Equal(t, "answered once\n", replies[0].Body)
	require.Equal(t, m.MessageID, replies[0].ParentID)
	var inspected struct {
		Claims []struct {
			Status   string `json:"status"`
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
		} `json:"claims"`
	}
	d.mustJSON(0, &inspected, "topic", "inspect", "--message", m.MessageID, "--json")
	require.Len(t, inspected.Claims, 1)
	require.Equal(t, "completed", inspected.Claims[0].Status)
	require.Equal(t, "terminal", inspected.Claims[0].State)
	require.Equal(t, 2, inspected.Claims[0].Attempts)
	mustRun(t, d.env, d.args("ledger", "verify")...)
}

// topicLoadMessages is how many messages the four workers share:
// E2E_TOPIC_MESSAGES, default 400 (the figure).
func topicLoadMessages(t *testing.T) int {
	n := 400
	if s := os.Getenv("E2E_TOPIC_MESSAGES"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "E2E_TOPIC_MESSAGES")
	}
	return n
}

// TestTopicFourWorkersShareAGroup: four local workers of one group drain
// N messages: exactly N follow-ups with N distinct parents, every worker
// exits 0 on SIGTERM with no error logged, ledger verify is clean. The
// messages/s figure is logged.
func TestTopicFourWorkersShareAGroup(t *testing.T) {
	t.Parallel()
	n := topicLoadMessages(t)
	d := newTopicDaemon(t)
	published := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < n; j += 8 {
				code, raw, err := d.api.call("POST", "/topics/load.request/messages", map[string]any{"body": fmt.Sprintf("m%d", j)})
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("publish: %d %s", code, raw)
				}
				var m topicMessage
				if err == nil {
					err = json.Unmarshal(raw, &m)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				published[m.ID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, published, n)

	flags := []string{"--topic", "load.request", "--success-topic", "load.done", "--failure-topic", "load.failed", "--group", "loaders"}
	began := time.Now()
	var workers []*proc
	for range 4 {
		workers = append(workers, d.worker(nil, flags, "sh", "-c", `echo "ok $(cat)"`))
	}
	var done []topicMessage
	waitFor(t, 4*time.Minute, fmt.Sprintf("%d follow-ups", n), func() bool {
		done = d.messages("load.done")
		return len(done) >= n
	}, func() string { return fmt.Sprintf("%d follow-ups", len(done)) })
	took := time.Since(began)
	t.Logf("4 workers, %d messages: %v, %.0f messages/s (claim, run sh, follow-up)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	for _, p := range workers {
		require.Equal(t, 0, p.signal(t, syscall.SIGTERM), p.stderr.String())
		require.NotContains(t, p.stderr.String(), `"level":"ERROR"`)
		require.NotContains(t, p.stderr.String(), `"level":"WARN"`)
	}
	require.Len(t, d.messages("load.done"), n, "exactly one follow-up per message")
	require.Empty(t, d.messages("load.failed"))
	parents := map[string]bool{}
	for _, m := range done {
		require.True(t, published[m.ParentID], "follow-up %s of an unknown parent %s", m.ID, m.ParentID)
		require.Equal(t, "ok "+strings.TrimPrefix(m.Body, "ok "), m.Body)
		parents[m.ParentID] = true
	}
	require.Len(t, parents, n, "distinct parents")
	mustRun(t, d.env, d.args("ledger", "verify")...)
}

// TestTopicRemoteWorkerOverHTTP: a topic worker on another machine (its
// own state directory) claims over HTTP with a worker-scoped token; a
// remote CLI with a topics:rw token publishes, requests and reads. The
// worker token reads nothing; /metrics counts the claims; GET /events
// filters by conversation.
func TestTopicRemoteWorkerOverHTTP(t *testing.T) {
	t.Parallel()
	d := newTopicDaemon(t)
	workerKey := lastLine(mustRun(t, nil, d.api.args("config", "token", "create", "topic-worker", "--scopes", "worker")...).stdout)
	topicsKey := lastLine(mustRun(t, nil, d.api.args("config", "token", "create", "topic-cli", "--scopes", "topics:rw")...).stdout)
	mustRun(t, nil, d.api.args("system", "reload")...)

	elsewhere := cleanEnv(t, "XDG_STATE_HOME="+t.TempDir())
	remote := func(args ...string) result {
		return ductile(t, append(append([]string{}, elsewhere...), "DUCTILE_TOKEN="+topicsKey), append(args, "--api", d.api.base)...)
	}
	worker := start(t, append(append([]string{}, elsewhere...), "DUCTILE_WORKER_TOKEN="+workerKey), "--log-format", "json", "worker",
		"--api", d.api.base, "--topic", "remote.request", "--success-topic", "remote.done", "--failure-topic", "remote.failed", "--name", "far",
		"--", "sh", "-c", `echo "far says $(cat) to $DUCTILE_META_WHO"`)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("remote worker: %s", worker.kill())
		}
	})

	r := remote("topic", "request", "remote.request", "--body", "hi", "--meta", "who=you", "--success-topic", "remote.done",
		"--failure-topic", "remote.failed", "--timeout", "20s", "--json")
	require.Equal(t, 0, r.code, r.String())
	var out struct {
		ConversationID string       `json:"conversation_id"`
		State          string       `json:"state"`
		Reply          topicMessage `json:"reply"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	require.Equal(t, "success", out.State)
	require.Equal(t, "far says hi to you\n", out.Reply.Body)

	var page topicPage
	r = remote("topic", "read", "--conversation", out.ConversationID, "--json")
	require.Equal(t, 0, r.code, r.String())
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Messages, 2)
	r = remote("topic", "inspect", "--conversation", out.ConversationID)
	require.Equal(t, 0, r.code, r.String())
	require.Contains(t, r.stdout, "worker far/")
	require.Contains(t, r.stdout, "terminal (completed)")

	// The worker's token reads nothing, and publishes nothing.
	r = ductile(t, elsewhere, "topic", "read", "--topic", "remote.done", "--api", d.api.base, "--token", workerKey, "--json")
	require.Equal(t, 1, r.code, r.String())
	require.Contains(t, r.stderr, `"code":"forbidden"`)

	// The events of the conversation, and its claims, are on /events.
	stream := d.api.openSSE("/events?after=0&conversation="+out.ConversationID, "")
	var types []string
	for range 6 { // published, claimed, claim_ended + follow-up published
		ev := stream.next(t, waitTimeout)
		types = append(types, ev.Event)
		if len(types) == 3 {
			break
		}
	}
	require.Equal(t, []string{"message.published", "message.claimed", "message.claim_ended"}, types)

	code, raw := d.api.do("GET", "/metrics", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(raw), `ductile_topic_claims_total{status="completed",topic="remote.request"} 1`)
	require.Contains(t, string(raw), `ductile_topic_messages_published_total{topic="remote.request"} 1`)
	require.Equal(t, 0, worker.signal(t, syscall.SIGTERM), worker.stderr.String())
}

// TestTopicGaugesCountWhatLocalWorkersDo: the topic gauges of /metrics are
// read from the projections, so a worker on the local ledger (claiming
// without the API) shows: an active claim while its command runs, and the
// group's backlog going down as it answers.
func TestTopicGaugesCountWhatLocalWorkersDo(t *testing.T) {
	t.Parallel()
	d := newTopicDaemon(t)
	for i := range 3 {
		d.publishAPI("gauge.request", fmt.Sprintf("m%d", i))
	}
	metricsShow := func(what, line string) {
		t.Helper()
		var raw []byte
		waitFor(t, waitTimeout, what, func() bool {
			_, raw = d.api.do("GET", "/metrics", nil)
			return strings.Contains(string(raw), line)
		}, func() string { return string(raw) })
	}
	flags := []string{"--topic", "gauge.request", "--success-topic", "gauge.done", "--failure-topic", "gauge.failed", "--group", "g", "--once"}

	gate := filepath.Join(t.TempDir(), "gate")
	env := append(append([]string{}, d.env...), "GATE="+gate)
	p := d.worker(env, flags, "sh", "-c", `while [ ! -e "$GATE" ]; do sleep 0.02; done; cat`)
	metricsShow("the claim live", `ductile_topic_claims_active{state="live",topic="gauge.request"} 1`)
	metricsShow("group g's backlog of 3", `ductile_topic_backlog{group="g",topic="gauge.request"} 3`)
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	metricsShow("group g's backlog of 2", `ductile_topic_backlog{group="g",topic="gauge.request"} 2`)

	p = d.worker(nil, flags, "sh", "-c", "cat")
	require.Equal(t, 0, p.wait(t), p.stderr.String())
	metricsShow("group g's backlog of 1", `ductile_topic_backlog{group="g",topic="gauge.request"} 1`)
}
