// job.js: one job: its facts, payload and result (the last attempt's
// response), progress and exports (its run), attempts with
// the worker of each, logs and events as they come (the job's own stream
// on /events), and cancel and retry buttons (the API checks the session's
// token for jobs:rw, as it would the token).
import { h, badge, pretty, toast } from "./dom.js";
import { get, post, errorText } from "./api.js";
import { go } from "./app.js";

const TERMINAL = new Set(["succeeded", "dead", "canceled"]);
const seconds = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19) : "");

export async function render(main, [id]) {
  const enc = encodeURIComponent(id);
  const title = h("h1", {}, "Job ", h("span", { class: "mono" }, id));
  const state = h("span", { id: "job-status" });
  const cancel = h("button", { type: "button", id: "cancel", onclick: () => act("cancel") }, "Cancel");
  const retry = h("button", { type: "button", id: "retry", onclick: () => act("retry") }, "Retry");
  const facts = h("dl", { class: "facts", id: "facts" });
  const progress = h("div", { id: "progress" });
  const attempts = h("tbody", { id: "attempts" });
  const logs = h("pre", { id: "logs", "aria-label": "Logs" });
  const evs = h("pre", { id: "events", "aria-label": "Events" });
  const payload = h("pre", { id: "payload" });
  const result = h("pre", { id: "result", "aria-label": "Result" });
  const exportsList = h("ul", { id: "exports" });
  main.append(title, h("p", {}, state, " ", h("a", { href: `/ui/job/${id}/tree` }, "Tree")),
    h("div", { class: "actions" }, cancel, retry),
    facts, progress,
    h("h2", {}, "Attempts"), h("table", {}, h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "#"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Worker"),
      h("th", { scope: "col", class: "wide" }, "Started"), h("th", { scope: "col" }, "Error"))), attempts),
    h("h2", {}, "Payload"), payload, h("h2", {}, "Result"), result, h("h2", {}, "Exports"), exportsList,
    h("h2", {}, "Logs"), logs, h("h2", {}, "Events"), evs);

  async function act(what) {
    try {
      const res = await post(`/job/${enc}/${what}`);
      if (what === "retry" && res.job_id && res.job_id !== id) {
        toast(`Retried as job ${res.job_id}`);
        go(`/ui/job/${res.job_id}`);
        return;
      }
      toast(`${what}: ${res.status || "done"}`);
      load();
    } catch (err) { toast(errorText(err), true); }
  }

  async function load() {
    const job = await get(`/job/${enc}`);
    const [run, lg, ev] = await Promise.all([
      get(`/runs/${enc}`).catch(() => null), get(`/job/${enc}/logs`), get(`/job/${enc}/events`)]);
    state.replaceChildren(badge(job.status));
    cancel.disabled = TERMINAL.has(job.status);
    retry.disabled = !(job.status === "dead" || job.status === "canceled");
    const rows = [["Plugin", `${job.plugin} ${job.command}`], ["Attempt", `${job.attempt}/${job.max_attempts}`],
      ["Created", job.created_at], ["Started", job.started_at], ["Completed", job.completed_at],
      ["Error", job.last_error], ["Parent", job.parent_job_id], ["Correlation", job.correlation_id]];
    facts.replaceChildren(...rows.filter(([, v]) => v).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    payload.textContent = pretty(job.payload) || "(none)";
    result.textContent = pretty(job.result) || (TERMINAL.has(job.status) ? "(none)" : "(not yet: the job has not ended)");
    if (run) {
      const p = run.progress;
      progress.replaceChildren(p === null || p === undefined ? "" :
        h("label", {}, `Progress ${Math.round(p * 100)}%${run.stage ? " · " + run.stage : ""}${run.message ? " · " + run.message : ""}`,
          h("progress", { id: "progress-bar", max: 1, value: p })));
      attempts.replaceChildren(...(run.attempts || []).map((a) => h("tr", {},
        h("td", {}, a.attempt), h("td", {}, badge(a.status)),
        h("td", { class: "worker" }, a.worker ? `${a.worker.name}${a.worker.pid ? " (pid " + a.worker.pid + ")" : ""}` : ""),
        h("td", { class: "wide muted" }, seconds(a.started_at)), h("td", {}, a.error || ""))));
      const refs = run.result_refs || [];
      exportsList.replaceChildren(...(refs.length ? refs.map((r) => h("li", { class: "mono" }, pretty(r))) : [h("li", { class: "muted" }, `${run.exports_count || 0} items`)]));
    }
    logs.textContent = (lg.lines || []).map((l) => `${l.at} [${l.attempt}] ${l.stream} ${l.level}: ${l.message}`).join("\n") || "(none)";
    evs.textContent = (ev.events || []).map((e) => `${e.seq} ${e.recorded_at} ${e.type} ${JSON.stringify(e.data)}`).join("\n");
    return job;
  }
  await load();

  // Follow the job's stream: each event reloads the page's parts.
  const es = new EventSource(`/events?job=${enc}&after=0`);
  let timer = null;
  let latest = 0; // the newest seq of the job's stream seen
  const again = () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        const job = await load();
        if (job.updated_seq < latest) again(); // the projection has not read it yet
      } catch { /* the next event tries again */ }
    }, 120);
  };
  const types = ["job.enqueued", "job.started", "job.succeeded", "job.failed", "job.timed_out", "job.retry_scheduled", "job.dead",
    "job.cancel_requested", "job.canceled", "job.recovered", "job.retried", "job.stderr_written", "job.progressed", "job.exported",
    "job.lease_renewed", "job.replayed"];
  for (const t of types) es.addEventListener(t, (msg) => { latest = Math.max(latest, Number(msg.lastEventId)); again(); });
  return () => { clearTimeout(timer); es.close(); };
}
