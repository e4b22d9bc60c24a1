// Every HTTP call of the page goes through here: one place for what every request needs
// (headers, the body's JSON, and later retries and an auth token).

import { toJSON } from "./wire.js";

/** GET url as JSON; throws when the answer is not 2xx. */
export async function getJSON(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
}

/** POST body (wire JSON, SPEC H3) to url; resolves to {ok, status, data} for any HTTP
 *  answer, refusals included (their data is the error body); throws only when the
 *  sandbox did not answer. */
export async function postJSON(url, body) {
  const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
    body: toJSON(body) });
  return { ok: res.ok, status: res.status, data: await res.json() };
}

/** POST body as JSON and answer with the raw Response, for a Server-Sent-Events stream
 *  read with fetch (EventSource cannot POST); `signal` aborts it, closing the stream. */
export async function postStream(url, body, signal) {
  return fetch(url, { method: "POST", signal,
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body) });
}
