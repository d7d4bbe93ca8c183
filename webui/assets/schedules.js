// schedules.js: every schedule the daemon runs (GET /schedules, what
// ductile system scheduler shows): its last firing, its next run and why,
// its circuit breaker and what a firing due now would do. It reads them
// again when a schedule fires or skips or a breaker changes (the ledger
// stream), and when a next run comes due; the times count down each second.
import { h, badge, throttle, when, until, keepFocus } from "./dom.js";
import { get } from "./api.js";
import { stream, liveBadge } from "./live.js";

const EVENTS = ["schedule.fired", "schedule.skipped", "breaker.opened", "breaker.half_opened", "breaker.closed", "breaker.reset"];

/** breakerState is the state a breaker summary names: closed, open or half_open. */
const breakerState = (summary) => (/half-open/.test(summary) ? "half_open" : /open/.test(summary) ? "open" : "closed");

export async function render(main) {
  const [live, setLive] = liveBadge("schedules-live");
  const body = h("tbody", { id: "schedules" });
  main.append(h("h1", {}, "Schedules ", live),
    h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Schedule"), h("th", { scope: "col", class: "wide" }, "When"),
      h("th", { scope: "col" }, "Last fired"), h("th", { scope: "col" }, "Next run"), h("th", { scope: "col" }, "Breaker"),
      h("th", { scope: "col", class: "wide" }, "If due now"))), body),
    h("p", { class: "muted" }, "Times are UTC. Schedules are plugins.<name>.schedules of the enabled plugins (docs/scheduler.md)."));

  let timer = null;
  let closed = false;
  const ticks = []; // [element, time] of the times that count
  const read = async () => {
    if (closed) return;
    const { schedules = [] } = await get("/schedules");
    if (closed) return;
    ticks.length = 0;
    const countdown = (t) => { const el = h("span", { class: "muted" }, until(t)); ticks.push([el, t]); return el; };
    keepFocus(body, "data-schedule", () => body.replaceChildren(...schedules.map((v) => {
      const b = breakerState(v.breaker);
      const last = v.last_fired;
      return h("tr", { "data-schedule": `${v.plugin}/${v.id}`, "data-breaker": b },
        h("td", {}, h("div", {}, `${v.plugin}/${v.id}`), h("div", { class: "muted" }, v.command)),
        h("td", { class: "wide mono" }, v.when, v.timezone ? ` (${v.timezone})` : ""),
        h("td", { "data-last-job": last ? last.job_id : "" }, last ?
          [h("a", { href: `/ui/job/${last.job_id}` }, when(last.slot.due)), " ", countdown(last.slot.due)] : h("span", { class: "muted" }, "never"),
          v.last_skipped ? h("div", { class: "muted" }, `skipped: ${v.last_skipped.reason}`) : null),
        h("td", { "data-next": v.next ? v.next.due : "" }, v.next ?
          [when(v.next.due), " ", countdown(v.next.due), (v.next.why || []).length ? h("div", { class: "muted" }, v.next.why.join("; ")) : null] :
          h("span", { class: "muted" }, v.done || "none")),
        h("td", {}, badge(b), b === "closed" && v.breaker === "breaker closed" ? null : h("div", { class: "muted" }, v.breaker)),
        h("td", { class: "wide" }, v.would.action, v.would.reason ? h("span", { class: "muted" }, `: ${v.would.reason}`) : null));
    })));
    if (!schedules.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No schedules: add plugins.<name>.schedules to the config.")));
    // Read again once the soonest next run is due (its firing also comes
    // as an event; this catches a skip the scheduler records later).
    clearTimeout(timer);
    const soonest = Math.min(...schedules.filter((v) => v.next).map((v) => Date.parse(v.next.due)));
    if (Number.isFinite(soonest)) timer = setTimeout(() => refresh(), Math.min(Math.max(soonest - Date.now() + 1000, 1000), 3600000));
  };
  const refresh = throttle(() => { read().catch(() => {}); }, 300);
  const tick = setInterval(() => { for (const [el, t] of ticks) el.textContent = until(t); }, 1000);
  const live$ = stream(EVENTS, refresh, setLive, "", refresh);
  try {
    await live$.opened;
    await read();
  } catch (err) { live$.close(); clearInterval(tick); throw err; }
  return () => { closed = true; live$.close(); clearInterval(tick); clearTimeout(timer); };
}
