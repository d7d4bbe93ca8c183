package workerhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ductile/ductile/commands"
	"github.com/ductile/ductile/engine"
	"github.com/ductile/ductile/events"
	"github.com/ductile/ductile/pluginhost"
)

// maxAnswer bounds how much of an answer the client reads.
const maxAnswer = 4 << 20

// Client calls the worker endpoints of a daemon's HTTP API (the worker
// HTTP contract of docs/remote-workers.md) as one worker.
type Client struct {
	base   string
	token  string
	http   *http.Client
	worker events.Worker
	link   *link // set by New: what the host knows of the daemon's reachability
}

// NewClient is a Client of the API at base (https://host:port) that
// authenticates with token (a key with the worker scope) as worker.
func NewClient(base, token string, hc *http.Client, worker events.Worker) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc, worker: worker}
}

// Worker is who the client calls as.
func (c *Client) Worker() events.Worker { return c.worker }

// APIError is an answer of the API that is not a success: its status and
// the stable code and message of its JSON body.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// CodeStaleFence is the code of a completion, renewal, log batch or
// control line sent with a fence that no longer holds the job.
const CodeStaleFence = "stale_fence"

// CodeUnknownWorker is the code of a request from a worker the daemon has
// no registration of.
const CodeUnknownWorker = "unknown_worker"

// IsStaleFence says err is the daemon's refusal of a stale fence: the job
// is no longer this worker's.
func IsStaleFence(err error) bool { return hasCode(err, CodeStaleFence) }

func hasCode(err error, code string) bool {
	var a *APIError
	return errors.As(err, &a) && a.Code == code
}

// permanent says err will not go away by asking again: the request or
// the credentials are wrong (4xx but 408 and 429).
func permanent(err error) bool {
	var a *APIError
	return errors.As(err, &a) && a.Status >= 400 && a.Status < 500 && a.Status != http.StatusRequestTimeout && a.Status != http.StatusTooManyRequests
}

// Registered is the daemon's answer to a registration.
type Registered struct {
	Name          string `json:"name"`
	LeasePeriodMS int64  `json:"lease_period_ms"`
}

// LeasePeriod is how long a claim or a renewal holds.
func (r Registered) LeasePeriod() time.Duration {
	return time.Duration(r.LeasePeriodMS) * time.Millisecond
}

// Register records the worker and the plugins it serves;
// concurrency is how many jobs it runs at once.
func (c *Client) Register(ctx context.Context, host, version string, concurrency int, plugins []events.WorkerPlugin) (Registered, error) {
	var out Registered
	err := c.call(ctx, "/worker/register", map[string]any{"name": c.worker.Name, "host": host, "version": version, "pid": c.worker.PID,
		"concurrency": concurrency, "plugins": plugins}, &out)
	return out, err
}

// Claim asks for a job of plugins (nil: every plugin registered), waiting
// up to wait for one; nil, nil when none came.
func (c *Client) Claim(ctx context.Context, plugins []string, wait time.Duration) (*engine.Claimed, error) {
	var out struct {
		Claim *engine.Claimed `json:"claim"`
	}
	err := c.call(ctx, "/worker/claim", map[string]any{"worker": c.worker, "plugins": plugins, "wait_ms": wait.Milliseconds()}, &out)
	return out.Claim, err
}

// lease names the attempt a request is about.
type lease struct {
	Worker  events.Worker `json:"worker"`
	Attempt int           `json:"attempt"`
	Fence   int64         `json:"fence"`
}

func (c *Client) lease(cl *engine.Claimed) lease {
	return lease{Worker: c.worker, Attempt: cl.Attempt, Fence: cl.Fence}
}

// Renew renews the lease on cl's job.
func (c *Client) Renew(ctx context.Context, cl *engine.Claimed) (commands.Renewed, error) {
	var out commands.Renewed
	err := c.call(ctx, "/worker/jobs/"+cl.JobID+"/renew", c.lease(cl), &out)
	return out, err
}

