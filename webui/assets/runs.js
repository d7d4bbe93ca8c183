// runs.js: the live run list. Plugin runs come from a snapshot (GET /runs)
// and then the runs channel (/runs/stream) from the newest seq the snapshot
// holds: a change whose seq a run's record already holds is skipped, so a
// reconnect (Last-Event-ID) or a reload misses nothing and shows nothing
// twice. Pipeline runs are read again whenever a pipeline run starts or
// finishes (the ledger stream of those two events).
import { h, badge, short, throttle, keepFocus } from "./dom.js";
import { get } from "./api.js";
import { stream } from "./live.js";
import { filters } from "./filters.js";

const when = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "");

const STATUSES = ["", "queued", "running", "cancel_requested", "succeeded", "failed", "timeout", "canceled"];

export async function render(main, _params, query) {
  const runs = new Map();
  const bar = filters("/ui/runs", query, STATUSES, () => draw(), "r");
  const live = h("span", { class: "live off", id: "runs-live", role: "status" }, "connecting");
  const body = h("tbody", { id: "runs" });
  const pipes = h("tbody", { id: "pipeline-runs" });
  main.append(h("h1", {}, "Runs ", live), bar.el,
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Run"), h("th", { scope: "col" }, "Plugin"),
      h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Progress"), h("th", { scope: "col", class: "wide" }, "Created"))), body),
    h("h2", {}, "Pipeline runs"),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Run"), h("th", { scope: "col" }, "Pipeline"),
      h("th", { scope: "col" }, "Status"), h("th", { scope: "col", class: "wide" }, "Started"))), pipes));
  const row = (r) => h("tr", { "data-run-id": r.run_id, "data-status": r.status },
    h("td", { class: "mono" }, h("a", { href: `/ui/job/${r.run_id}`, title: r.run_id }, short(r.run_id))),
    h("td", {}, `${r.plugin_id || ""} ${r.entry_id || ""}`),
    h("td", {}, badge(r.status)),
    h("td", {}, r.progress === null || r.progress === undefined ? "" : h("progress", { max: 1, value: r.progress, "aria-label": "Progress" })),
    h("td", { class: "wide muted" }, when(r.created_at)));
  let scheduled = false;
  const draw = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      const shown = [...runs.values()].filter((r) => bar.matches(r.plugin_id, r.status,
        [r.run_id, r.plugin_id, r.entry_id, r.task_id, r.error && (r.error.message || JSON.stringify(r.error)), r.stage, r.message]));
      keepFocus(body, "data-run-id", () => body.replaceChildren(...shown.sort((a, b) => b.created_at - a.created_at).slice(0, 500).map(row)));
    });
  };
  const drawPipes = (pipeline) => keepFocus(pipes, "data-run-id", () => pipes.replaceChildren(...(pipeline.runs || []).map((r) => h("tr", { "data-run-id": r.run_id, "data-status": r.status },
    h("td", { class: "mono" }, r.job_id ? h("a", { href: `/ui/job/${r.job_id}/tree` }, short(r.run_id)) : short(r.run_id)),
    h("td", {}, r.pipeline ? h("a", { href: `/ui/pipeline/${encodeURIComponent(r.pipeline)}` }, r.pipeline) : ""),
    h("td", {}, badge(r.status || "")), h("td", { class: "wide muted" }, r.started_at || "")))));
  const readPipes = () => get("/runs?kind=pipeline&limit=50").then(drawPipes, () => {});
  const refreshPipes = throttle(readPipes, 300);
  const pipeLive = stream(["pipeline.run_started", "pipeline.run_finished"], refreshPipes, () => {}, "", refreshPipes);
  let snap;
  try {
    await pipeLive.opened;
    [snap] = await Promise.all([get("/runs?kind=plugin&limit=200"), readPipes()]);
  } catch (err) { pipeLive.close(); throw err; }
  let after = 0;
  for (const r of snap.runs || []) { runs.set(r.run_id, r); after = Math.max(after, r.seq || 0); }
  draw();

  const es = new EventSource(`/runs/stream?after=${after}`);
  es.addEventListener("run", async (msg) => {
    const ch = JSON.parse(msg.data);
    const have = runs.get(ch.run_id);
    if (have && (have.seq || 0) >= ch.seq) return; // the snapshot holds it
    if (have) {
      Object.assign(have, { status: ch.status, progress: ch.progress, updated_at: ch.updated_at, seq: ch.seq });
    } else {
      runs.set(ch.run_id, { run_id: ch.run_id, status: ch.status, progress: ch.progress, seq: ch.seq, created_at: ch.updated_at });
      get(`/runs/${encodeURIComponent(ch.run_id)}`).then((r) => {
        const now = runs.get(ch.run_id);
        runs.set(ch.run_id, (now && now.seq > r.seq) ? { ...r, status: now.status, progress: now.progress, seq: now.seq } : r);
        draw();
      }).catch(() => {});
    }
    draw();
  });
  es.onopen = () => { live.className = "live on"; live.textContent = "live"; };
  es.onerror = () => { live.className = "live off"; live.textContent = "reconnecting"; };
  return () => { es.close(); pipeLive.close(); };
}
