// lists.js: the plugins (with health) and the remote workers (with the
// jobs they hold leases on).
import { h, badge, short, when } from "./dom.js";
import { get } from "./api.js";

export async function render(main, [which]) {
  if (which === "plugins") {
    const { plugins = [], skipped = [] } = await get("/plugins");
    main.append(h("h1", {}, "Plugins"), h("table", {},
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Plugin"), h("th", { scope: "col" }, "Health"),
        h("th", { scope: "col", class: "wide" }, "Commands"))),
      h("tbody", {}, plugins.map((p) => h("tr", {},
        h("td", {}, `${p.name} ${p.version || ""}`, p.enabled ? "" : " (disabled)"),
        h("td", {}, badge((p.health && p.health.status) || "unknown"), " ", h("span", { class: "muted" }, (p.health && p.health.summary) || "")),
        h("td", { class: "wide" }, (p.commands || []).map((c) => `${c.name} (${c.type})`).join(", ")))))),
    h("div", {}, skipped.length ? [h("h2", {}, "Skipped"), h("ul", {}, skipped.map((s) => h("li", {}, `${s.name}: ${s.reason}`)))] : null));
    return;
  }
  const { workers = [] } = await get("/workers");
  main.append(h("h1", {}, "Workers"), workers.length ? h("table", {},
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Worker"), h("th", { scope: "col" }, "Plugins"),
      h("th", { scope: "col" }, "Running"), h("th", { scope: "col", class: "wide" }, "Last seen"))),
    h("tbody", { id: "workers" }, workers.map((w) => h("tr", { "data-worker": w.name },
      h("td", {}, h("div", {}, w.name), h("div", { class: "muted" }, `${w.host}${w.pid ? " pid " + w.pid : ""} · ${w.version}`)),
      h("td", {}, (w.plugins || []).join(", ")),
      h("td", {}, `${w.claims}${w.concurrency ? " of " + w.concurrency : ""}`,
        (w.leases || []).map((l) => h("div", {}, h("a", { class: "mono", href: `/ui/job/${l.job_id}` }, short(l.job_id)), ` ${l.plugin} until ${when(l.lease_until)}`))),
      h("td", { class: "wide muted" }, when(w.last_seen)))))) :
    h("p", { class: "muted" }, "No remote worker registered (see docs/remote-workers.md: ductile worker --api URL)."));
}