// logLine is one stderr line as the logs endpoint takes it.
type logLine struct {
	At   time.Time `json:"at"`
	Text string    `json:"text"`
}

// Logs sends a batch of the plugin's stderr lines.
func (c *Client) Logs(ctx context.Context, cl *engine.Claimed, lines pluginhost.StderrLines) error {
	body := struct {
		lease
		Line      int       `json:"line"` // the first line's number among the attempt's, from 1
		Lines     []logLine `json:"lines"`
		Truncated bool      `json:"truncated"`
	}{lease: c.lease(cl), Line: lines.First + 1, Lines: make([]logLine, 0, len(lines.Lines)), Truncated: lines.Truncated}
	for _, l := range lines.Lines {
		body.Lines = append(body.Lines, logLine{At: l.At, Text: l.Text})
	}
	return c.call(ctx, "/worker/jobs/"+cl.JobID+"/logs", body, nil)
}

// Control forwards one control line of the plugin: its progress or an
// export item; for an export, the answer is the item's id.
func (c *Client) Control(ctx context.Context, cl *engine.Claimed, progress *events.Progressed, export *events.Exported) (string, error) {
	body := struct {
		lease
		Progress *events.Progressed `json:"progress,omitempty"`
		Export   *events.Exported   `json:"export,omitempty"`
	}{lease: c.lease(cl), Progress: progress, Export: export}
	var out struct {
		ExportItemID string `json:"export_item_id"`
	}
	err := c.call(ctx, "/worker/jobs/"+cl.JobID+"/control", body, &out)
	return out.ExportItemID, err
}

// Complete records how the attempt went (a.Fence and a.Worker set).
func (c *Client) Complete(ctx context.Context, a engine.Attempt) error {
	return c.call(ctx, "/worker/jobs/"+a.JobID+"/complete", a, nil)
}

// Fail records an attempt the worker could not run its plugin for.
func (c *Client) Fail(ctx context.Context, cl *engine.Claimed, kind events.Outcome, message string, retryable bool) error {
	body := struct {
		lease
		Kind      events.Outcome `json:"kind"`
		Error     string         `json:"error"`
		Retryable bool           `json:"retryable"`
		ExitCode  int            `json:"exit_code"`
		Duration  time.Duration  `json:"duration_ns"`
	}{lease: c.lease(cl), Kind: kind, Error: message, Retryable: retryable, ExitCode: -1}
	return c.call(ctx, "/worker/jobs/"+cl.JobID+"/fail", body, nil)
}

// call POSTs in as JSON to path and decodes a 200 answer into out (a 204
// leaves it as it is), and notes whether the daemon answered.
func (c *Client) call(ctx context.Context, path string, in, out any) error {
	sent := time.Now()
	err := c.post(ctx, path, in, out)
	c.link.note(ctx, path, sent, err)
	return err
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("POST %s: %w (check --api: a URL such as https://host:8443)", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("POST %s: read the answer: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return nil
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if out == nil || len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("POST %s: the answer is not what a worker expects (is --api the daemon's API, of the same version?): %w", path, err)
		}
		return nil
	}
	a := &APIError{Status: resp.StatusCode}
	if json.Unmarshal(data, a) != nil || a.Code == "" {
		a.Code, a.Message = "error", strings.TrimSpace(string(data))
		if len(a.Message) > 200 {
			a.Message = a.Message[:200] + "…"
		}
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		a.Hint = "the token is not valid: give a key made with `ductile config token create NAME --scopes worker`"
	case http.StatusForbidden:
		if a.Hint == "" {
			a.Hint = "the token lacks the worker scope, or the daemon's api.hosts does not name the host of --api"
		}
	case http.StatusNotFound:
		if a.Code != CodeUnknownWorker && a.Hint == "" {
			a.Hint = "is --api the daemon's API, of a version with worker endpoints?"
		}
	}
	return fmt.Errorf("POST %s: %w", path, a)
}
