// The playground, in the order a student meets it: load the ops and the examples, restore
// the case from the link, edit it (one op, or an expression), run it, read the value and
// the gradients, walk the graph backwards, share the case.
// Everything it knows about ops comes from GET /api/v1/ops and GET /api/v1/examples.

import { isMask, makeEditor, setMessage } from "./editors.js";
import { drawGraph, nodeLabel, shapeLabel } from "./graph.js";
import { heatmap } from "./heatmap.js";
import { curl, exprPython, opPython } from "./scripts.js";
import { flat, formatNumber, formatValue, fromWire, parseValue, shapeText, toJSON } from "./wire.js";
import { el } from "./dom.js";
import { BusyError, busyNotice, fetchWithRetry } from "./net.js";

const $ = (sel) => document.querySelector(sel);
const PROBABILITY_OPS = new Set(["softmax", "softmax_np", "sigmoid"]);

const state = {
  mode: "op",              // "op" | "expr"
  ops: [],                 // GET /api/v1/ops
  examples: [],            // GET /api/v1/examples (normalised)
  op: null,                // the op of op mode
  editors: new Map(),      // input name -> editor (op mode)
  vars: [],                // expression mode: [{nameInput, editor, row}]
  example: null,           // the example the case came from, for its reference numbers
  graph: null,
  nodes: [],
  step: -1,
};


function setStatus(text) { $("#status").textContent = text; }

// --------------------------------------------------------------------------------------
// 1. loading: the ops and the examples
// --------------------------------------------------------------------------------------

