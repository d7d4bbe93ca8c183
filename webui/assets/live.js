// live.js: a page's ledger stream (GET /events) and the dot that says
// whether it is connected.
import { h } from "./dom.js";

/** stream follows the ledger's events of types from now on (or after the
 * seq query's after= names; query adds filters such as "correlation=ID"),
 * calling onEvent with each; live(on) tells whether it is connected. It answers
 * close, and opened: a promise kept once the stream is connected (or has
 * failed to, after 3 s), so that a snapshot read after it misses nothing
 * (whatever changes after the stream's start comes as an event).
 * onReopen, if given, is called when it connects again after a break: a
 * stream opened at the head before any event came resumes at the new head
 * (the browser has no Last-Event-ID to give), so the page reads again. */
export function stream(types, onEvent, live, query = "", onReopen = null) {
  const es = new EventSource(`/events?type=${types.join(",")}${query ? "&" + query : ""}`);
  let ready;
  let opens = 0;
  const opened = new Promise((resolve) => { ready = resolve; setTimeout(resolve, 3000); });
  for (const t of types) es.addEventListener(t, (msg) => onEvent(JSON.parse(msg.data)));
  es.onopen = () => {
    live(true);
    ready();
    if (opens++ > 0 && onReopen) onReopen();
  };
  es.onerror = () => live(false);
  return { close: () => es.close(), opened };
}

/** liveBadge is the dot that says whether a page's stream is connected,
 * and the function that sets it. */
export function liveBadge(id) {
  const el = h("span", { class: "live off", id, role: "status" }, "connecting");
  return [el, (on) => { el.className = on ? "live on" : "live off"; el.textContent = on ? "live" : "reconnecting"; }];
}
