// lists.js: the plugins (with health) and the workers.
import { h, badge } from "./dom.js";
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
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Worker"), h("th", { scope: "col" }, "State"), h("th", { scope: "col", class: "wide" }, "Details"))),
    h("tbody", {}, workers.map((w) => h("tr", {}, h("td", {}, w.name || w.worker || ""),
      h("td", {}, badge(w.state || w.status || "")), h("td", { class: "wide mono" }, JSON.stringify(w)))))) :
    h("p", { class: "muted" }, "No remote worker registered."));
}
