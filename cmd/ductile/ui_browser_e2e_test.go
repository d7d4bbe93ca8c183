package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// uiDaemon is a daemon serving a routed chain (fetch → transcribe →
// notify, a second each: slowStep), a plugin that hangs, one that reports
// progress, a pipeline with a gated split (sort: stepa, then stepb beside
// stepc, whose if is false, then a join), a schedule (tick/beat, every
// 2 s), with a token of every scope.
type uiDaemon struct {
	base, token string
	// release is the file the hold plugin waits for before it emits
	// "fetched" (routed on to transcribe, then notify).
	release string
}

func startUIDaemon(t *testing.T) uiDaemon {
	t.Helper()
	dir, root := t.TempDir(), t.TempDir()
	slowStep(t, root, "fetch", "fetched")
	slowStep(t, root, "transcribe", "transcribed")
	slowStep(t, root, "notify", "")
	slowStep(t, root, "stepa", "a.done")
	slowStep(t, root, "stepb", "")
	slowStep(t, root, "stepc", "")
	slowStep(t, root, "tick", "")
	release := filepath.Join(dir, "release")
	holdDir := filepath.Join(root, "hold")
	require.NoError(t, os.MkdirAll(holdDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(holdDir, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: hold\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.sh\ncommands: {handle: {type: write}}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(holdDir, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\nwhile [ ! -e '"+release+"' ]; do sleep 0.05; done\nprintf '%s\\n' '{\"status\":\"ok\",\"result\":\"done\",\"events\":[{\"type\":\"fetched\",\"payload\":{\"from\":\"hold\"}}]}'\n"), 0o755))
	hang := filepath.Join(root, "hang")
	require.NoError(t, os.MkdirAll(hang, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hang, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: hang\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.sh\ncommands: {handle: {type: write}}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(hang, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\nexec sleep 300\n"), 0o755))
	progress := filepath.Join(root, "progress")
	require.NoError(t, os.MkdirAll(progress, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(progress, "manifest.yaml"), []byte("manifest_spec: ductile.plugin\nmanifest_version: 1\nname: progress\nversion: 0.1.0\nprotocol: 2\nentrypoint: run.sh\ncommands: {handle: {type: write}}\n"), 0o644))
	// Reports progress 0.1 … 0.9 on the control channel, 0.6 s apart (the
	// ledger keeps one job.progressed a second), then succeeds.
	require.NoError(t, os.WriteFile(filepath.Join(progress, "run.sh"), []byte("#!/bin/sh\ncat >/dev/null\nfor p in 1 2 3 4 5 6 7 8 9; do printf '{\"progress\":0.%s,\"stage\":\"work\"}\\n' $p >&3; sleep 0.6; done\nprintf '%s\\n' '{\"status\":\"ok\",\"result\":\"done\"}'\n"), 0o755))
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`api: {listen: 127.0.0.1:0}
plugin_roots: ["`+root+`"]
service: {max_workers: 8}
routes:
  - {from: fetch, event_type: fetched, to: transcribe}
  - {from: hold, event_type: fetched, to: transcribe}
  - {from: transcribe, event_type: transcribed, to: notify}
plugins:
  tick: {schedules: [{id: beat, every: 2s, command: handle}]}
pipelines:
  - name: tell
    steps:
      - {id: first, uses: notify, baggage: {web.url: payload.url}}
  - name: sort
    steps:
      - {id: a, uses: stepa}
      - id: fan
        split:
          - {id: b, uses: stepb}
          - {id: c, uses: stepc, if: {path: payload.from, op: eq, value: nobody}}
      - {id: end, uses: notify}
`), 0o600))
	args := func(a ...string) []string {
		return append([]string{"--config", cfg, "--state-dir", filepath.Join(dir, "state")}, a...)
	}
	env := cleanEnv(t)
	d := uiDaemon{release: release, token: lastLine(mustRun(t, env, args("config", "token", "create", "admin", "--scopes", "*")...).stdout)}
	p := start(t, env, args("system", "start")...)
	line, _ := p.waitLine(t, 0, messageIs("api: listening"))
	var listening struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &listening))
	d.base = "http://" + listening.Addr
	p.waitLine(t, 0, messageIs("ductile started"))
	return d
}

// api calls the daemon with the token and decodes the answer into out.
func (d uiDaemon) api(t *testing.T, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Less(t, res.StatusCode, 300, "%s %s: %s", method, path, raw)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s %s: %s", method, path, raw)
	}
}

func (d uiDaemon) enqueue(t *testing.T, plugin, payload string) string {
	t.Helper()
	var out struct {
		JobID string `json:"job_id"`
	}
	d.api(t, "POST", "/plugin/"+plugin+"/handle", payload, &out)
	return out.JobID
}

type uiTree struct {
	Jobs []struct {
		ID         string `json:"job_id"`
		Seq        int64  `json:"seq"`
		Plugin     string `json:"plugin"`
		Status     string `json:"status"`
		UpdatedSeq int64  `json:"updated_seq"`
	} `json:"jobs"`
}

// statuses are the tree's statuses by job id.
func (tr uiTree) statuses() map[string]string {
	out := map[string]string{}
	for _, j := range tr.Jobs {
		out[j.ID] = j.Status
	}
	return out
}

// browser is a headless Chromium (Debian's chromium), or the test skips
// (fails when CI is set: CI must run these).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no chromium on PATH and CI is set: install it (apt-get install -y chromium; .ci/run does)")
		}
		t.Skip("no chromium on PATH: install Debian's chromium (apt-get install -y chromium) to run the browser tests")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1000, 800), chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	began := time.Now()
	require.NoError(t, chromedp.Do(ctx), "start chromium at %s", path)
	t.Logf("chromium (%s) started in %v", path, time.Since(began).Round(time.Millisecond))
	return ctx
}

