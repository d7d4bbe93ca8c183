// dom.js: building elements without innerHTML, so no text from the API is
// ever read as markup.

/** h builds an element: h("a", {href: "/x"}, "text", child…). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** badge is a job or run status as a coloured label. */
export function badge(status) {
  return h("span", { class: `badge s-${status}`, "data-status": status }, status);
}

/** short is the last 8 characters of an id (a UUIDv7 begins with its time, alike for jobs made together). */
export const short = (id) => "…" + (id || "").slice(-8);

/** pretty formats JSON for a <pre>. */
export function pretty(v) {
  if (v === undefined || v === null) return "";
  return typeof v === "string" ? v : JSON.stringify(v, null, 2);
}

/** toast shows a short message in the live region. */
export function toast(text, error = false) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = error ? "toast error" : "toast";
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 5000);
}
