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

const SVG = "http://www.w3.org/2000/svg";

/** s builds an SVG element as h builds an HTML one. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** throttle calls fn at most once per ms milliseconds, the last call
 * always coming through (after the wait). */
export function throttle(fn, ms) {
  let timer = null, again = false;
  const run = () => {
    timer = null;
    if (!again) return;
    again = false;
    fn();
    timer = setTimeout(run, ms);
  };
  return () => {
    again = true;
    if (!timer) run();
  };
}

/** keepFocus runs redraw, which replaces the rows of container, and puts
 * the focus back on the same control of the same row (rows carry attr,
 * e.g. data-run-id) if it was in one: a live redraw must not drop a
 * keyboard user's place. */
export function keepFocus(container, attr, redraw) {
  const a = document.activeElement;
  const row = a && container.contains(a) ? a.closest(`[${attr}]`) : null;
  const key = row ? row.getAttribute(attr) : null;
  redraw();
  if (key === null) return;
  const again = container.querySelector(`[${attr}="${CSS.escape(key)}"] ${a.tagName.toLowerCase()}`);
  if (again) again.focus();
}

/** when formats an RFC 3339 time as "YYYY-MM-DD HH:MM:SS" in UTC. */
export const when = (t) => (t ? String(t).replace("T", " ").slice(0, 19) : "");

/** until says how far t (RFC 3339) is from now: "in 12 s", "3 min ago". */
export function until(t, now = Date.now()) {
  if (!t) return "";
  const d = Math.round((Date.parse(t) - now) / 1000);
  const a = Math.abs(d);
  const n = a < 90 ? `${a} s` : a < 5400 ? `${Math.round(a / 60)} min` : a < 172800 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return d >= 0 ? `in ${n}` : `${n} ago`;
}
