// pipelines.js: the pipelines (GET /pipelines) with their last run, and one
// pipeline's page: its graph, its runs kept live, and the run chosen drawn
// on the graph (each step with the status of the job it ran, or skipped).
// Both follow the ledger stream: a pipeline event (a run started, a step
// ended, a run finished) or a change of a job the chosen run holds reads
// the runs again, at most a few times a second.
import { h, badge, short, throttle, when, keepFocus } from "./dom.js";
import { get } from "./api.js";
import { draw } from "./graph.js";
import { stream, liveBadge } from "./live.js";

const RUN_EVENTS = ["pipeline.run_started", "pipeline.step_ended", "pipeline.run_finished"];
const JOB_EVENTS = ["job.enqueued", "job.started", "job.succeeded", "job.failed", "job.timed_out", "job.retry_scheduled",
  "job.dead", "job.cancel_requested", "job.canceled", "job.recovered"];

export async function render(main, [name]) {
  return name === undefined ? renderList(main) : renderOne(main, name);
}

async function renderList(main) {
  const [live, setLive] = liveBadge("pipelines-live");
  const body = h("tbody", { id: "pipelines" });
  main.append(h("h1", {}, "Pipelines ", live),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Pipeline"), h("th", { scope: "col", class: "wide" }, "Trigger"),
      h("th", { scope: "col", class: "wide" }, "Steps"), h("th", { scope: "col" }, "Last run"))), body));
  const { pipelines = [] } = await get("/pipelines");
  if (!pipelines.length) {
    main.append(h("p", { class: "muted" }, "No pipelines in the config (add a pipelines: section; see docs/pipelines.md)."));
  }
  const refresh = throttle(async () => {
    const { runs = [] } = await get("/runs?kind=pipeline&limit=200").catch(() => ({}));
    const last = new Map();
    for (const r of runs) if (!last.has(r.pipeline)) last.set(r.pipeline, r);
    keepFocus(body, "data-pipeline", () => body.replaceChildren(...pipelines.map((p) => {
      const r = last.get(p.name);
      return h("tr", { "data-pipeline": p.name },
        h("td", {}, h("a", { href: `/ui/pipeline/${encodeURIComponent(p.name)}` }, p.name), " ", h("span", { class: "muted" }, p.execution_mode)),
        h("td", { class: "wide mono" }, p.trigger || ""),
        h("td", { class: "wide" }, String(p.steps)),
        h("td", {}, r ? [badge(r.status), " ", h("span", { class: "muted" }, when(r.started_at))] : h("span", { class: "muted" }, "none in the last 200 runs")));
    })));
  }, 300);
  const live$ = stream(["pipeline.run_started", "pipeline.run_finished"], refresh, setLive, "", refresh);
  await live$.opened;
  refresh();
  return live$.close;
}