async function getJSON(url) {
  const res = await fetchWithRetry(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  return res.json();
}

/** /api/v1/examples entries as {id, title, clause, mode, request, expected, op}. */
function normaliseExamples(data) {
  const list = Array.isArray(data) ? data : data.examples ?? [];
  return list.map((ex, i) => {
    const request = ex.request ?? ex;
    const isExpr = "expression" in request;
    return { id: ex.id ?? ex.name ?? `example-${i}`, title: ex.title ?? ex.name ?? `example ${i + 1}`,
      clause: ex.clause ?? null, mode: isExpr ? "expr" : "op", op: ex.op ?? null,
      request, expected: ex.expected ?? null };
  });
}

/** Op examples that carry the reference's numbers: the gallery when /api/v1/examples is absent. */
function opExamples(ops) {
  return ops.flatMap((op) => op.examples.filter((ex) => ex.expected && Object.keys(ex.expected).length)
    .map((ex) => ({ id: `${op.name}:${ex.title}`, title: `${op.name}: ${ex.title}`, clause: ex.clause,
      mode: "op", op: op.name, request: ex.request, expected: ex.expected })));
}

async function load() {
  state.ops = (await getJSON("/api/v1/ops")).ops;
  try {
    state.examples = normaliseExamples(await getJSON("/api/v1/examples"));
  } catch {
    state.examples = opExamples(state.ops);
  }
  buildOpSelect();
  buildGallery();
}

function buildOpSelect() {
  const select = $("#op-select");
  const groups = new Map();
  for (const op of state.ops) {
    const key = op.clause.startsWith("L7") ? "L7 layers" : op.clause.split(".")[0];
    if (!groups.has(key)) groups.set(key, el("optgroup", { label: key }));
    groups.get(key).append(el("option", { value: op.name, text: `${op.name} — ${op.summary}` }));
  }
  select.replaceChildren(...groups.values());
  select.addEventListener("change", () => {
    state.example = null;
    $("#grad-output").value = "";
    showOp(select.value);
  });
}

function buildGallery() {
  const list = $("#examples");
  list.replaceChildren();
  for (const ex of state.examples) {
    const b = el("button", { type: "button", class: "example" },
      el("span", { class: "ex-title" }, ex.title,
        el("code", { class: "ex-code", text: ex.mode === "expr" ? ex.request.expression : `${ex.op}(…)` })),
      ex.clause ? el("span", { class: "ex-clause", text: ex.clause }) : null);
    b.dataset.example = ex.id;
    b.addEventListener("click", () => { loadExample(ex); run(); });
    list.append(el("li", {}, b));
  }
  if (!state.examples.length) list.append(el("li", { class: "hint", text: "No examples served." }));
}

function loadExample(ex) {
  state.example = ex;
  hideCopy();
  $("#grad-output").value = ex.request.grad_output == null ? "" : formatValue(ex.request.grad_output);
  if (ex.mode === "expr") {
    setMode("expr");
    $("#expr-text").value = ex.request.expression;
    showVariables(ex.request.variables ?? {});
  } else {
    setMode("op");
    showOp(ex.op, ex.request.inputs, ex.request.requires_grad);
  }
}

// --------------------------------------------------------------------------------------
// 2. the case: op mode
// --------------------------------------------------------------------------------------

function opByName(name) { return state.ops.find((op) => op.name === name); }

/** The form of one op; inputs default to the op's first example. */
function showOp(name, inputs = null, requiresGrad = null) {
  hideCopy();
  const op = opByName(name) ?? state.ops[0];
  state.op = op;
  $("#op-select").value = op.name;
  $("#op-summary").textContent = `${op.summary} (SPEC ${op.clause}; ${op.module}.${op.name}` +
    (op.output === "ndarray" ? "; returns an ndarray: no gradients" : "") + ")";
  const first = op.examples[0]?.request ?? { inputs: {} };
  const values = inputs ?? first.inputs;
  const rg = requiresGrad ?? (inputs ? null : first.requires_grad ?? null);

  const exBox = $("#op-examples");
  exBox.replaceChildren();
  op.examples.forEach((ex) => {
    const b = el("button", { type: "button", class: "small", text: `Example: ${ex.title}` });
    b.addEventListener("click", () => {
      state.example = ex.expected && Object.keys(ex.expected).length
        ? { title: `${op.name}: ${ex.title}`, clause: ex.clause, mode: "op", op: op.name, request: ex.request, expected: ex.expected }
        : null;
      showOp(op.name, ex.request.inputs, ex.request.requires_grad);
      run();
    });
    exBox.append(b);
  });

  const box = $("#op-inputs");
  box.replaceChildren();
  state.editors.clear();
  for (const spec of op.inputs) {
    const editor = makeEditor(spec, values[spec.name] ?? (spec.required ? null : undefined), {
      requiresGrad: rg ? rg.includes(spec.name) : true, onChange: caseChanged });
    state.editors.set(spec.name, editor);
    box.append(editor.field);
  }
}

function caseChanged() { state.example = null; }

/** The op-mode request body, or null when an input cannot be read (message beside it). */
function opRequest() {
  const inputs = {};
  const requiresGrad = [];
  let ok = true;
  for (const [name, editor] of state.editors) {
    try {
      const v = editor.read();
      if (v !== undefined) inputs[name] = v;
      if (editor.requiresGrad()) requiresGrad.push(name);
    } catch (err) {
      setMessage(editor.field, `${name} ${err.message}`);
      ok = false;
    }
  }
  if (!ok) return null;
  return { inputs, requires_grad: state.op.output === "ndarray" ? null : requiresGrad };
}

// --------------------------------------------------------------------------------------
// 2'. the case: expression mode
// --------------------------------------------------------------------------------------

function addVariable(name, spec) {
  const value = spec.value;
  const i = state.vars.length ? Math.max(...state.vars.map((v) => v.index)) + 1 : 0;
  const row = el("div", { class: "var-row" });
  const nameId = `var-name-${i}`;
  const nameInput = el("input", { id: nameId, type: "text", class: "code var-name", value: name, spellcheck: "false", autocomplete: "off" });
  const remove = el("button", { type: "button", class: "small", text: "Remove", "aria-label": `Remove variable ${name}` });
  const editor = makeEditor({ name: "value", kind: "variable", differentiable: true, required: true, doc: "" },
    value, { requiresGrad: Boolean(spec.requires_grad), onChange: caseChanged, idPrefix: `var-${i}`,
      outer: 3 });                                 // {"variables": {"x": {"value": …}}}
  // requires_grad absent from the case: the sandbox decides (a float tensor input gets a
  // gradient) and the checkbox follows its answer after the run
  if (spec.requires_grad !== undefined) editor.setRequiresGrad(Boolean(spec.requires_grad), true);
  editor.field.dataset.input = name;
  editor.field.querySelector("label .name").textContent = `value of ${name}`;
  nameInput.addEventListener("input", () => {
    editor.field.dataset.input = nameInput.value.trim();
    editor.field.querySelector("label .name").textContent = `value of ${nameInput.value.trim()}`;
    remove.setAttribute("aria-label", `Remove variable ${nameInput.value.trim()}`);
    caseChanged();
  });
  const entry = { index: i, nameInput, editor, row };
  remove.addEventListener("click", () => {
    row.remove();
    state.vars = state.vars.filter((v) => v !== entry);
    caseChanged();
    $("#add-var").focus();
  });
  row.append(el("div", { class: "var-head" }, el("label", { for: nameId, text: "Variable name" }), nameInput, remove), editor.field);
  $("#expr-vars").append(row);
  state.vars.push(entry);
  return entry;
}

function showVariables(variables) {
  $("#expr-vars").replaceChildren();
  state.vars = [];
  for (const [name, spec] of Object.entries(variables)) addVariable(name, spec);
}

function exprRequest() {
  const variables = {};
  let ok = true;
  for (const { nameInput, editor } of state.vars) {
    const name = nameInput.value.trim();
    try {
      if (!/^[A-Za-z_]\w*$/.test(name)) throw new Error("is not a valid variable name (letters, digits, _)");
      const spec = { value: editor.read() };
      if (!isMask(spec.value) && editor.gradExplicit()) spec.requires_grad = editor.requiresGrad();
      variables[name] = spec;
    } catch (err) {
      setMessage(editor.field, `${name || "variable"} ${err.message}`);
      ok = false;
    }
  }
  const expression = $("#expr-text").value.trim();
  if (!expression) { exprMessage("Write an expression first, e.g. softmax(x)."); ok = false; }
  if (!ok) return null;
  return $("#grad-check").checked ? { expression, variables, check: true } : { expression, variables };
}

function exprMessage(text, kind = "error") {
  const msg = $("#msg-expression");
  msg.textContent = text;
  msg.className = `msg ${text ? kind : ""}`;
  $("#expr-text").setAttribute("aria-invalid", text && kind === "error" ? "true" : "false");
}

/** Op mode's case as an expression: array inputs become variables, the rest keywords. */
function opAsExpression() {
  const req = opRequest();
  if (!req || !state.op) return;
  const args = [];
  const variables = {};
  for (const spec of state.op.inputs) {
    if (!(spec.name in req.inputs)) continue;
    const v = req.inputs[spec.name];
    if (["tensor", "array", "table", "int_array", "bool_mask"].includes(spec.kind)) {
      variables[spec.name] = { value: v, ...(req.requires_grad?.includes(spec.name) ? { requires_grad: true } : {}) };
      args.push(spec.name);
    } else {
      const lit = typeof v === "string" ? v.replace("Infinity", "inf").replace("NaN", "nan") : toJSON(v);
      args.push(`${spec.name}=${lit === "true" ? "True" : lit === "false" ? "False" : lit === "null" ? "None" : lit}`);
    }
  }
  $("#expr-text").value = `${state.op.name}(${args.join(", ")})`;
  showVariables(variables);
}

function setMode(mode) {
  if (mode !== state.mode) hideCopy();
  state.mode = mode;
  $(`#mode-${mode}`).checked = true;
  $("#op-mode").hidden = mode !== "op";
  $("#expr-mode").hidden = mode !== "expr";
}

// --------------------------------------------------------------------------------------
// 3. running the case
// --------------------------------------------------------------------------------------

function clearMessages() {
  document.querySelectorAll(".field").forEach((f) => setMessage(f, ""));
  $("#msg-grad-output").textContent = "";
  $("#msg-grad-output").className = "msg";
  exprMessage("");
  $("#messages").replaceChildren();
}

/** The backward seed, or null for the default (ones: the gradient of the output's sum). */
function gradOutput() {
  const text = $("#grad-output").value.trim();
  if (!text) return null;
  try {
    return parseValue(text, 1);                    // {"grad_output": …}
  } catch (err) {
    const msg = $("#msg-grad-output");
    msg.textContent = `grad_output ${err.message}`;
    msg.className = "msg error";
    $("#grad-output").closest("details").open = true;
    return undefined;
  }
}

function currentRequest() {
  const seed = gradOutput();
  if (seed === undefined) return null;
  const withSeed = (body) => (seed === null ? body : { ...body, grad_output: seed });
  if (state.mode === "op") {
    const body = opRequest();
    return body && { url: `/api/v1/ops/${encodeURIComponent(state.op.name)}`, body: withSeed(body) };
  }
  const body = exprRequest();
  return body && { url: "/api/v1/eval", body: withSeed(body) };
}

let running = 0;
let finished = 0;

/** Run the case; body[data-runs] counts finished runs (tests and scripts wait on it). */
async function run() {
  try {
    await runOnce();
  } finally {
    document.body.dataset.runs = String(++finished);
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
  const ticket = ++running;
  setStatus("Running…");
  const t0 = performance.now();
  let res, data;
  try {
    res = await fetchWithRetry(req.url, { method: "POST", headers: { "Content-Type": "application/json" }, body: toJSON(req.body) },
      { onRetry: (n) => { if (ticket === running) setStatus(`The sandbox is busy; retrying (${n})…`); } });
    data = await res.json();
  } catch (err) {
    if (err instanceof BusyError) {                 // not the student's input: no red message
      if (ticket !== running) return;
      clearResult("No result yet: the sandbox is busy.");
      $("#messages").append(busyNotice());
      setStatus("The sandbox is busy — not your formula; try again in a few seconds.");
      return;
    }
    setStatus(`The sandbox did not answer (${err.message}).`);
    return;
  }
  if (ticket !== running) return;                          // a newer run took over
  const ms = Math.round(performance.now() - t0);
  if (!res.ok) { showError(data.error ?? { message: JSON.stringify(data) }, res.status); return; }
  showResult(data, req);
  setStatus(`Done in ${ms} ms: value of shape ${shapeText(data.shape ?? [])}, ` +
    `${Object.keys(data.grads ?? {}).length} gradient(s)` + (data.warnings?.length ? `, ${data.warnings.length} warning(s).` : "."));
}

// --------------------------------------------------------------------------------------
// 4. errors and warnings, in plain words, beside the input they name
// --------------------------------------------------------------------------------------

const STATUS_WORDS = {
  400: "NumPy refused this case", 404: "Unknown name", 413: "Too large for the sandbox",
  415: "Wrong content type", 422: "This input does not fit", 401: "This sandbox needs an access token",
};

function fieldsNamed(names) {
  const fields = [...document.querySelectorAll(state.mode === "op" ? "#op-inputs .field" : "#expr-vars .field")];
  return names.flatMap((n) => fields.filter((f) => f.dataset.input === n));
}

/** A refused case leaves no stale result on screen. */
function clearResult(reason) {
  $("#output").replaceChildren(el("p", { class: "hint", text: reason }));
  $("#reference").hidden = true;
  $("#graph-panel").hidden = true;
  state.nodes = [];
}

function showError(err, status) {
  clearResult("No result: the sandbox refused this case (the message in red says why).");
  const words = STATUS_WORDS[status] ?? `Refused (HTTP ${status})`;
  const text = `${words}: ${err.message}`;
  const names = String(err.input ?? err.variable ?? "").split(/,\s*/)
    .map((n) => n.replace(/^(body|inputs|variables)\./, "").split(".")[0]).filter(Boolean);
  if (names.includes("grad_output")) {
    const msg = $("#msg-grad-output");
    msg.textContent = text;
    msg.className = "msg error";
    $("#grad-output").closest("details").open = true;
    setStatus(`${words} (HTTP ${status}) — see the message beside grad_output.`);
    return;
  }
  const fields = fieldsNamed(names);
  fields.forEach((f) => setMessage(f, text));
  const aboutExpression = state.mode === "expr" && (names.includes("expression") || err.position != null || !fields.length);
  if (aboutExpression) exprMessage(text + (err.position != null ? caretLine(err.position) : ""));
  if (!fields.length && !aboutExpression) $("#messages").append(el("p", { class: "msg error", text }));
  setStatus(`${words} (HTTP ${status})` + (fields.length ? ` — see the message beside ${names.join(", ")}.` : "."));
  (fields[0]?.querySelector("[data-control]") ?? (aboutExpression ? $("#expr-text") : null))?.scrollIntoView?.({ block: "nearest" });
}

function caretLine(position) {
  const src = $("#expr-text").value;
  return `\n${src}\n${" ".repeat(Math.max(0, Math.min(position, src.length)))}^`;
}

const WARNING_WORDS = [
  [/divide by zero/i, "a division by zero or log(0) gave ±∞; NumPy's value is kept (L1.2)"],
  [/invalid value/i, "an operation with no real answer (0/0, ∞ − ∞, log of a negative) gave NaN (L1.2)"],
  [/overflow/i, "a result too large for float64 became ±∞ (exp does not clip, L1.2)"],
  [/underflow/i, "a result too small for float64 became 0"],
];

function plainWarning(w) {
  const text = typeof w === "string" ? w : w.message ?? JSON.stringify(w);
  const hit = WARNING_WORDS.find(([re]) => re.test(text));
  return hit ? `${hit[1]} — ${text}` : text;
}

function showWarnings(data) {
  const box = $("#messages");
  for (const w of data.warnings ?? []) box.append(el("p", { class: "msg warning", text: `Warning: ${plainWarning(w)}` }));
  const nf = data.first_nonfinite;
  if (nf) {
    const { text, kind } = nonfiniteWords(nf);
    box.append(el("p", { class: `msg ${kind} nonfinite`, text }));
    state.nonfiniteExpected = kind === "info";          // the graph marks it in blue, not red
  }
}

/** How many NaN, +∞ and −∞ a node's value (or gradient) holds, out of how many elements. */
function countNonfinite(values) {
  const c = { nan: 0, pos: 0, neg: 0, total: 0 };
  for (const x of flat(values)) {
    c.total += 1;
    if (Number.isNaN(x)) c.nan += 1;
    else if (x === Infinity) c.pos += 1;
    else if (x === -Infinity) c.neg += 1;
  }
  return c;
}

/** The first non-finite node in plain words, told apart from the data: NaN means something
 *  went wrong; ±∞ may be intended (−inf is how a mask is written, L3.5). */
function nonfiniteWords(nf) {
  const id = nf.node ?? nf.id;
  const pass = nf.pass ?? nf.phase ?? nf.where ?? "forward";
  const node = state.nodes.find((n) => n.id === id);
  const where = `node #${id}${node ? ` (${nodeLabel(node)})` : ""} in the ${pass} pass`;
  const data = node && (pass === "backward" ? node.grad : node.value);
  if (data == null) {
    return { kind: "warning", text: `NaN or ∞ first appeared at ${where}` + (nf.count != null ? ` (${nf.count} element(s))` : "") + "." };
  }
  const c = countNonfinite(data);
  const found = [[c.nan, "NaN"], [c.pos, "+∞"], [c.neg, "−∞"]].filter(([k]) => k > 0);
  const what = found.map(([, w]) => w).join(" and ");
  const counts = `${found.map(([k, w]) => `${k} ${w}`).join(", ")} of ${c.total} element${c.total > 1 ? "s" : ""}`;
  const head = `${what} first appeared at ${where} (${counts})`;
  if (c.nan) {
    return { kind: "warning", text: `${head} — NaN signals a problem: an operation with no real answer` +
      " (0/0, ∞ − ∞, 0 · ∞, log of a negative), and everything computed from it is NaN too." };
  }
  if (node.op === "masked_fill" && !c.pos && pass === "forward") {
    return { kind: "info", text: `${head} — expected when masking with −inf: softmax gives those` +
      " positions weight 0. NaN would signal a problem." };
  }
  return { kind: "warning", text: `${head} — a division by zero, log(0) or an overflow gives ±∞` +
    " (L1.2); check that it is intended. NaN would signal a problem." };
}

// --------------------------------------------------------------------------------------
// 5. the result: value and gradients as heatmaps, the reference's numbers
// --------------------------------------------------------------------------------------

function outputRole(data) {
  if (state.mode === "op") return PROBABILITY_OPS.has(state.op.name) ? "probability" : "value";
  const last = data.nodes?.at(-1);
  return last && PROBABILITY_OPS.has(last.op) ? "probability" : "value";
}

function showResult(data, req) {
  const out = $("#output");
  out.replaceChildren();
  state.nodes = (data.nodes ?? []).map((n) => ({ ...n, value: fromWire(n.value), grad: n.grad == null ? n.grad : fromWire(n.grad) }));
  out.append(heatmap(fromWire(data.value), { title: "value", role: outputRole(data), name: "value" }));
  const grads = Object.entries(data.grads ?? {});
  for (const [name, g] of grads) {
    out.append(heatmap(fromWire(g), { title: `gradient of ${name}`, role: "grad", name: `grad:${name}` }));
  }
  if (data.check) out.append(gradCheck(data.check));
  if (!grads.length) {
    out.append(el("p", { class: "hint", text: state.mode === "op" && state.op.output === "ndarray"
      ? `${state.op.name} returns an np.ndarray (L0.2): no graph, so no gradients.`
      : "No gradients: tick “requires grad” on an input to see its gradient." }));
  } else {
    out.append(el("p", { class: "hint", text: req.body.grad_output == null
      ? "Each gradient is ∂(sum of the output)/∂input, shaped like its input (L0.5)."
      : "Each gradient is ∂(sum of output · grad_output)/∂input, shaped like its input (L0.5)." }));
  }
  state.firstNonfinite = data.first_nonfinite ?? null;
  syncRequiresGrad();
  showWarnings(data);
  showReference(data);
  showGraph(req);
}

/** The gradient check: analytic (backward) vs numeric (central differences), per variable. */
function gradCheck(check) {
  const box = el("div", { class: "grad-check" }, el("h3", { text: "Gradient check: analytic vs numeric" }));
  for (const [name, c] of Object.entries(check)) {
    box.append(el("p", { class: c.passed ? "match" : "mismatch",
      text: `${name}: ${c.passed ? "✓ agree" : "✗ disagree"} — max abs error ${formatNumber(c.max_abs_err)},` +
        ` max rel error ${formatNumber(c.max_rel_err)}` }));
    box.append(heatmap(fromWire(c.numeric), { title: `numeric gradient of ${name}`, role: "grad", name: `check:${name}` }));
  }
  return box;
}

/** After an expression run, each variable's checkbox shows whether it got a gradient. */
function syncRequiresGrad() {
  for (const n of state.nodes) {
    if (n.op !== "variable") continue;
    const v = state.vars.find((x) => x.nameInput.value.trim() === n.name);
    if (v && !v.editor.gradExplicit()) v.editor.setRequiresGrad(Boolean(n.requires_grad), false);
  }
}

function close(a, b) {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => close(x, b[i]));
  }
  a = fromWire(a); b = fromWire(b);
  if (typeof a === "boolean" || typeof b === "boolean") return a === b;
  if (Number.isNaN(a) && Number.isNaN(b)) return true;
  if (a === b) return true;
  return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

/** The example's reference numbers beside the result, each with a match mark. */
function showReference(data) {
  const box = $("#reference");
  box.replaceChildren();
  const ex = state.example;
  box.hidden = !ex?.expected;
  if (!ex?.expected) return;
  box.append(el("h3", { text: `Reference: ${ex.title}${ex.clause ? ` (SPEC ${ex.clause})` : ""}` }));
  const rows = el("dl", { class: "ref-list" });
  const add = (label, expected, actual) => {
    const ok = actual === undefined ? null : close(expected, actual);
    rows.append(el("dt", { text: label }),
      el("dd", {}, el("code", { text: toJSON(expected) }), " ",
        ok === null ? null : el("span", { class: ok ? "match" : "mismatch", text: ok ? "✓ matches" : "✗ differs" })));
  };
  for (const [key, expected] of Object.entries(ex.expected)) {
    if (key === "grads" && expected && typeof expected === "object") {
      for (const [name, g] of Object.entries(expected)) add(`gradient of ${name}`, g, data.grads?.[name]);
    } else if (key === "value") {
      add("value", expected, data.value);
    } else {
      add(key.replaceAll("_", " "), expected, undefined);
    }
  }
  box.append(rows);
}

// --------------------------------------------------------------------------------------
// 6. the computation graph and the backward step-through
// --------------------------------------------------------------------------------------

function showGraph(req) {
  const panel = $("#graph-panel");
  panel.hidden = !state.nodes.length;
  $("#node-detail").replaceChildren();
  state.step = -1;
  $("#step-label").textContent = "";
  if (!state.nodes.length) return;
  state.source = req.body.expression;
  state.graph = drawGraph($("#graph"), state.nodes, { onSelect: selectNode });
  const nf = state.firstNonfinite;
  state.graph.mark(new Set(nf ? [nf.node ?? nf.id] : []), "nonfinite");
  state.graph.mark(new Set(nf && state.nonfiniteExpected ? [nf.node ?? nf.id] : []), "expected");
  const constants = state.nodes.filter((n) => !getsGrad(n));
  state.graph.mark(new Set(constants.map((n) => n.id)), "constant");
  $("#step-skipped").textContent = !constants.length ? ""
    : !backwardOrder().length ? "Nothing to step through: no node requires grad, so the backward pass computes no gradient."
      : `Skipped (grey): ${constants.map((n) => `#${n.id} ${nodeLabel(n)}`).join(", ")} — ` +
        `${constants.length > 1 ? "constants" : "a constant"} (requires grad off): the backward pass computes no gradient for ${constants.length > 1 ? "them" : "it"}.`;
  updateStepButtons();
}

function spanText(n) {
  const s = n.span ?? n.source;
  if (!s || !state.source) return typeof s === "string" ? s : "";
  const [a, b] = Array.isArray(s) ? s : [s.start, s.end];
  return state.source.slice(a, b);
}

function describeLedger(entry) {
  if (entry == null || (Array.isArray(entry) && !entry.length)) {
    return "No broadcasting to undo: each incoming gradient already had its input's shape.";
  }
  const items = Array.isArray(entry) ? entry : [entry];
  return items.map((it) => {
    if (typeof it !== "object") return String(it);
    const who = it.input ?? it.to ?? it.node;
    const axes = it.summed_axes ?? it.axes ?? it.sum_axes;
    const from = it.from_shape ?? it.grad_shape;
    const to = it.to_shape ?? it.shape;
    if (axes !== undefined) {
      return `gradient to input ${who != null ? `#${who}` : ""}: ` +
        (axes.length ? `summed over axes (${axes.join(", ")}) to undo broadcasting` : "no axis summed (no broadcasting)") +
        (from && to ? `, ${shapeLabel(from)} → ${shapeLabel(to)}` : "");
    }
    return JSON.stringify(it);
  }).join("; ");
}

function nodeLedger(n) {
  return n.ledger ?? n.broadcast ?? n.broadcast_ledger ?? null;
}

function selectNode(id) {
  const n = state.nodes.find((x) => x.id === id);
  if (!n) return;
  state.graph.highlight(id, "selected");
  const box = $("#node-detail");
  box.replaceChildren();
  const src = spanText(n);
  box.append(el("h4", { text: `Node #${n.id}: ${nodeLabel(n)} ${shapeLabel(n.shape)}` }));
  const facts = el("dl", { class: "ref-list" });
  facts.append(el("dt", { text: "op" }), el("dd", { text: n.op }));
  if (src) facts.append(el("dt", { text: "source" }), el("dd", {}, el("code", { text: src })));
  if (n.inputs?.length) facts.append(el("dt", { text: "inputs" }), el("dd", { text: n.inputs.map((i) => `#${i}`).join(", ") }));
  facts.append(el("dt", { text: "broadcast ledger" }), el("dd", { class: "ledger", text: describeLedger(nodeLedger(n)) }));
  box.append(facts);
  if (n.value !== undefined) box.append(heatmap(n.value, { title: `value of #${n.id}`, role: PROBABILITY_OPS.has(n.op) ? "probability" : "value", name: `node-value:${n.id}` }));
  if (n.grad != null) box.append(heatmap(n.grad, { title: `gradient at #${n.id} (∂out/∂node)`, role: "grad", name: `node-grad:${n.id}` }));
  else box.append(el("p", { class: "hint", text: "No gradient flows here: it does not depend on a variable that requires grad." }));
}

/** Whether the backward pass computes a gradient for node n (false for constants: masks,
 *  ids, trig tables, and whatever depends on no variable that requires grad). */
function getsGrad(n) { return n.requires_grad ?? n.grad != null; }

/** The nodes whose gradient the backward pass computes, output first; constants skipped. */
function backwardOrder() { return [...state.nodes].reverse().filter(getsGrad); }

function showStep(k) {
  const order = backwardOrder();
  state.step = Math.max(-1, Math.min(k, order.length - 1));
  updateStepButtons();
  if (state.step < 0) {
    state.graph.mark(new Set(), "done");
    state.graph.highlight(null, "current");
    $("#step-label").textContent = "";
    return;
  }
  const n = order[state.step];
  state.graph.mark(new Set(order.slice(0, state.step).map((x) => x.id)), "done");
  state.graph.highlight(n.id, "current");
  selectNode(n.id);
  $("#step-label").textContent = `Backward step ${state.step + 1} of ${order.length}: node #${n.id} (${nodeLabel(n)})`;
}

function updateStepButtons() {
  const n = backwardOrder().length;
  $("#step-back").disabled = state.step < 0;
  $("#step-next").disabled = state.step >= n - 1;
}

// --------------------------------------------------------------------------------------
// 7. sharing: the permalink, copy as Python, copy as curl
// --------------------------------------------------------------------------------------

function snapshot() {
  const req = currentRequest();
  if (!req) return null;
  return state.mode === "op" ? { mode: "op", op: state.op.name, ...req.body } : { mode: "expr", ...req.body };
}

function updateLink() {
  const snap = snapshot();
  if (!snap) return;
  history.replaceState(null, "", `#${encodeURIComponent(toJSON(snap))}`);
}

/** The case from the URL fragment; true when one was there. */
function restoreFromLink() {
  const raw = location.hash.slice(1);
  if (!raw) return false;
  let snap;
  try { snap = JSON.parse(decodeURIComponent(raw)); } catch { return false; }
  state.example = null;
  $("#grad-output").value = snap.grad_output == null ? "" : formatValue(snap.grad_output);
  $("#grad-output").closest("details").open = snap.grad_output != null;
  $("#grad-output").rows = Math.min(8, $("#grad-output").value.split("\n").length);
  if (snap.mode === "expr") {
    setMode("expr");
    $("#expr-text").value = snap.expression ?? "";
    $("#grad-check").checked = Boolean(snap.check);
    showVariables(snap.variables ?? {});
  } else {
    setMode("op");
    showOp(snap.op, snap.inputs ?? {}, snap.requires_grad ?? null);
  }
  return true;
}

/** A new case makes any copied script or link stale: hide it. */
function hideCopy() { $("#copy-panel").hidden = true; }

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

function copyPython() {
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

function copyCurl() {
  clearMessages();
  const req = currentRequest();
  if (req) showCopy("curl", curl(location.origin + req.url, req.body));
}

function copyLink() {
  updateLink();
  showCopy("Link to this case", location.href);
}

// --------------------------------------------------------------------------------------
// 8. wiring
// --------------------------------------------------------------------------------------

function wire() {
  $("#run").addEventListener("click", run);
  document.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); run(); }
  });
  for (const radio of document.querySelectorAll('input[name="mode"]')) {
    radio.addEventListener("change", () => {
      if (radio.value === "expr" && !$("#expr-text").value.trim()) opAsExpression();
      setMode(radio.value);
      state.example = null;
    });
  }
  $("#add-var").addEventListener("click", () => {
    const taken = new Set(state.vars.map((v) => v.nameInput.value.trim()));
    let k = 1;
    while (taken.has(`x${k}`)) k += 1;
    addVariable(`x${k}`, { value: [0.0] }).nameInput.focus();
  });
  $("#expr-text").addEventListener("input", caseChanged);
  $("#grad-output").addEventListener("input", caseChanged);
  $("#step-next").addEventListener("click", () => showStep(state.step + 1));
  $("#step-back").addEventListener("click", () => showStep(state.step - 1));
  $("#step-reset").addEventListener("click", () => showStep(-1));
  $("#copy-link").addEventListener("click", copyLink);
  $("#copy-python").addEventListener("click", copyPython);
  $("#copy-curl").addEventListener("click", copyCurl);
  window.addEventListener("hashchange", () => { if (restoreFromLink()) run(); });
}

async function main() {
  wire();
  try {
    await load();
  } catch (err) {
    setStatus(`Could not load the op list from the sandbox: ${err.message}`);
    return;
  }
  if (restoreFromLink()) {
    await run();
  } else {
    showOp("softmax");
  }
  document.body.dataset.ready = "true";
}

main();
