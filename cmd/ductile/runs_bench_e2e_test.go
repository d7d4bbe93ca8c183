package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRunsProgressFlood is one run of the reporter fixture's flood
// (1,000 progress lines and one export item on fd 3) through a real
// daemon, one run at a time, each a POST /runs in mode sync (answered once
// the run ended: no polling adds to the daemon's CPU). It
// reports the daemon's CPU per run (cpu-ms/run) and its plugins'
// (plugin-cpu-ms/run) beside the wall time.
func BenchmarkRunsProgressFlood(b *testing.B) {
	d := startBenchDaemon(b, "reporter: {retry: {max_attempts: 1}}")
	self0, children0, err := cpuTimes(d.pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if c := d.post(b, `{"plugin_id":"reporter","entry_id":"flood","mode":"sync"}`); c.Status != "succeeded" {
			b.Fatalf("run %s: %s", c.RunID, c.Status)
		}
	}
	b.StopTimer()
	self1, children1, err := cpuTimes(d.pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(self1-self0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/run")
	b.ReportMetric(float64(children1-children0)/float64(time.Millisecond)/float64(b.N), "plugin-cpu-ms/run")
}

// benchDaemon is a daemon started for a benchmark (the e2e helpers take a
// *testing.T): its API's base URL, a key with every scope, its pid.
type benchDaemon struct {
	base, key string
	pid       int
	client    *http.Client
}

// startBenchDaemon starts a daemon with the API on 127.0.0.1:0 and the
// plugins config plugins (one YAML line under plugins:) from
// testdata/runplugins; the benchmark's cleanup stops it.
func startBenchDaemon(b *testing.B, plugins string) *benchDaemon {
	b.Helper()
	dir := b.TempDir()
	root, err := filepath.Abs(filepath.Join("testdata", "runplugins"))
	if err != nil {
		b.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	yaml := fmt.Sprintf("plugin_roots: [%q]\napi: {listen: 127.0.0.1:0}\nplugins:\n  %s\n", root, plugins)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DUCTILE_") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "XDG_STATE_HOME="+filepath.Join(dir, "xdg"))
	args := func(a ...string) []string {
		return append([]string{"--config", config, "--state-dir", filepath.Join(dir, "state")}, a...)
	}
	token := exec.Command(ductileBin, args("config", "token", "create", "bench", "--scopes", "*")...)
	token.Env = env
	out, err := token.Output()
	if err != nil {
		b.Fatalf("config token create: %v", err)
	}
	d := &benchDaemon{key: lastLine(string(out)), client: &http.Client{Timeout: procTimeout}}

	cmd := exec.Command(ductileBin, args("system", "start")...)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	d.pid = cmd.Process.Pid
	started := make(chan error, 2) // started, then exited: neither send blocks
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l struct {
				Message string `json:"message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch l.Message {
			case "api: listening":
				d.base = "http://" + l.Addr
			case "ductile started":
				started <- nil
			}
		}
		started <- fmt.Errorf("the daemon exited before it started")
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { <-drained; _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(waitTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
		d.client.CloseIdleConnections()
	})
	select {
	case err := <-started:
		if err != nil {
			b.Fatal(err)
		}
	case <-time.After(waitTimeout):
		b.Fatal("the daemon did not start")
	}
	return d
}

// post creates a run from the JSON body.
func (d *benchDaemon) post(b *testing.B, body string) runCreated {
	req, err := http.NewRequest(http.MethodPost, d.base+"/runs", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	var c runCreated
	d.send(b, req, &c)
	return c
}

func (d *benchDaemon) send(b *testing.B, req *http.Request, out any) {
	resp, err := d.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		b.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.Fatalf("%s %s: %v: %s", req.Method, req.URL.Path, err, raw)
	}
}
