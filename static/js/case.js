// The case on screen, in either mode: one op with a field per input, or an expression
// with its variables. Each mode turns its fields into a request body, or says beside
// the field why it cannot (the page refuses what it can tell is wrong before sending).

import { clauseLink, el, withClauseLinks } from "./dom.js";
import { isMask, makeEditor, setMessage } from "./editors.js";
import { guideCaseChanged } from "./guide.js";
import { checkField } from "./checkmodes.js";
import { run } from "./run.js";
import { hideCopy } from "./share.js";
import { $, opByName, state } from "./state.js";
import { toJSON } from "./wire.js";

export function setMode(mode) {
  if (mode !== state.mode) hideCopy();
  state.mode = mode;
  $(`#mode-${mode}`).checked = true;
  $("#op-mode").hidden = mode !== "op";
  $("#expr-mode").hidden = mode !== "expr";
}

/** Any edit: the case no longer is the example (or the guide's case) it came from. */
export function caseChanged() {
  state.example = null;
  guideCaseChanged();
}

// --------------------------------------------------------------------------------------
// one op
// --------------------------------------------------------------------------------------

/** The form of one op; inputs default to the op's first example. */
export function showOp(name, inputs = null, requiresGrad = null) {
  hideCopy();
  const op = opByName(name) ?? state.ops[0];
  state.op = op;
  $("#op-select").value = op.name;
  $("#op-summary").replaceChildren(`${op.summary} (`, clauseLink(op.clause), `; ${op.module}.${op.name}` +
    (op.output === "ndarray" ? "; returns an ndarray: no gradients" : "") + ")");
  const first = op.examples[0]?.request ?? { inputs: {} };
  const values = inputs ?? first.inputs;
  const rg = requiresGrad ?? (inputs ? null : first.requires_grad ?? null);
  showOpExamples(op);

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

/** One button per example of the op: it loads the example and runs it. */
function showOpExamples(op) {
  const exBox = $("#op-examples");
  exBox.replaceChildren();
  for (const ex of op.examples) {
    const b = el("button", { type: "button", class: "small", text: `Example: ${ex.title}` });
    b.addEventListener("click", () => {
      state.example = Object.keys(ex.expected).length
        ? { title: `${op.name}: ${ex.title}`, clause: ex.clause, request: ex.request, expected: ex.expected }
        : null;
      showOp(op.name, ex.request.inputs, ex.request.requires_grad);
      run();
    });
    exBox.append(b);
  }
}

/** The op-mode request body, or null when an input cannot be read (message beside it). */
export function opRequest() {
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
// an expression and its variables
// --------------------------------------------------------------------------------------

/** What a variable's editor is: an array of numbers, ids or a mask, maybe differentiable. */
const VARIABLE = { name: "value", kind: "variable", dtype: "float64", array: true,
  differentiable: true, required: true, doc: "" };

/** A variable row. `spec.requires_grad` absent: the sandbox decides (a variable used as a
 *  tensor gets a gradient), and `guess` is what the checkbox shows until its answer. */
export function addVariable(name, spec, guess = false) {
  const i = state.vars.length ? Math.max(...state.vars.map((v) => v.index)) + 1 : 0;
  const row = el("div", { class: "var-row" });
  const nameId = `var-name-${i}`;
  const nameInput = el("input", { id: nameId, type: "text", class: "code var-name", value: name, spellcheck: "false", autocomplete: "off" });
  const remove = el("button", { type: "button", class: "small", text: "Remove", "aria-label": `Remove variable ${name}` });
  const editor = makeEditor(VARIABLE, spec.value, { requiresGrad: Boolean(spec.requires_grad ?? guess), onChange: caseChanged,
    idPrefix: `var-${i}`, outer: 3 });              // {"variables": {"x": {"value": …}}}
  // requires_grad absent from the case: the sandbox decides (a float tensor input gets a
  // gradient) and the checkbox follows its answer after the run
  if (spec.requires_grad !== undefined) editor.setRequiresGrad(Boolean(spec.requires_grad), true);
  const rename = (n) => {
    editor.field.dataset.input = n;
    editor.field.querySelector("label .name").textContent = `value of ${n}`;
  };
  rename(name);
  nameInput.addEventListener("input", () => {
    rename(nameInput.value.trim());
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

export function showVariables(variables) {
  $("#expr-vars").replaceChildren();
  state.vars = [];
  for (const [name, spec] of Object.entries(variables)) addVariable(name, spec);
}

/** The expression-mode request body, or null when a variable cannot be read. */
export function exprRequest() {
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
  const check = checkField();                        // checkmodes.js: true, the modes, or none
  const body = { expression, variables, ...(check === undefined ? {} : { check }),
    ...($("#paths").checked ? { paths: true } : {}), ...($("#dead").checked ? { dead: true } : {}) };
  return $("#expand").checked && /\b(cross_entropy|attention|rms_norm|swiglu|transformer_block)\s*\(/.test(expression)
    ? { ...body, expand: true } : body;
}

/** The message under the expression box (text may be "": cleared). */
export function exprMessage(text, kind = "error") {
  const msg = $("#msg-expression");
  msg.replaceChildren(...withClauseLinks(text));
  msg.className = `msg ${text ? kind : ""}`;
  $("#expr-text").setAttribute("aria-invalid", text && kind === "error" ? "true" : "false");
}

/** getitem's index as the text inside `a[…]`: integers, None, ... and slices as Python
 *  writes them; an index array or a mask becomes a variable of its own (`index`,
 *  `index1`, …), which the expression reads by name. (An index is not a keyword value:
 *  its wire form is a list of objects, which the expression language does not take.) */
function subscript(index, variables) {
  const part = (x) => (x === null || x === undefined ? "" : String(x));
  return (Array.isArray(index) ? index : [index]).map((it) => {
    if (it === null) return "None";
    if (it === "...") return "...";
    if (typeof it === "number") return String(it);
    if ("array" in it || "mask" in it) {
      let name = "index";
      for (let k = 1; name in variables; k++) name = `index${k}`;
      variables[name] = { value: it.array ?? it.mask };
      return name;
    }
    return `${part(it.start)}:${part(it.stop)}` + (it.step != null ? `:${it.step}` : "");
  }).join(", ");
}

/** Op mode's case as an expression: array inputs become variables, the rest keywords;
 *  getitem becomes a subscript, `a[…]`. An array input after a keyword or a left-out
 *  input is passed by keyword too (`cos=cos`): Python takes no positional argument after
 *  a keyword one, and a position would shift past the one left out. */
export function opAsExpression() {
  const req = opRequest();
  if (!req || !state.op) return;
  const args = [];
  const variables = {};
  let subscripted = null;
  let byKeyword = false;
  for (const spec of state.op.inputs) {
    if (!(spec.name in req.inputs)) { byKeyword = true; continue; }
    const v = req.inputs[spec.name];
    if (spec.kind === "index") {
      subscripted = subscript(v, variables);
    } else if (spec.array) {
      variables[spec.name] = { value: v, ...(req.requires_grad?.includes(spec.name) ? { requires_grad: true } : {}) };
      args.push(byKeyword ? `${spec.name}=${spec.name}` : spec.name);
    } else {
      byKeyword = true;
      const lit = typeof v === "string" ? v.replace("Infinity", "inf").replace("NaN", "nan") : toJSON(v);
      args.push(`${spec.name}=${lit === "true" ? "True" : lit === "false" ? "False" : lit === "null" ? "None" : lit}`);
    }
  }
  $("#expr-text").value = subscripted === null ? `${state.op.name}(${args.join(", ")})`
    : `${args[0]}[${subscripted}]`;
  showVariables(variables);
}
