// api.js: calls to the daemon's API with the session cookie. The browser
// sends the cookie itself (same origin) and an Origin header on writes,
// which the server requires of a write signed in by cookie.

/** ApiError is an answer of the API that is not a success. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

/** call sends method path with an optional JSON body; it answers the
 * decoded JSON (null for an empty answer). A 401 sends the page to sign-in. */
export async function call(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = { message: text }; } }
  if (!res.ok) {
    if (res.status === 401 && !path.startsWith("/ui/session")) {
      window.dispatchEvent(new CustomEvent("ductile:signed-out"));
    }
    throw new ApiError(res.status, data);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body);

/** errorText is what to show for a failed call: message and hint. */
export function errorText(err) {
  if (err instanceof ApiError) {
    return [err.body.message || err.message, err.body.hint].filter(Boolean).join(" — ");
  }
  return String(err && err.message ? err.message : err);
}
