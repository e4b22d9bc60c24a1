// Running the case: read it into a request (refusing on the page what cannot be sent),
// post it, and hand the answer to the result views or the refusal to the messages.

import { BusyError, postJSON } from "./api.js";
import { exprMessage, exprRequest, opRequest } from "./case.js";
import { setMessage } from "./editors.js";
import { busyNotice, clearResult, showError } from "./messages.js";
import { isAccessProblem, showAccessProblem } from "./signin.js";
import { showResult } from "./results.js";
import { updateLink } from "./share.js";
import { $, setStatus, state } from "./state.js";
import { parseValue, shapeText } from "./wire.js";

/** Clear every message: beside the inputs, the seed, the expression, and the list. */
export function clearMessages() {
  document.querySelectorAll(".field").forEach((f) => setMessage(f, ""));
  $("#msg-grad-output").textContent = "";
  $("#msg-grad-output").className = "msg";
  exprMessage("");
  $("#messages").replaceChildren();
}

/** The backward seed: null for the default (ones: the gradient of the output's sum),
 *  undefined when the text cannot be read (the message is beside it). */
function gradOutput() {
  const text = $("#grad-output").value.trim();
  if (!text) return null;
  try {
    return parseValue(text, 1);                    // {"grad_output": …}
  } catch (err) {
    const msg = $("#msg-grad-output");
    msg.textContent = `grad_output ${err.message}`;
    msg.className = "msg error";
    return undefined;
  }
}

/** The case as {url, body}, or null when part of it cannot be sent. */
export function currentRequest() {
  const seed = gradOutput();
  if (seed === undefined) return null;
  const withSeed = (body) => (seed === null ? body : { ...body, grad_output: seed });
  if (state.mode === "op") {
    const body = opRequest();
    return body && { url: `api/v1/ops/${encodeURIComponent(state.op.name)}`, body: withSeed(body) };
  }
  const body = exprRequest();
  // mystery mode: the same request, answered with the student's hidden bug switched on
  return body && { url: state.mystery ? state.mystery.evalUrl : "api/v1/eval", body: withSeed(body) };
}

/** Run the case; body[data-runs] counts finished runs (tests and scripts wait on it). */
export async function run() {
  try {
    await runOnce();
  } finally {
    document.body.dataset.runs = String(++state.finished);
  }
}

async function runOnce() {
  clearMessages();
  const req = currentRequest();
  if (!req) {                                   // refused on the page: nothing was sent
    clearResult("No result: an input cannot be sent (the message in red says why).");
    setStatus("Fix the input marked in red, then run again.");
    return;
  }
  updateLink();
  const ticket = ++state.running;
  setStatus("Running…");
  const t0 = performance.now();
  let answer;
  try {
    answer = await postJSON(req.url, req.body, {
      onRetry: (n) => { if (ticket === state.running) setStatus(`The sandbox is busy; retrying (${n})…`); } });
  } catch (err) {
    if (err instanceof BusyError) {                 // not the student's input: no red message
      if (ticket !== state.running) return;
      clearResult("No result yet: the sandbox is busy.");
      $("#messages").append(busyNotice());
      setStatus("The sandbox is busy — not your formula; try again in a few seconds.");
      return;
    }
    setStatus(`The sandbox did not answer (${err.message}).`);
    return;
  }
  if (ticket !== state.running) return;                    // a newer run took over
  const ms = Math.round(performance.now() - t0);
  const { ok, status, data } = answer;
  if (!ok && isAccessProblem(status, data)) {        // at the sign-in, not at the formula
    clearResult("No result: this sandbox wants you signed in (see the sign-in above).");
    showAccessProblem(data.error, status);
    return;
  }
  if (!ok) { showError(data.error ?? { message: JSON.stringify(data) }, status); return; }
  showResult(data, req);
  setStatus(`Done in ${ms} ms: value of shape ${shapeText(data.shape)}, ` +
    `${Object.keys(data.grads).length} gradient(s)` + (data.warnings.length ? `, ${data.warnings.length} warning(s).` : "."));
}