async function renderOne(main, name) {
  const enc = encodeURIComponent(name);
  const p = await get(`/pipelines/${enc}`);
  const [live, setLive] = liveBadge("pipeline-live");
  const holder = h("div", { class: "graph-holder", id: "graph" });
  const caption = h("p", { class: "muted", id: "graph-caption" });
  const body = h("tbody", { id: "pipeline-runs" });
  main.append(h("h1", {}, "Pipeline ", h("span", { class: "mono" }, p.name), " ", live),
    h("dl", { class: "facts" },
      h("dt", {}, "Trigger"), h("dd", { class: "mono" }, p.trigger || ""),
      h("dt", {}, "Mode"), h("dd", {}, `${p.execution_mode} (timeout ${p.timeout})`),
      h("dt", {}, "Steps"), h("dd", {}, String(p.steps)),
      h("dt", {}, "Hash"), h("dd", { class: "mono" }, p.hash),
      p.file ? [h("dt", {}, "Defined"), h("dd", { class: "mono" }, `${p.file}:${p.line}`)] : null),
    h("div", { class: "actions" }, h("a", { href: `/ui/trigger?pipeline=${enc}` }, "Run it…")),
    h("h2", {}, "Graph"), caption, holder,
    h("h2", {}, "Runs"),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Run"), h("th", { scope: "col" }, "Status"),
      h("th", { scope: "col", class: "wide" }, "Trigger"), h("th", { scope: "col", class: "wide" }, "Started"),
      h("th", { scope: "col" }, "Tree"))), body));

  let runs = [];
  let chosen = null; // the run drawn on the graph: its id, or null for the newest
  let overlay = { run: null, status: new Map(), jobs: new Map() };

  const drawGraph = () => {
    // Only a step shows its job: a gate or a join shares its node id.
    const status = (v) => (v.kind === "step" ? overlay.status.get(v.node) : undefined);
    const link = (v) => (v.kind === "step" && overlay.jobs.get(v.node) ? `/ui/job/${overlay.jobs.get(v.node)}` : "");
    holder.replaceChildren(draw(p.graph, status, link));
    const r = overlay.run;
    holder.dataset.run = r ? r.run_id : "";
    caption.textContent = r ? `Run ${short(r.run_id)} (${r.status}, ${when(r.started_at)}): each step shows the status of the job it ran.` :
      "No run yet: start one with Run it…";
  };
  let reading = 0; // counts readOverlay()s: only the latest draws
  const readOverlay = async () => {
    const n = ++reading;
    const id = chosen || (runs[0] && runs[0].run_id);
    if (!id) { overlay = { run: null, status: new Map(), jobs: new Map() }; drawGraph(); return; }
    const run = await get(`/runs/${encodeURIComponent(id)}`);
    const jobs = new Map(); // node -> job id (the newest)
    const status = new Map(); // node -> status shown
    let tree = { jobs: [] };
    if (run.job_id) tree = await get(`/job/${encodeURIComponent(run.job_id)}/tree`).catch(() => tree);
    const of = new Map(tree.jobs.map((j) => [j.job_id, j.status]));
    for (const st of run.steps || []) {
      if (st.outcome === "enqueued" && st.job_id && !of.has(st.job_id)) {
        // Not in the tree read (a truncated tree): ask for the job itself.
        const job = await get(`/job/${encodeURIComponent(st.job_id)}`).catch(() => null);
        of.set(st.job_id, job ? job.status : "unknown");
      }
    }
    for (const st of run.steps || []) {
      if (st.outcome === "enqueued" && st.job_id) {
        jobs.set(st.node, st.job_id);
        status.set(st.node, of.get(st.job_id));
      } else {
        status.set(st.node, st.outcome); // skipped | dropped
      }
    }
    if (n !== reading) return; // a newer read (another run chosen, a later change) draws
    overlay = { run, status, jobs };
    drawGraph();
    renderRuns();
  };
  const renderRuns = () => {
    const shown = overlay.run && overlay.run.run_id;
    keepFocus(body, "data-run-id", () => body.replaceChildren(...runs.map((r) => h("tr", { "data-run-id": r.run_id, "data-status": r.status, class: r.run_id === shown ? "chosen" : "" },
      h("td", { class: "mono" }, h("button", {
        type: "button", class: "link", "aria-pressed": r.run_id === shown ? "true" : "false", title: `Draw run ${r.run_id} on the graph`,
        onclick: () => { chosen = r.run_id; readOverlay().catch(() => {}); },
      }, short(r.run_id))),
      h("td", {}, badge(r.status), r.error ? h("div", { class: "muted" }, r.error) : null),
      h("td", { class: "wide" }, r.trigger || ""),
      h("td", { class: "wide muted" }, when(r.started_at)),
      h("td", {}, r.job_id ? h("a", { href: `/ui/job/${r.job_id}/tree` }, "tree") : "")))));
    if (!runs.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No runs of this pipeline in the ledger.")));
  };
  const readRuns = async () => {
    const list = await get(`/runs?kind=pipeline&pipeline=${enc}&limit=20`);
    runs = list.runs || [];
    renderRuns();
    await readOverlay();
  };
  const refresh = throttle(() => { readRuns().catch(() => {}); }, 250);

  const ours = (ev) => {
    if (ev.type.startsWith("pipeline.")) {
      const run = ev.stream.replace(/^run\//, "");
      return (ev.data && ev.data.pipeline === name) || runs.some((r) => r.run_id === run);
    }
    const job = ev.stream.replace(/^job\//, "");
    return [...overlay.jobs.values()].includes(job) || (overlay.run && overlay.run.job_id === job);
  };
  const live$ = stream([...RUN_EVENTS, ...JOB_EVENTS], (ev) => { if (ours(ev)) refresh(); }, setLive, "", refresh);
  try {
    await live$.opened;
    await readRuns();
  } catch (err) { live$.close(); throw err; }
  return live$.close;
}
