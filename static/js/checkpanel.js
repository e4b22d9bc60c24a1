// "Check my gradient": after a case runs, the student picks one array
// the sandbox computed (the value, or the gradient of a differentiable input), pastes
// their own by-hand answer, and presses Check. The page posts the case on screen plus
// `claimed` to POST /api/v1/check (docs/http.md) and shows the verdict per element as a
// heatmap of match (blue) / mismatch (orange) cells, each cell also saying "match" or
// "mismatch" in words, so colour is never the only cue; then the summary: shape match,
// allclose, the error sizes and the first mismatch (the last two only with "show
// expected numbers", i.e. reveal: true). Refusals name the input, like the case's own.
// The choices live in the panel's controls (no page state of its own); HTTP via api.js.

import { BusyError, postJSON } from "./api.js";
import { el } from "./dom.js";
import { currentRequest } from "./run.js";
import { $, state } from "./state.js";
import { fromWire, formatNumber, parseValue, shapeOf, shapeText } from "./wire.js";

const MAX_CELLS = 4096;          // a larger verdict is summarised, not drawn
const OUTER = 3;                 // {"claimed": {"grads": {"x": …}}}

/** The arrays the last run answered: "value" and "grad:<name>" for each gradient. */
function targets() {
  return [...document.querySelectorAll("#output figure.heatmap[data-name]")]
    .map((f) => f.dataset.name).filter((n) => n === "value" || n.startsWith("grad:"));
}

/** What a target is called in the messages: "value", "gradient of x". */
function targetLabel(t) { return t === "value" ? "value" : `gradient of ${t.slice(5)}`; }

/** After each run: show the panel when the run answered, list what can be checked. */
export function refreshCheckPanel() {
  const names = targets();
  const panel = $("#check-panel");
  $("#check-result").replaceChildren();                 // a verdict on an older run is stale
  say("");
  panel.hidden = names.length === 0;
  if (!names.length) return;
  const select = $("#check-target");
  const keep = select.value;
  select.replaceChildren(...names.map((t) => el("option", { value: t, text: t === "value" ? "the value (output)" : targetLabel(t) })));
  // default: the first gradient, since that is what a student derives by hand
  select.value = names.includes(keep) ? keep : names.find((t) => t !== "value") ?? "value";
}

/** The panel's error message beside the answer box ("" clears it). */
function say(text) {
  const msg = $("#check-msg");
  msg.textContent = text;
  msg.className = `msg ${text ? "error" : ""}`;
  $("#check-claim").setAttribute("aria-invalid", text ? "true" : "false");
}

/** The case on screen as a check request body, or null (the case's own message says why).
 *  An expression keeps `expand` (the check takes it as eval does: no number changes). */
function caseBody() {
  const req = currentRequest();
  if (!req) return null;
  if (state.mode === "op") return { op: state.op.name, ...req.body };
  const { check: _unused, paths: _paths, dead: _dead, ...body } = req.body;   // eval's own options
  return body;
}

/** The check of `claim` for `target` ("value" or "grad:<name>") of the case on screen:
 *  the body posted to /api/v1/check, or null when the case cannot be sent. */
export function checkRequest(target, claim, reveal) {
  const body = caseBody();
  if (!body) return null;
  const claimed = target === "value" ? { value: claim } : { grads: { [target.slice(5)]: claim } };
  return { ...body, claimed, reveal };
}

export async function checkGradient() {
  const target = $("#check-target").value;
  const who = targetLabel(target);
  $("#check-result").replaceChildren();
  say("");
  let claim;
  try {
    claim = parseValue($("#check-claim").value, OUTER);
  } catch (err) {
    say(`Your ${who} ${err.message}`);
    return;
  }
  const body = checkRequest(target, claim, $("#check-reveal").checked);
  if (body && $("#check-rule").value) body.digits = Number($("#check-rule").value);
  if (!body) { say("The case cannot be sent: fix the input marked in red above, then check again."); return; }
  const name = target.slice(5);
  $("#check-status").textContent = "Checking…";
  let answer;
  try {
    answer = await postJSON("api/v1/check", body);
  } catch (err) {
    $("#check-status").textContent = err instanceof BusyError ? err.message : `The sandbox did not answer (${err.message}).`;
    return;
  }
  const { ok, status, data } = answer;
  $("#check-status").textContent = "";
  if (!ok) {
    const e = data.error ?? { message: JSON.stringify(data) };
    say(`Refused (HTTP ${status})${e.input ? `, ${e.input}` : ""}: ${e.message}`);
    return;
  }
  const report = target === "value" ? data.value : data.grads[name];
  showReport(report, who, claim, data);
}

