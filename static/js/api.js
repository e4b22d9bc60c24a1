// Every HTTP call of the page goes through here: one place for what every request needs
// (headers, the body's JSON, retries and the access token). A class presses Run
// in the same minute, so a busy sandbox is normal, not the student's fault.
// - 503: wait Retry-After plus a random jitter (so thirty tabs do not retry in the same
//   instant), a few tries, then a BusyError the page shows apart from input errors.
// - 401: the sandbox wants a token. A course sandbox that signs students in: the sign-in
//   dialog (signin.js) trades the student's token for an HttpOnly cookie. Otherwise the
//   shared token (GLASSLLM_API_TOKEN): ask once in a small dialog, keep it in
//   sessionStorage for this tab, send "Authorization: Bearer <token>".
// - every request carries a per-tab X-Client-ID, the key the sandbox's fair queue uses.
// - a url is the sandbox's path ("api/v1/ops"), resolved against its root (base.js), so
//   the page works behind a path prefix (a JupyterHub proxy).

import { appURL } from "./base.js";
import { el } from "./dom.js";
import { toJSON } from "./wire.js";

export const TRIES = 4;                 // the first try and three retries
export const JITTER_MS = 1000;          // + up to 1 s at random on each wait
const TOKEN_KEY = "glassllm.token";
const CLIENT_KEY = "glassllm.apps.client";

export const BUSY_TEXT = "The sandbox is busy right now (many people are running at once) — "
  + "this is not a problem with your formula. Wait a few seconds and press Run again.";

/** Thrown when every try answered 503: show BUSY_TEXT, not an input error. */
export class BusyError extends Error {
  constructor(error) { super(BUSY_TEXT); this.name = "BusyError"; this.error = error; }
}

/** GET url as JSON; throws when the answer is not 2xx. */
export async function getJSON(url) {
  const res = await fetchWithRetry(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
}

/** GET url as JSON, any HTTP answer: {ok, status, data} (a refusal's data is its error
 *  body); throws only when the sandbox did not answer, or was busy on every try. */
export async function getAnswer(url) {
  const res = await fetchWithRetry(url);
  return { ok: res.ok, status: res.status, data: await res.json() };
}

/** POST body (wire JSON, SPEC H3) to url; resolves to {ok, status, data} for any HTTP
 *  answer, refusals included (their data is the error body); throws only when the
 *  sandbox did not answer, or (BusyError) was busy on every try. `onRetry(attempt, ms)`
 *  is told before each wait for a retry. */
export async function postJSON(url, body, { onRetry } = {}) {
  const res = await fetchWithRetry(url, { method: "POST",
    headers: { "Content-Type": "application/json" }, body: toJSON(body) }, { onRetry });
  return { ok: res.ok, status: res.status, data: await res.json() };
}

/** POST body as JSON and answer with the raw Response, for a Server-Sent-Events stream
 *  read with fetch (EventSource cannot POST); `signal` aborts it, closing the stream.
 *  A 503 is retried after Retry-After plus jitter, `onRetry(attempt, ms)` told first. */
export async function postStream(url, body, signal, { onRetry } = {}) {
  return fetchWithRetry(url, { method: "POST", signal,
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body) }, { onRetry, signal });
}

// The course sign-in (signin.js) registers itself here: a 401 opens it instead of the
// shared token's dialog when the sandbox signs students in.
let signInHook = null;
export function setSignIn(hook) { signInHook = hook; }

/** The sign-in's own calls to /api/v1/session (relative to the page: a proxy's prefix
 *  included): no retry, no token dialog; the browser sends and keeps the cookie. */
export async function sessionCall(method, body) {
  const path = location.pathname;
  const base = path.endsWith("/") ? path : path.slice(0, path.lastIndexOf("/") + 1);
  const init = { method, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers = { "Content-Type": "application/json" };
    init.body = JSON.stringify(body);
  }
  return fetch(`${base}api/v1/session`, init);
}

