// tree.js: a job's tree as nested boxes, each with its status and baggage,
// and a time slider over the ledger's seqs from the root's enqueue to the
// tree's last change: moving it fetches /job/{id}/tree?at=SEQ and redraws.
import { h, badge, short, pretty } from "./dom.js";
import { get } from "./api.js";

function draw(tree) {
  const children = new Map();
  for (const j of tree.jobs) {
    const p = j.parent_job_id || "";
    if (!children.has(p)) children.set(p, []);
    children.get(p).push(j);
  }
  const ids = new Set(tree.jobs.map((j) => j.job_id));
  const node = (j) => h("li", {},
    h("div", { class: `node s-${j.status}`, "data-job-id": j.job_id, "data-status": j.status },
      h("a", { class: "title", href: `/ui/job/${j.job_id}` }, `${j.plugin} ${j.command}`), " ",
      badge(j.status), " ", h("span", { class: "mono muted" }, short(j.job_id)),
      j.context && Object.keys(j.context).length ? h("pre", { "aria-label": "Baggage" }, pretty(j.context)) : null),
    (children.get(j.job_id) || []).length ? h("ul", {}, children.get(j.job_id).map(node)) : null);
  const roots = tree.jobs.filter((j) => !j.parent_job_id || !ids.has(j.parent_job_id));
  return h("ul", { class: "tree", id: "tree" }, roots.map(node));
}

export async function render(main, [id]) {
  const enc = encodeURIComponent(id);
  const now = await get(`/job/${enc}/tree`);
  const root = now.jobs[0];
  const first = root ? root.seq : 1;
  const last = Math.max(first, ...now.jobs.map((j) => j.updated_seq));
  const slider = h("input", { type: "range", id: "slider", min: first, max: last, value: last, step: 1, "aria-label": "Ledger seq" });
  const label = h("output", { id: "slider-label", for: "slider" });
  const holder = h("div", { id: "tree-holder" });
  main.append(h("h1", {}, "Tree of ", h("a", { class: "mono", href: `/ui/job/${id}` }, short(id))),
    h("div", { class: "slider" }, h("label", { for: "slider" }, "Replay to seq ", label), slider,
      h("span", { class: "muted" }, "Arrow keys step one event; Home and End jump to the start and now.")),
    holder);
  if (now.truncated) main.append(h("p", { class: "muted" }, "Truncated: the jobs nearest the root are shown."));

  let want = 0;
  async function show(seq) {
    want = seq;
    // Always the tree as folded at a seq: only that answer carries each
    // job's baggage (context).
    const tree = await get(`/job/${enc}/tree?at=${seq}`);
    if (want !== seq) return; // a newer position was asked for meanwhile
    label.textContent = seq >= last ? `${seq} (now)` : `${seq}${tree.at ? " · " + tree.at : ""}`;
    holder.dataset.at = seq;
    holder.replaceChildren(draw(tree));
  }
  slider.addEventListener("input", () => show(Number(slider.value)).catch((err) => { label.textContent = String(err.message); }));
  await show(last);
}
