package main_test

import (
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestUIPipelinesSchedulesAndLiveTree drives, in headless Chromium against
// the real daemon, the pages the first browser test does not: a pipeline
// drawn as the graph GET /pipelines/{name} gives, with a run that appears
// live and is drawn on the graph step by step as the ledger records it
// (the skipped branch too); the schedules page showing each schedule's next
// run and breaker, and its last firing changing live as the schedule
// fires; a registered worker on the workers page; and a job tree that
// grows on its page, without a reload, while the routed chain runs.
func TestUIPipelinesSchedulesAndLiveTree(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	d := startUIDaemon(t)
	d.signIn(t, ctx, "/ui/pipelines", `#pipelines tr[data-pipeline="sort"]`)
	run(t, ctx, "live", chromedp.WaitVisible(chromedp.CSS(`#pipelines-live.on`)))

	// The graph is the API's: one drawn vertex per vertex, one line per edge.
	var p struct {
		Graph struct {
			Vertices []struct {
				ID   string `json:"id"`
				Kind string `json:"kind"`
				Node string `json:"node"`
			} `json:"vertices"`
			Edges []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"edges"`
		} `json:"graph"`
	}
	d.api(t, "GET", "/pipelines/sort", "", &p)
	run(t, ctx, "open the pipeline", chromedp.Click(chromedp.CSS(`#pipelines tr[data-pipeline="sort"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#graph svg`)), chromedp.WaitVisible(chromedp.CSS(`#pipeline-live.on`)))
	drawn := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#graph g.g-v")].map(g => [g.dataset.vertex, g.dataset.kind]))`)
	want := map[string]string{}
	for _, v := range p.Graph.Vertices {
		want[v.ID] = v.Kind
	}
	require.Equal(t, want, drawn, "the page draws the API's vertices")
	require.Equal(t, len(p.Graph.Edges), eval[int](t, ctx, `document.querySelectorAll("#graph g.g-edge").length`))
	kinds := map[string]bool{}
	for _, k := range drawn {
		kinds[k] = true
	}
	for _, k := range []string{"start", "step", "gate", "split", "join", "end"} {
		require.True(t, kinds[k], "a %s vertex is drawn: %v", k, drawn)
	}

	// A run started elsewhere appears live and is drawn on the graph as
	// the ledger goes: stepa runs, then b succeeds beside c skipped, then
	// the join's step, and the run succeeds.
	var started struct {
		RunID string `json:"run_id"`
		JobID string `json:"job_id"`
	}
	began := time.Now()
	d.api(t, "POST", "/pipeline/sort", `{}`, &started)
	run(t, ctx, "the run appears", chromedp.WaitVisible(chromedp.CSS(`#pipeline-runs tr[data-run-id="`+started.RunID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#graph[data-run="`+started.RunID+`"]`)))
	t.Logf("a run started through the API was drawn on its pipeline's graph %v later", time.Since(began).Round(time.Millisecond))
	seen := map[string]bool{}
	waitFor(t, 4*waitTimeout, "the run drawn to its end", func() bool {
		got := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll("#graph g.g-v[data-kind=step]")].map(g => [g.dataset.node, g.dataset.status || ""]))`)
		seen[got["a"]] = true
		return got["a"] == "succeeded" && got["b"] == "succeeded" && got["c"] == "skipped" && got["end"] == "succeeded"
	})
	t.Logf("the first step was drawn as %v", seen)
	run(t, ctx, "the run succeeded", chromedp.WaitVisible(chromedp.CSS(`#pipeline-runs tr[data-run-id="`+started.RunID+`"][data-status="succeeded"]`)))
	var runRes struct {
		Status string `json:"status"`
		Steps  []struct {
			Node    string `json:"node"`
			Outcome string `json:"outcome"`
			JobID   string `json:"job_id"`
		} `json:"steps"`
	}
	d.api(t, "GET", "/runs/"+started.RunID, "", &runRes)
	require.Equal(t, "succeeded", runRes.Status)
	for _, st := range runRes.Steps {
		if st.JobID == "" {
			continue
		}
		href := eval[string](t, ctx, fmt.Sprintf(`(document.querySelector('#graph a:has(g[data-node=%q])') || {getAttribute: () => ""}).getAttribute("href")`, st.Node))
		require.Equal(t, "/ui/job/"+st.JobID, href, "step %s links to its job", st.Node)
	}
	// Keyboard: the run's button keeps the focus while a new run redraws
	// the list; a step of the graph is a link that opens its job in the
	// page (no reload).
	run(t, ctx, "focus the run's button", chromedp.Focus(chromedp.CSS(`#pipeline-runs tr[data-run-id="`+started.RunID+`"] button`)))
	var another struct {
		RunID string `json:"run_id"`
	}
	d.api(t, "POST", "/pipeline/sort", `{}`, &another)
	run(t, ctx, "the second run appears", chromedp.WaitVisible(chromedp.CSS(`#pipeline-runs tr[data-run-id="`+another.RunID+`"]`)))
	focused := eval[string](t, ctx, `(document.activeElement.closest("tr") || {dataset: {}}).dataset.runId || document.activeElement.tagName`)
	require.Equal(t, started.RunID, focused, "the focus stayed on the first run's button")
	run(t, ctx, "draw the first run", chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`#graph[data-run="`+started.RunID+`"]`)))
	eval[bool](t, ctx, `window.__samePipelinePage = true`)
	run(t, ctx, "follow a step's link", chromedp.Click(chromedp.CSS(`#graph a:has(g[data-node="b"])`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status [data-status="succeeded"]`)))
	require.True(t, eval[bool](t, ctx, `window.__samePipelinePage === true`), "the step's link moved inside the page")
	run(t, ctx, "back to the pipeline", chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.CSS(`#graph svg`)))

	screenshot(t, ctx, "UI_PIPELINE_SCREENSHOT", 900, 1300)
	fitsIn360(t, ctx, "the pipeline page")

	// Schedules: next run and breaker; the last firing changes live.
	run(t, ctx, "open the schedules", chromedp.Navigate(d.base+"/ui/schedules"),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="tick/beat"][data-breaker="closed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules-live.on`)))
	next := eval[string](t, ctx, `document.querySelector('tr[data-schedule="tick/beat"] td[data-next]').dataset.next`)
	_, err := time.Parse(time.RFC3339Nano, next)
	require.NoError(t, err, "the next run is a time: %q", next)
	lastJob := func() string {
		return eval[string](t, ctx, `document.querySelector('tr[data-schedule="tick/beat"] td[data-last-job]').dataset.lastJob`)
	}
	var first string
	waitFor(t, 2*waitTimeout, "a firing shown", func() bool { first = lastJob(); return first != "" })
	var second string
	waitFor(t, 2*waitTimeout, "the next firing shown live", func() bool { second = lastJob(); return second != first && second != "" })
	fitsIn360(t, ctx, "the schedules page")
	var sched struct {
		Schedules []struct {
			Plugin    string `json:"plugin"`
			ID        string `json:"id"`
			LastFired *struct {
				JobID string `json:"job_id"`
			} `json:"last_fired"`
		} `json:"schedules"`
	}
	d.api(t, "GET", "/schedules", "", &sched)
	require.Len(t, sched.Schedules, 1)
	var fired struct {
		Plugin  string `json:"plugin"`
		Command string `json:"command"`
	}
	d.api(t, "GET", "/job/"+url.PathEscape(second), "", &fired)
	require.Equal(t, "tick", fired.Plugin, "the firing shown is a job of the schedule")

	// Workers: one registered through the API is listed with its host and
	// plugins.
	d.api(t, "POST", "/worker/register", `{"name":"gpu1","host":"gpu1.lan","version":"v-test","concurrency":2,
		"plugins":[{"name":"render","version":"1","concurrency_safe":true,"commands":[{"name":"handle","type":"write"}]}]}`, nil)
	run(t, ctx, "open the workers", chromedp.Navigate(d.base+"/ui/workers"),
		chromedp.WaitVisible(chromedp.CSS(`#workers tr[data-worker="gpu1"]`)))
	row := eval[string](t, ctx, `document.querySelector('#workers tr[data-worker="gpu1"]').innerText`)
	require.Contains(t, row, "gpu1.lan")
	require.Contains(t, row, "render")
	require.Contains(t, row, "0 of 2")

	// The tree grows on its page while the chain runs: opened on the root
	// alone (hold waits for a file), it ends with all three jobs
	// succeeded, without a reload.
	root := d.enqueue(t, "hold", `{}`)
	run(t, ctx, "open the tree", chromedp.Navigate(d.base+"/ui/job/"+root+"/tree"),
		chromedp.WaitVisible(chromedp.CSS(`#tree .node[data-status="running"]`)), chromedp.WaitVisible(chromedp.CSS(`#tree-live.on`)))
	require.Equal(t, 1, eval[int](t, ctx, `document.querySelectorAll("#tree .node").length`))
	eval[bool](t, ctx, `window.__sameTreePage = true`)
	require.NoError(t, os.WriteFile(d.release, nil, 0o644))
	released := time.Now()
	run(t, ctx, "the tree grows", chromedp.WaitVisible(chromedp.CSS(`#tree li li .node`)))
	t.Logf("the tree's second job was drawn %v after the first was released", time.Since(released).Round(time.Millisecond))
	run(t, ctx, "the tree grows to three succeeded jobs",
		chromedp.WaitVisible(chromedp.CSS(`#tree li li li .node[data-status="succeeded"]`)))
	require.Equal(t, 3, eval[int](t, ctx, `document.querySelectorAll('#tree .node[data-status="succeeded"]').length`))
	require.True(t, eval[bool](t, ctx, `window.__sameTreePage === true`), "the page was not reloaded")
	atEnd := eval[bool](t, ctx, `{const s = document.getElementById("slider"); s.value === s.max}`)
	require.True(t, atEnd, "the slider followed the tree to its end")
}