// run runs steps with a deadline.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*waitTimeout)
	defer cancel()
	err := chromedp.Do(ctx, steps...)
	if err != nil {
		// What the page showed, to tell why.
		page, _ := chromedp.Run(context.WithoutCancel(ctx), chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("%s: %v\nthe page:\n%s", what, err, page)
	}
}

// eval is the value of a script in the page (a promise's, awaited).
func eval[T any](t *testing.T, ctx context.Context, script string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	require.NoError(t, err, script)
	return v
}

// signIn opens path, signs in with the daemon's token and waits for
// ready (a selector) on the page it lands on.
func (d uiDaemon) signIn(t *testing.T, ctx context.Context, path, ready string) {
	t.Helper()
	run(t, ctx, "sign in",
		chromedp.Navigate(d.base+path),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), d.token),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(ready)))
}

// fitsIn360 checks that the page shown does not scroll sideways at 360 px.
func fitsIn360(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	run(t, ctx, "360 px", chromedp.EmulateViewport(360, 740))
	overflow := eval[bool](t, ctx, `new Promise(r => requestAnimationFrame(() => r(document.documentElement.scrollWidth > 360)))`)
	run(t, ctx, "wide again", chromedp.EmulateViewport(1000, 800))
	require.False(t, overflow, "%s scrolls sideways at 360 px", what)
}

// screenshot saves the page, at width × height, to the file $env names
// (nothing when it is unset): how the docs' pictures are taken.
func screenshot(t *testing.T, ctx context.Context, env string, width, height int64) {
	t.Helper()
	shot := os.Getenv(env)
	if shot == "" {
		return
	}
	run(t, ctx, "viewport for the screenshot", chromedp.EmulateViewport(width, height))
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	run(t, ctx, "viewport", chromedp.EmulateViewport(1000, 800))
}

