// tree.js: a job's tree as nested boxes, each with its status and baggage,
// and a time slider over the ledger's seqs from the root's enqueue to the
// tree's last change: moving it fetches /job/{id}/tree?at=SEQ and redraws.
// The page follows the tree live: the ledger stream of the tree's
// correlation id (every job of a tree carries its root's) from the last
// change shown; each new event moves the slider's end, and the tree shown
// with it while the slider sits at the end (moved back, it stays put).
import { h, badge, short, pretty, throttle } from "./dom.js";
import { get } from "./api.js";
import { JOB_EVENTS } from "./jobs.js";
import { stream, liveBadge } from "./live.js";

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
  let last = Math.max(first, ...now.jobs.map((j) => j.updated_seq));
  const [live, setLive] = liveBadge("tree-live");
  const slider = h("input", { type: "range", id: "slider", min: first, max: last, value: last, step: 1, "aria-label": "Ledger seq" });
  const label = h("output", { id: "slider-label", for: "slider" });
  const holder = h("div", { id: "tree-holder" });
  main.append(h("h1", {}, "Tree of ", h("a", { class: "mono", href: `/ui/job/${id}` }, short(id)), " ", live),
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

  if (!root) return undefined;
  // Follow: at the end, the tree moves with each event; moved back, only
  // the slider's end does (and the label of where it stands).
  const follow = throttle(() => {
    const at = Number(slider.value);
    const end = at >= Number(slider.max);
    slider.max = last;
    if (end) { slider.value = last; show(last).catch(() => {}); } else { label.textContent = `${at}`; }
    holder.dataset.last = last;
  }, 200);
  const live$ = stream(JOB_EVENTS.concat(["job.replayed"]), (ev) => {
    if (ev.seq <= last) return;
    last = ev.seq;
    follow();
  }, setLive, `correlation=${encodeURIComponent(root.correlation_id)}&after=${last}`);
  return live$.close;
}