/** The summary lines and the heatmap of one compared array. */
function showReport(r, who, claim, data) {
  const box = $("#check-result");
  box.dataset.passed = String(data.passed);
  box.append(el("p", { class: `verdict ${data.passed ? "pass" : "fail"}`,
    text: data.passed ? `✓ passed: your ${who} matches the sandbox's.` : `✗ not passed: your ${who} differs.` }));
  if (!r.shape_match) {
    say(`Your ${who} has shape ${shapeText(r.given_shape)}, but the ${who} has shape ` +
      `${shapeText(r.expected_shape)}: paste a list of the same shape (no broadcasting).`);
    return;
  }
  const total = r.expected_shape.reduce((a, b) => a * b, 1);
  const rows = el("dl", { class: "ref-list check-summary" });
  const add = (k, v) => rows.append(el("dt", { text: k }), el("dd", { text: v }));
  add("shape", `${shapeText(r.expected_shape)} ✓ matches`);
  const rule = data.digits ? `${data.digits} significant digits` : `rtol ${data.rtol}, atol ${data.atol}`;
  add(data.digits ? "digits" : "allclose", `${r.allclose ? "yes" : "no"} (${rule}): ` +
    `${r.mismatches} of ${total} element${total === 1 ? "" : "s"} mismatch`);
  if (r.pattern) add("pattern", r.pattern.says);
  if (data.reveal) {
    add("max abs error", formatNumber(fromWire(r.max_abs_err)));
    add("max rel error", formatNumber(fromWire(r.max_rel_err)));
  }
  const f = r.first_mismatch;
  if (f) {
    add("first mismatch", `at [${f.index.join(", ")}]` + (data.reveal
      ? `: expected ${exact(f.expected)}, given ${exact(f.given)}` : ""));
  }
  box.append(rows, verdictMap(r.mask, claim, who));
  if (!data.reveal) box.append(el("p", { class: "hint", text: "Expected numbers and error sizes are hidden; tick “show expected numbers” to see them." }));
}

/** A wire number in full (every digit JavaScript keeps): a near miss must not read as equal. */
function exact(v) {
  const x = fromWire(v);
  return Number.isFinite(x) && x !== 0 ? String(x).replace("-", "−") : formatNumber(x);
}

/** The mask as a table: rows are every index but the last, columns the last index. */
function verdictMap(mask, claim, who) {
  const shape = shapeOf(mask) ?? [];
  const wrong = shape.length ? mask.flat(Infinity) : [mask];
  const given = shape.length ? claim.flat(Infinity) : [claim];
  const fig = el("figure", { class: "check-map" });
  fig.append(el("figcaption", { text: `Verdict per element of the ${who}: blue ✓ match, orange ✗ mismatch` }));
  if (wrong.length > MAX_CELLS) {
    fig.append(el("p", { class: "hint", text: `${wrong.length} elements: too many to draw (the summary above holds the verdict).` }));
    return fig;
  }
  const cols = shape.length ? shape.at(-1) : 1;
  const lead = shape.slice(0, -1);
  const table = el("table", { class: "verdicts" });
  const head = el("tr", {}, el("th", { scope: "col", text: "index" }));
  for (let j = 0; j < cols; j++) head.append(el("th", { scope: "col", text: shape.length ? String(j) : "" }));
  table.append(el("thead", {}, head));
  const tbody = el("tbody");
  const nrows = cols ? wrong.length / cols : 0;
  for (let i = 0; i < nrows; i++) {
    const prefix = unravel(i, lead);
    const tr = el("tr", {}, el("th", { scope: "row", text: lead.length ? `[${prefix.join(", ")}, …]` : "[…]" }));
    for (let j = 0; j < cols; j++) {
      const k = i * cols + j;
      const bad = Boolean(wrong[k]);
      const index = shape.length ? [...prefix, j] : [];
      tr.append(el("td", { class: bad ? "bad" : "good", "data-verdict": bad ? "mismatch" : "match",
        "data-index": index.join(","), title: `[${index.join(", ")}] ${bad ? "mismatch" : "match"}` },
      el("span", { "aria-hidden": "true", text: bad ? "✗ " : "✓ " }),
      formatNumber(fromWire(given[k])),
      el("span", { class: "sr-only", text: bad ? " mismatch" : " match" })));
    }
    tbody.append(tr);
  }
  table.append(tbody);
  fig.append(el("div", { class: "heat-scroll", tabindex: "0", role: "region",   // scrollable: reachable by keyboard
    "aria-label": `verdicts of the ${who}, shape ${shapeText(shape)}` }, table));
  return fig;
}

function unravel(i, shape) {
  const out = [];
  for (let d = shape.length - 1; d >= 0; d--) { out.unshift(i % shape[d]); i = Math.floor(i / shape[d]); }
  return out;
}

/** Wire the panel (main.js calls this once): Check, and a refresh after every run. */
export function wireCheckPanel() {
  $("#check-go").addEventListener("click", checkGradient);
  new MutationObserver(refreshCheckPanel).observe(document.body, { attributes: true, attributeFilter: ["data-runs"] });
}
