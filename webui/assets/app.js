// app.js: sign-in, the router and the navigation. Pages are modules, each
// exporting render(main, params) that may return a function to call when
// the page is left (to close its streams).
import { h, toast } from "./dom.js";
import { call, get, errorText } from "./api.js";

const routes = [
  [/^\/ui\/?$/, () => import("./jobs.js")],
  [/^\/ui\/job\/([^/]+)\/tree$/, () => import("./tree.js")],
  [/^\/ui\/job\/([^/]+)$/, () => import("./job.js")],
  [/^\/ui\/runs$/, () => import("./runs.js")],
  [/^\/ui\/trigger$/, () => import("./trigger.js")],
  [/^\/ui\/(plugins|workers)$/, () => import("./lists.js")],
  [/^\/ui\/pipelines$/, () => import("./pipelines.js")],
  [/^\/ui\/pipeline\/([^/]+)$/, () => import("./pipelines.js")],
  [/^\/ui\/schedules$/, () => import("./schedules.js")],
];

let leave = null;
let signedIn = false;
let shown = 0; // counts show()s: one that ends after a newer began drops its page

async function show() {
  const n = ++shown;
  if (leave) { leave(); leave = null; }
  const main = document.getElementById("main");
  main.replaceChildren();
  if (!signedIn) { renderSignIn(main); return; }
  const path = location.pathname;
  for (const [re, load] of routes) {
    const m = path.match(re);
    if (!m) continue;
    const page = await load();
    if (n !== shown) return;
    // Each page draws into its own box: a page still loading when another
    // is asked for draws into a box no longer shown, and is closed.
    const box = h("div", { class: "page" });
    main.append(box);
    let close = null;
    try {
      close = (await page.render(box, m.slice(1).map(decodeURIComponent), new URLSearchParams(location.search))) || null;
    } catch (err) {
      box.append(h("p", { class: "error", role: "alert" }, errorText(err)));
    }
    if (n !== shown) { if (close) close(); return; }
    leave = close;
    return;
  }
  main.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "/ui/" }, "Back to the jobs")));
}

/** go moves to path inside the page without reloading it. */
export function go(path) {
  history.pushState(null, "", path);
  show().then(() => document.getElementById("main").focus());
}

function renderSignIn(main) {
  document.getElementById("nav").hidden = true;
  const input = h("input", { type: "password", name: "token", id: "token", autocomplete: "current-password", required: true });
  const err = h("p", { role: "alert", class: "error" });
  const form = h("form", { class: "stack", id: "signin", onsubmit: async (e) => {
    e.preventDefault();
    err.textContent = "";
    try {
      await call("POST", "/ui/session", { token: input.value });
      input.value = "";
      signedIn = true;
      document.getElementById("nav").hidden = false;
      await show();
    } catch (e2) { err.textContent = errorText(e2); }
  } },
    h("label", { for: "token" }, "API token", input),
    h("p", { class: "muted" }, "The token is exchanged for a session cookie and not kept by the page. Make one with: ductile config token create NAME --scopes jobs:rw,plugin:rw,events:ro"),
    h("div", {}, h("button", { class: "primary", type: "submit", id: "signin-submit" }, "Sign in")), err);
  main.append(h("h1", {}, "Sign in"), form);
  input.focus();
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a");
  if (!a) return;
  // An SVG link's target and href are SVGAnimatedStrings, not strings.
  const target = typeof a.target === "string" ? a.target : a.target.baseVal;
  if (target || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const url = new URL(typeof a.href === "string" ? a.href : a.getAttribute("href"), location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/ui")) return;
  e.preventDefault();
  go(url.pathname + url.search);
});
window.addEventListener("popstate", show);
// Leaving the page (a reload, another address, the back-forward cache):
// close its streams now. A browser keeps at most six connections to one
// host over HTTP/1.1, and a stream left open holds one.
window.addEventListener("pagehide", () => { if (leave) { leave(); leave = null; } });
// Back from that cache: the page's streams were closed, so draw it again.
window.addEventListener("pageshow", (e) => { if (e.persisted) show(); });
window.addEventListener("ductile:signed-out", () => {
  if (!signedIn) return;
  signedIn = false;
  toast("Signed out: the session ended (sign-out, expiry, a restart, or its token was revoked).", true);
  show();
});
document.getElementById("signout").addEventListener("click", async () => {
  try { await call("DELETE", "/ui/session"); } catch (err) { toast(errorText(err), true); }
  signedIn = false;
  show();
});

(async () => {
  try { await get("/ui/session"); signedIn = true; document.getElementById("nav").hidden = false; } catch { signedIn = false; }
  show();
})();