function session() {
  try { return window.sessionStorage; } catch { return null; }   // storage may be disabled
}

/** A random id for this tab, kept for the tab's life. */
export function clientId() {
  const store = session();
  let id = store?.getItem(CLIENT_KEY);
  if (!id) {
    id = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join("");
    store?.setItem(CLIENT_KEY, id);
  }
  return id;
}

function withHeaders(init) {
  const headers = new Headers(init.headers ?? {});
  headers.set("X-Client-ID", clientId());
  const token = session()?.getItem(TOKEN_KEY);
  if (token) headers.set("Authorization", `Bearer ${token}`);
  return { ...init, headers };
}

/** Seconds from a Retry-After header (delta-seconds or an HTTP date); 1 when absent. */
export function retryAfterSeconds(res) {
  const value = res.headers.get("Retry-After");
  if (value == null || value === "") return 1;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, n);
  const date = Date.parse(value);
  return Number.isNaN(date) ? 1 : Math.max(0, (date - Date.now()) / 1000);
}

// A wait that `signal` (Stop) cuts short with an AbortError, as fetch itself would.
const wait = (ms, signal) => new Promise((resolve, reject) => {
  if (signal?.aborted) { reject(new DOMException("aborted", "AbortError")); return; }
  const timer = setTimeout(resolve, ms);
  signal?.addEventListener("abort", () => {
    clearTimeout(timer);
    reject(new DOMException("aborted", "AbortError"));
  }, { once: true });
});

/**
 * fetch(url, init) that retries a 503 and asks for the token on a 401 (see the top).
 * `onRetry(attempt, ms)` is told before each wait (the page shows "retrying…").
 * Resolves to the Response (any status but 503); rejects with BusyError after TRIES 503s.
 */
async function fetchWithRetry(url, init = {}, { onRetry, signal } = {}) {
  let asked = false;
  for (let attempt = 1; ; attempt++) {
    const res = await fetch(appURL(url), withHeaders(init));
    if (res.status === 401 && !asked) {
      asked = true;
      if (signInHook?.available()) {         // a course token: traded for the cookie
        if (await signInHook.signIn()) { attempt--; continue; }
        return res;
      }
      const token = await askToken();
      if (token) { session()?.setItem(TOKEN_KEY, token); attempt--; continue; }
      return res;
    }
    if (res.status !== 503) return res;
    if (attempt >= TRIES) {
      let body = null;
      try { body = await res.json(); } catch { /* not JSON */ }
      throw new BusyError(body?.error ?? null);
    }
    const ms = retryAfterSeconds(res) * 1000 + Math.random() * JITTER_MS;
    onRetry?.(attempt, ms);
    await wait(ms, signal);
  }
}

/** A small modal dialog asking for the sandbox's token; resolves to it, or null. */
function askToken() {
  return new Promise((resolve) => {
    const input = el("input", { type: "password", id: "token-input", autocomplete: "off" });
    const label = el("label", { for: "token-input", text: "This sandbox needs an access token (ask your instructor):" });
    const ok = el("button", { type: "submit", text: "Use the token" });
    const cancel = el("button", { type: "button", text: "Cancel" });
    const form = el("form", { method: "dialog" }, label, input, el("p", {}, ok, " ", cancel));
    const dialog = el("dialog", { id: "token-dialog", "aria-labelledby": "token-title" },
      el("h2", { id: "token-title", text: "Access token" }), form);
    const done = (value) => { dialog.close(); dialog.remove(); resolve(value); };
    form.addEventListener("submit", (e) => { e.preventDefault(); done(input.value.trim() || null); });
    cancel.addEventListener("click", () => done(null));
    dialog.addEventListener("cancel", (e) => { e.preventDefault(); done(null); });   // Escape
    document.body.append(dialog);
    dialog.showModal();
    input.focus();
  });
}
