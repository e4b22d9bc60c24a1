// Sharing a case: the permalink (the whole case in the URL fragment), copy as Python (a
// glassllm script that reproduces it offline), copy as PyTorch (the sandbox writes a
// PyTorch script that recomputes the case and compares every tensor with its numbers)
// and copy as curl (the request itself).

import { BusyError, postJSON } from "./api.js";
import { appURL } from "./base.js";
import { setMode, showOp, showVariables } from "./case.js";
import { restoreCheck } from "./checkmodes.js";
import { clearMessages, currentRequest } from "./run.js";
import { curl, exprPython, opPython } from "./scripts.js";
import { $, setStatus, state } from "./state.js";
import { formatValue, toJSON } from "./wire.js";

function snapshot() {
  const req = currentRequest();
  if (!req) return null;
  return state.mode === "op" ? { mode: "op", op: state.op.name, ...req.body } : { mode: "expr", ...req.body };
}

export function updateLink() {
  if (state.guide?.link && !state.guide.changed) {            // the lesson's own link
    history.replaceState(null, "", `#${state.guide.link}`);
    return;
  }
  const snap = snapshot();
  if (!snap) return;
  history.replaceState(null, "", `#${encodeURIComponent(toJSON(snap))}`);
}

/** The case from the URL fragment; true when one was there. */
export function restoreFromLink() {
  const raw = location.hash.slice(1);
  if (!raw) return false;
  let snap;
  try { snap = JSON.parse(decodeURIComponent(raw)); } catch { return false; }
  state.example = null;
  $("#grad-output").value = snap.grad_output == null ? "" : formatValue(snap.grad_output);
  $("#grad-output").rows = Math.min(8, $("#grad-output").value.split("\n").length);
  if (snap.mode === "expr") {
    setMode("expr");
    $("#expr-text").value = snap.expression ?? "";
    restoreCheck(snap.check);
    $("#paths").checked = Boolean(snap.paths);
    $("#dead").checked = Boolean(snap.dead);
    showVariables(snap.variables ?? {});
  } else {
    setMode("op");
    showOp(snap.op, snap.inputs ?? {}, snap.requires_grad ?? null);
  }
  return true;
}

/** A new case makes any copied script or link stale: hide it. */
export function hideCopy() { $("#copy-panel").hidden = true; }

function showCopy(label, text) {
  $("#copy-panel").hidden = false;
  $("#copy-label").textContent = label;
  const area = $("#copy-text");
  area.value = text;
  area.rows = Math.min(16, text.split("\n").length + 1);
  navigator.clipboard?.writeText(text).then(
    () => setStatus(`${label}: copied to the clipboard.`),
    () => setStatus(`${label}: select the text below and copy it.`));
  if (!navigator.clipboard) setStatus(`${label}: select the text below and copy it.`);
}

export function copyPython() {
  clearMessages();
  const req = currentRequest();
  if (!req) return;
  const text = state.mode === "op"
    ? opPython(state.op, req.body.inputs, req.body.requires_grad ?? [], req.body.grad_output)
    : exprPython(req.body.expression, req.body.variables, state.ops, req.body.grad_output, {
      kinds: Object.fromEntries(state.nodes.filter((n) => n.op === "variable").map((n) => [n.name, n.kind])),
      wantGrad: state.vars.filter((v) => v.editor.requiresGrad()).map((v) => v.nameInput.value.trim()),
    });
  showCopy("Python (glassllm)", text);
}

/** The case as a PyTorch script, written by the sandbox (POST api/v1/torch). */
export async function copyTorch() {
  clearMessages();
  const req = currentRequest();
  if (!req) return;
  const keep = state.mode === "op" ? ["inputs", "requires_grad", "grad_output"]
    : ["expression", "variables", "grad_output", "expand"];
  const body = Object.fromEntries(keep.filter((k) => req.body[k] !== undefined)
    .map((k) => [k, req.body[k]]));
  if (state.mode === "op") body.op = state.op.name;
  setStatus("Writing the PyTorch script…");
  let answer;
  try {
    answer = await postJSON("api/v1/torch", body);
  } catch (err) {
    setStatus(err instanceof BusyError ? err.message : `The sandbox did not answer (${err.message}).`);
    return;
  }
  if (!answer.ok) {
    const e = answer.data.error ?? { message: JSON.stringify(answer.data) };
    setStatus(`No PyTorch script (HTTP ${answer.status}): ${e.message}`);
    return;
  }
  showCopy("Python (PyTorch, checks glassllm's numbers)", answer.data.script);
}

export function copyCurl() {
  clearMessages();
  const req = currentRequest();
  if (req) showCopy("curl", curl(appURL(req.url), req.body));
}

export function copyLink() {
  updateLink();
  showCopy("Link to this case", location.href);
}
