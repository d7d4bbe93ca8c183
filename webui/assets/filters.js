// filters.js: the filter bar of a live list (plugin, status, text), kept in
// the page's address so a filtered view can be bookmarked.
import { h } from "./dom.js";

/** filters builds the bar for the list at path (its address without the
 * query), with statuses for the status menu ("" first: any status), and
 * calls onChange when a filter changes. matches(row, fields) tells whether
 * a row passes: its plugin and status, and fields (strings) for the text. */
export function filters(path, query, statuses, onChange, idPrefix = "f") {
  const plugin = h("input", { type: "search", id: `${idPrefix}-plugin`, placeholder: "plugin", "aria-label": "Filter by plugin", value: query.get("plugin") || "" });
  const status = h("select", { id: `${idPrefix}-status`, "aria-label": "Filter by status" },
    statuses.map((s) => h("option", { value: s, selected: s === (query.get("status") || "") }, s || "any status")));
  const text = h("input", { type: "search", id: `${idPrefix}-text`, placeholder: "text (id, command, payload, error)", "aria-label": "Filter by text", value: query.get("q") || "" });
  const sync = () => {
    const q = new URLSearchParams();
    if (plugin.value) q.set("plugin", plugin.value);
    if (status.value) q.set("status", status.value);
    if (text.value) q.set("q", text.value);
    history.replaceState(null, "", path + (q.size ? "?" + q : ""));
    onChange();
  };
  for (const el of [plugin, status, text]) el.addEventListener("input", sync);
  const matches = (rowPlugin, rowStatus, fields) => {
    if (plugin.value && !(rowPlugin || "").includes(plugin.value.trim())) return false;
    if (status.value && rowStatus !== status.value) return false;
    const q = text.value.trim().toLowerCase();
    return !q || fields.some((v) => (v || "").toLowerCase().includes(q));
  };
  return { el: h("div", { class: "filters", role: "search" }, plugin, status, text), matches };
}