// TestUIInBrowser drives the page in headless Chromium against the real
// daemon: sign in (no token in localStorage, the cookie out of scripts'
// reach), a job triggered through the API appears live and turns
// succeeded, a reload while jobs run misses none and shows none twice,
// the routed tree's slider shows the statuses the API's tree?at= gives
// at each seq (and moves with the keyboard), a running job is canceled
// from its page, and the list fits 360 px.
func TestUIInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	d := startUIDaemon(t)

	d.signIn(t, ctx, "/ui/", `#live.on`)
	leaked := eval[bool](t, ctx, fmt.Sprintf(`localStorage.length > 0 || sessionStorage.length > 0 || document.cookie.includes("ductile_session") || document.documentElement.outerHTML.includes(%q)`, d.token))
	require.False(t, leaked, "the token or the session cookie is in reach of the page's scripts")

	// A job appears live and turns succeeded.
	began := time.Now()
	root := d.enqueue(t, "fetch", `{"url":"u"}`)
	run(t, ctx, "the job appears", chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id="`+root+`"]`)))
	t.Logf("a job enqueued through the API showed in the list after %v", time.Since(began).Round(time.Millisecond))
	run(t, ctx, "the job succeeds", chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id="`+root+`"][data-status="succeeded"]`)))
	t.Logf("and showed succeeded after %v", time.Since(began).Round(time.Millisecond))

	// A reload mid-stream: jobs enqueued before, during and after it each
	// show once, with the status the API gives.
	var ids []string
	for range 3 {
		ids = append(ids, d.enqueue(t, "notify", `{}`))
	}
	run(t, ctx, "reload", chromedp.Reload())
	for range 3 {
		ids = append(ids, d.enqueue(t, "notify", `{}`))
	}
	run(t, ctx, "live again", chromedp.WaitVisible(chromedp.CSS(`#live.on`)))
	for range 3 {
		ids = append(ids, d.enqueue(t, "notify", `{}`))
	}
	for _, id := range ids {
		run(t, ctx, "job "+id+" succeeded", chromedp.WaitVisible(chromedp.CSS(`tr[data-job-id="`+id+`"][data-status="succeeded"]`)))
	}
	rows := eval[map[string]int](t, ctx, `[...document.querySelectorAll("tr[data-job-id]")].reduce((m, r) => (m[r.dataset.jobId] = (m[r.dataset.jobId] || 0) + 1, m), {})`)
	for _, id := range ids {
		require.Equal(t, 1, rows[id], "job %s shows %d times", id, rows[id])
	}

	fitsIn360(t, ctx, "the job list")

	// The routed tree, once the chain ended, replayed with the slider.
	var now uiTree
	waitFor(t, 4*waitTimeout, "the chain to finish", func() bool {
		d.api(t, "GET", "/job/"+root+"/tree", "", &now)
		return len(now.Jobs) == 3 && now.Jobs[2].Status == "succeeded"
	})
	run(t, ctx, "open the tree", chromedp.Navigate(d.base+"/ui/job/"+root+"/tree"),
		chromedp.WaitVisible(chromedp.CSS(`.node[data-status="succeeded"]`)))
	first, last := now.Jobs[0].Seq, int64(0)
	for _, j := range now.Jobs {
		last = max(last, j.UpdatedSeq)
	}
	screenshot(t, ctx, "UI_TREE_SCREENSHOT", 760, 560)
	seen := map[string]bool{}
	for _, at := range []int64{first, first + 2, (first + last) / 2, last - 3, last} {
		var want uiTree
		d.api(t, "GET", fmt.Sprintf("/job/%s/tree?at=%d", root, at), "", &want)
		eval[bool](t, ctx, fmt.Sprintf(`{const s = document.getElementById("slider"); s.value = %d; s.dispatchEvent(new Event("input")); true}`, at))
		run(t, ctx, fmt.Sprintf("slide to %d", at),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#tree-holder[data-at="%d"]`, at))))
		got := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll(".node")].map(n => [n.dataset.jobId, n.dataset.status]))`)
		require.Equal(t, want.statuses(), got, "the tree at seq %d", at)
		seen[fmt.Sprint(got)] = true
	}
	require.GreaterOrEqual(t, len(seen), 3, "the slider showed the tree at different moments")
	run(t, ctx, "Home key", chromedp.Focus(chromedp.ID("slider")), chromedp.KeyEvent(kb.Home),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#tree-holder[data-at="%d"]`, first))))

	// Cancel a running job from its page.
	hung := d.enqueue(t, "hang", `{}`)
	run(t, ctx, "open the job", chromedp.Navigate(d.base+"/ui/job/"+hung),
		chromedp.WaitVisible(chromedp.CSS(`#job-status [data-status="running"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#attempts td.worker`)),
		chromedp.Click(chromedp.ID("cancel")),
		chromedp.WaitVisible(chromedp.CSS(`#job-status [data-status="canceled"]`)))
	var job struct {
		Status string `json:"status"`
	}
	d.api(t, "GET", "/job/"+hung, "", &job)
	require.Equal(t, "canceled", job.Status)
	retryOn := eval[bool](t, ctx, `!document.getElementById("retry").disabled && document.getElementById("cancel").disabled`)
	require.True(t, retryOn, "a canceled job offers retry, not cancel")

	// A run appears live in the run list, running with its progress; then
	// its progress bar moves on its page.
	run(t, ctx, "open the runs", chromedp.Navigate(d.base+"/ui/runs"), chromedp.WaitVisible(chromedp.CSS(`#runs-live.on`)))
	slow := d.enqueue(t, "progress", `{}`)
	run(t, ctx, "the run appears running with progress", chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id="`+slow+`"][data-status="running"] progress`)))
	run(t, ctx, "open the run", chromedp.Navigate(d.base+"/ui/job/"+slow), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	firstValue := eval[float64](t, ctx, `document.getElementById("progress-bar").value`)
	var moved float64
	waitFor(t, 3*waitTimeout, "the progress bar to move", func() bool {
		moved = eval[float64](t, ctx, `(document.getElementById("progress-bar") || {value: 0}).value`)
		return moved > firstValue
	}, func() string {
		return fmt.Sprintf("first %v, now %v; the page: %s", firstValue, moved, eval[string](t, ctx, `location.href + "\n" + document.body.innerText`))
	})
	t.Logf("the progress bar moved from %.1f to %.1f", firstValue, moved)

	// The run list's filters: a plugin it is not hides the run, its own
	// shows it again, and the filter is kept in the address (a reload
	// keeps it).
	run(t, ctx, "runs filtered by address", chromedp.Navigate(d.base+"/ui/runs?plugin=notify"), chromedp.WaitVisible(chromedp.CSS(`#runs-live.on`)),
		chromedp.WaitNotPresent(chromedp.CSS(`tr[data-run-id="`+slow+`"]`)))
	require.Equal(t, "notify", eval[string](t, ctx, `document.getElementById("r-plugin").value`))
	eval[bool](t, ctx, `{const p = document.getElementById("r-plugin"); p.value = "progress"; p.dispatchEvent(new Event("input")); true}`)
	run(t, ctx, "filtered in", chromedp.WaitVisible(chromedp.CSS(`tr[data-run-id="`+slow+`"]`)))
	require.Equal(t, "?plugin=progress", eval[string](t, ctx, `location.search`))

	// Trigger: a payload that is not a JSON object cannot be sent; a valid
	// one enqueues and opens the new job.
	run(t, ctx, "open trigger", chromedp.Navigate(d.base+"/ui/trigger"), chromedp.WaitVisible(chromedp.ID("t-payload")))
	eval[bool](t, ctx, `{const p = document.getElementById("t-plugin"); p.value = "notify"; p.dispatchEvent(new Event("change")); true}`)
	eval[bool](t, ctx, `{const p = document.getElementById("t-payload"); p.value = '{"a": '; p.dispatchEvent(new Event("input")); true}`)
	require.True(t, eval[bool](t, ctx, `document.getElementById("t-send").disabled && document.getElementById("t-check").textContent.startsWith("Not valid")`))
	eval[bool](t, ctx, `{const p = document.getElementById("t-payload"); p.value = '{"a": 1}'; p.dispatchEvent(new Event("input")); true}`)
	run(t, ctx, "send", chromedp.Click(chromedp.ID("t-send")), chromedp.WaitVisible(chromedp.CSS(`#job-status [data-status="succeeded"]`)))
	triggered := eval[string](t, ctx, `location.pathname.split("/").pop()`)
	var sent struct {
		Plugin  string          `json:"plugin"`
		Payload json.RawMessage `json:"payload"`
	}
	d.api(t, "GET", "/job/"+triggered, "", &sent)
	require.Equal(t, "notify", sent.Plugin)
	require.JSONEq(t, `{"a": 1}`, string(sent.Payload))
	run(t, ctx, "the job's result", chromedp.WaitVisible(chromedp.CSS(`#result`)))
	require.Contains(t, eval[string](t, ctx, `document.getElementById("result").textContent`), `"result": "done"`, "the page shows the plugin's response")

	// Trigger a pipeline: the page opens its tree, whose job carries the
	// baggage the step took from the payload.
	run(t, ctx, "open trigger", chromedp.Navigate(d.base+"/ui/trigger"), chromedp.WaitVisible(chromedp.ID("t-payload")),
		chromedp.Click(chromedp.ID("t-kind-pipeline")), chromedp.WaitVisible(chromedp.ID("t-pipeline")),
		chromedp.SendKeys(chromedp.ID("t-pipeline"), "tell"))
	eval[bool](t, ctx, `{const p = document.getElementById("t-payload"); p.value = '{"url": "https://example.com/a"}'; p.dispatchEvent(new Event("input")); true}`)
	run(t, ctx, "start the pipeline", chromedp.Click(chromedp.ID("t-send")), chromedp.WaitVisible(chromedp.CSS(`#tree .node pre`)))
	baggage := eval[string](t, ctx, `document.querySelector("#tree .node pre").textContent`)
	require.Contains(t, baggage, "https://example.com/a", "the tree shows the step's baggage")

	// Sign out: the page asks for a token again, and the API refuses.
	run(t, ctx, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token")))
	status := eval[int](t, ctx, `fetch("/jobs").then(r => r.status)`)
	require.Equal(t, http.StatusUnauthorized, status)
}
