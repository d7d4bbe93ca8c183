package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// APIOptions configure APILoad.
type APIOptions struct {
	// Binary is a ductile executable: APILoad runs it as the daemon
	// (system start) and to make the token (config token create).
	Binary   string
	Clients  []int        // concurrent keep-alive clients of each measurement (default 1 and 32)
	Requests int          // requests of each round (default 5000)
	Rounds   int          // rounds of each client count (default 3)
	Progress func(string) // optional progress lines
	TempDir  string       // parent of the scratch state dir (default os.TempDir())
}

// APIResult is what ductile bench --api prints: per client count, each
// round's figures and their median.
type APIResult struct {
	Requests int         `json:"requests_per_round"`
	Runs     []APIFigure `json:"runs"`
	// DaemonCPUMSPerRequest is the daemon process's CPU (all its threads)
	// over all rounds of that client count, per request; zero where /proc
	// cannot tell.
	DaemonCPUMSPerRequest map[int]float64 `json:"daemon_cpu_ms_per_request"`
	// Queued is how many jobs the daemon's queue held at the end: every
	// enqueue accepted (the warm-up's too), checked.
	Queued int64 `json:"queued"`
}

// APIFigure is one round of one client count: request latency as the
// client sees it (send to last byte of the 202).
type APIFigure struct {
	Clients     int     `json:"clients"`
	Round       int     `json:"round"`
	P50MS       float64 `json:"p50_ms"`
	P99MS       float64 `json:"p99_ms"`
	MaxMS       float64 `json:"max_ms"`
	RequestsSec float64 `json:"requests_per_sec"`
}

// The load target: bench's poll, with the daemon's one worker held by a
// hold job that sleeps for the whole run. With no free slot the dispatcher
// never reads the queue, so the jobs the load enqueues only queue up: the
// figure is the API and the durable enqueue (HTTP, token check, the
// enqueue decision, the group-committed fsync, the projector's fold),
// not plugin spawns, which could not keep up with thousands a second.
const (
	apiPluginManifest = `manifest_spec: ductile.plugin
manifest_version: 1
name: bench
version: 1.0.0
protocol: 2
entrypoint: run.sh
description: does nothing, quickly; hold sleeps
commands:
  poll: {type: read}
  hold: {type: write}
`
	apiPluginScript = "#!/bin/sh\ncase \"$(cat)\" in *'\"hold\"'*) exec sleep 3600;; esac\necho '{\"status\":\"ok\",\"result\":\"ok\"}'\n"
)

