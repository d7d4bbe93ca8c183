// jobs.js: the live job list. It reads a snapshot (GET /jobs), then follows
// the ledger stream (/events) from the newest change the snapshot holds:
// every job event after it refreshes its job, and an event the snapshot
// already holds (seq <= the job's updated_seq) changes nothing, so a
// reconnect (EventSource resumes with Last-Event-ID) or a reload of the
// page misses nothing and shows nothing twice.
import { h, badge, short, keepFocus } from "./dom.js";
import { get } from "./api.js";
import { filters } from "./filters.js";

/** JOB_EVENTS are the event types that change a job's row. */
export const JOB_EVENTS = ["job.enqueued", "job.started", "job.succeeded", "job.failed", "job.timed_out",
  "job.retry_scheduled", "job.dead", "job.cancel_requested", "job.canceled", "job.recovered", "job.retried"];

const STATUSES = ["", "queued", "running", "cancel_requested", "succeeded", "dead", "canceled"];

/** follow keeps jobs (a Map by id) up to date from the stream after seq
 * after; onChange is called after each change. It answers a function that
 * closes the stream. */
export function follow(jobs, after, onChange, onLive) {
  const pending = new Map(); // job id -> the newest seq seen of it
  const es = new EventSource(`/events?type=${JOB_EVENTS.join(",")}&after=${after}`);
  let closed = false;
  async function refresh(id) {
    for (let i = 0; i < 50 && !closed; i++) {
      const want = pending.get(id);
      let job = null;
      try { job = await get(`/job/${encodeURIComponent(id)}`); } catch { /* not projected yet (404): again */ }
      if (job) {
        const have = jobs.get(id);
        if (!have || job.updated_seq >= have.updated_seq) { jobs.set(id, job); onChange(job); }
        if (job.updated_seq >= want) { pending.delete(id); return; }
      }
      // The projection has not read that event yet: ask again shortly.
      await new Promise((r) => setTimeout(r, 100));
    }
    pending.delete(id);
  }
  const onEvent = (msg) => {
    const ev = JSON.parse(msg.data);
    const id = ev.stream.replace(/^job\//, "");
    const have = jobs.get(id);
    onLive(true, ev.seq);
    if (have && have.updated_seq >= ev.seq) return; // the snapshot holds it
    const busy = pending.has(id);
    pending.set(id, Math.max(pending.get(id) || 0, ev.seq));
    if (!busy) refresh(id);
  };
  for (const t of JOB_EVENTS) es.addEventListener(t, onEvent);
  es.onopen = () => onLive(true);
  es.onerror = () => onLive(false);
  return () => { closed = true; es.close(); };
}

/** render draws the list and follows the stream. */
export async function render(main, _params, query) {
  const jobs = new Map();
  const bar = filters("/ui/", query, STATUSES, () => draw());
  const live = h("span", { class: "live off", id: "live", role: "status" }, "connecting");
  const body = h("tbody", { id: "jobs" });
  main.append(
    h("h1", {}, "Jobs ", live),
    bar.el,
    h("table", {}, h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Command"), h("th", { scope: "col" }, "Status"),
      h("th", { scope: "col", class: "wide" }, "Attempt"), h("th", { scope: "col", class: "wide" }, "Created"))), body),
    h("p", { class: "muted", id: "count" }));

  const matches = (j) => bar.matches(j.plugin, j.status, [j.job_id, j.plugin, j.command, j.last_error, JSON.stringify(j.payload || "")]);
  const row = (j) => h("tr", { "data-job-id": j.job_id, "data-status": j.status },
    h("td", { class: "mono" }, h("a", { href: `/ui/job/${j.job_id}`, title: j.job_id }, short(j.job_id))),
    h("td", {}, `${j.plugin} ${j.command}`),
    h("td", {}, badge(j.status)),
    h("td", { class: "wide" }, `${j.attempt}/${j.max_attempts}`),
    h("td", { class: "wide muted" }, (j.created_at || "").replace("T", " ").slice(0, 19)));
  let scheduled = false;
  const draw = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => {
      scheduled = false;
      const shown = [...jobs.values()].sort((a, b) => b.seq - a.seq).filter(matches);
      keepFocus(body, "data-job-id", () => body.replaceChildren(...shown.slice(0, 500).map(row)));
      document.getElementById("count").textContent = `${shown.length} of ${jobs.size} jobs`;
    });
  };
  const snap = await get("/jobs?limit=500");
  let after = 0;
  for (const j of snap.jobs) { jobs.set(j.job_id, j); after = Math.max(after, j.updated_seq); }
  draw();
  return follow(jobs, after, draw, (on, seq) => {
    live.className = on ? "live on" : "live off";
    live.textContent = on ? "live" : "reconnecting";
    if (seq) live.dataset.seq = seq;
  });
}