// APILoad starts a daemon (Binary system start, its API on a free loopback
// port, one worker held busy) on a scratch state directory, makes a token,
// and drives POST /plugin/bench/poll from this process with keep-alive
// clients: the clients and the server are separate processes.
func APILoad(ctx context.Context, opts APIOptions) (APIResult, error) {
	if len(opts.Clients) == 0 {
		opts.Clients = []int{1, 32}
	}
	if opts.Requests <= 0 {
		opts.Requests = 5000
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 3
	}
	progress := opts.Progress
	if progress == nil {
		progress = func(string) {}
	}
	res := APIResult{Requests: opts.Requests, DaemonCPUMSPerRequest: map[int]float64{}}
	dir, err := os.MkdirTemp(opts.TempDir, "ductile-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	pluginDir := filepath.Join(dir, "plugins", "bench")
	if err := os.MkdirAll(pluginDir, 0o755); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "manifest.yaml"), []byte(apiPluginManifest), 0o644); err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(pluginDir, "run.sh"), []byte(apiPluginScript), 0o755); err != nil {
		return res, err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return res, err
	}
	configPath := filepath.Join(dir, "config.yaml")
	config := fmt.Sprintf("plugin_roots: [%q]\nservice: {max_workers: 1}\napi: {listen: %q}\nplugins:\n  bench: {timeouts: {handle: 2h}}\n",
		filepath.Join(dir, "plugins"), addr)
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return res, err
	}
	stateDir := filepath.Join(dir, "state")
	args := func(a ...string) []string {
		return append([]string{"--config", configPath, "--state-dir", stateDir}, a...)
	}
	create := exec.CommandContext(ctx, opts.Binary, args("config", "token", "create", "bench", "--scopes", "*")...)
	var createErr bytes.Buffer
	create.Stderr = &createErr
	out, err := create.Output()
	if err != nil {
		return res, fmt.Errorf("config token create: %w: %s", err, createErr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	key := strings.TrimSpace(lines[len(lines)-1])

	proc, err := startDaemonProcess(ctx, opts.Binary, stateDir, args("system", "start"))
	if err != nil {
		return res, err
	}
	defer proc.Stop()

	base := "http://" + addr
	transport := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	post := func(path string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := client.Do(req)
		if err != nil {
			return "", err
		}
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return "", err
		}
		if r.StatusCode != http.StatusAccepted {
			return "", fmt.Errorf("POST %s: %d %s", path, r.StatusCode, body)
		}
		return string(body), nil
	}
	if err := waitForAPI(ctx, client, base); err != nil {
		return res, err
	}
	// Hold the one worker, and wait until the hold job runs.
	accepted, err := post("/plugin/bench/hold")
	if err != nil {
		return res, err
	}
	var hold struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal([]byte(accepted), &hold); err != nil {
		return res, err
	}
	if err := waitForStatus(ctx, client, base, key, hold.JobID, "running"); err != nil {
		return res, err
	}
	// Warm up: connections, the daemon's statement caches.
	const warmUp = 1000
	if _, err := load(ctx, post, max(slices.Max(opts.Clients), 1), warmUp); err != nil {
		return res, err
	}
	daemonPID := proc.PID()
	for _, clients := range opts.Clients {
		cpuBefore, cpuKnown := processCPUOf(daemonPID)
		for round := range opts.Rounds {
			progress(fmt.Sprintf("%d clients, round %d/%d: %d requests…", clients, round+1, opts.Rounds, opts.Requests))
			fig, err := load(ctx, post, clients, opts.Requests)
			if err != nil {
				return res, err
			}
			fig.Round = round + 1
			res.Runs = append(res.Runs, fig)
		}
		if cpuAfter, ok := processCPUOf(daemonPID); ok && cpuKnown {
			res.DaemonCPUMSPerRequest[clients] = milliseconds(cpuAfter-cpuBefore) / float64(opts.Requests*opts.Rounds)
		}
	}
	want := int64(warmUp + opts.Requests*opts.Rounds*len(opts.Clients))
	res.Queued, err = waitForQueued(ctx, client, base, key, want)
	return res, err
}

// waitForQueued waits until the daemon's queue holds want queued jobs (its
// projection follows the ledger) and returns how many it holds.
func waitForQueued(ctx context.Context, client *http.Client, base, key string, want int64) (int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/queue?limit=1", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		var q struct {
			Counts struct {
				Queued int64 `json:"queued"`
			} `json:"counts"`
		}
		err = json.NewDecoder(r.Body).Decode(&q)
		r.Body.Close()
		if err != nil {
			return 0, err
		}
		if q.Counts.Queued == want {
			return q.Counts.Queued, nil
		}
		if q.Counts.Queued > want || time.Now().After(deadline) {
			return q.Counts.Queued, fmt.Errorf("the daemon's queue holds %d jobs, not the %d accepted", q.Counts.Queued, want)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// load sends n enqueues from clients concurrent clients, each waiting for
// its answer before it sends the next.
func load(ctx context.Context, post func(string) (string, error), clients, n int) (APIFigure, error) {
	latencies := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				sent := time.Now()
				if _, err := post("/plugin/bench/poll"); err != nil {
					failed.Store(err)
					return
				}
				latencies[i] = time.Since(sent)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		return APIFigure{}, err
	}
	if err := ctx.Err(); err != nil {
		return APIFigure{}, err
	}
	ms := make([]float64, n)
	for i, d := range latencies {
		ms[i] = milliseconds(d)
	}
	slices.Sort(ms)
	return APIFigure{Clients: clients, P50MS: quantile(ms, 0.50), P99MS: quantile(ms, 0.99), MaxMS: ms[n-1],
		RequestsSec: float64(n) / elapsed.Seconds()}, nil
}

// freeLoopbackAddr is a loopback address with a port free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitForAPI waits until the daemon's API answers /healthz.
func waitForAPI(ctx context.Context, client *http.Client, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := client.Get(base + "/healthz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon's API did not answer: %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitForStatus waits until GET /job/{id} says status.
func waitForStatus(ctx context.Context, client *http.Client, base, key, id, status string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/job/"+id, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := client.Do(req)
		if err != nil {
			return err
		}
		var job struct {
			Status string `json:"status"`
		}
		err = json.NewDecoder(r.Body).Decode(&job)
		r.Body.Close()
		if err == nil && job.Status == status {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("the hold job did not start: " + job.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
