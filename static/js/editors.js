// Input editors, built from what GET /api/v1/ops says of each input (glassllm/sandbox/wire.py
// defines the kinds; the page reads an input's `array` and `dtype`, never a list of kinds):
//   an array (`array`)         a text box holding a nested list, its shape shown live
//   a boolean array            the same text box plus a grid of clickable cells
//   a boolean scalar           a checkbox
//   any other scalar           a one-line box (numbers, integers, axes, shapes, indices)
// Every editor has a message line beside it, where the server's error or warning that
// names this input is written in plain words.

import { formatValue, parseValue, readValue, shapeOf, shapeText, toJSON, withoutNegativeZero } from "./wire.js";
import { el, withClauseLinks } from "./dom.js";

/** Words beside an input for its kind (the kind itself when a new one has no words yet). */
const KIND_WORDS = {
  tensor: "numbers (differentiable)", array: "numbers (constant)", table: "trig table (constant)",
  int_array: "integer ids", bool_mask: "boolean mask: true = masked", number: "a number",
  int: "an integer", bool: "true / false", axis: "axis: empty = all, 0, -1 or [0, 1]",
  axes: "axes: empty = reverse, or [1, 0]", shape: "shape, e.g. [3, -1]", index: "NumPy index as JSON",
  variable: "numbers, integer ids or a true/false mask",
};

/** True when every element of a nested list is true / false (a mask, never differentiable). */
export function isMask(v) {
  const leaves = Array.isArray(v) ? v.flat(Infinity) : [v];
  return leaves.length > 0 && leaves.every((x) => typeof x === "boolean");
}


/** Show (or clear) a message beside an input; kind is "error" or "warning". */
export function setMessage(field, text, kind = "error") {
  const msg = field.querySelector(":scope > .msg");
  msg.replaceChildren(...withClauseLinks(text || ""));
  msg.className = `msg ${text ? kind : ""}`;
  const control = field.querySelector("[data-control]");
  if (control) control.setAttribute("aria-invalid", text && kind === "error" ? "true" : "false");
}

function liveShape(textarea, out, isBoolean, outer) {
  try {
    const { value: v, overflowed } = readValue(textarea.value, outer);
    const shape = shapeOf(v);
    out.textContent = shape === null ? "shape: ragged (rows of different lengths)" : `shape ${shapeText(shape)}`;
    if (overflowed) {
      out.textContent += ` · ${overflowed} number${overflowed > 1 ? "s" : ""} past float64's` +
        " largest (1.8e308), read as ±inf as NumPy reads them";
    }
    out.classList.toggle("bad", shape === null);
    return v;
  } catch (err) {
    out.textContent = err.tooDeep ? `too deep: ${err.message.replace(/^is /, "")}`
      : isBoolean ? "shape: not yet a list of true / false" : "shape: not yet a number list";
    out.classList.add("bad");
    return undefined;
  }
}

/** The clickable grid of a 1-D or 2-D boolean mask; each cell toggles masked / kept. */
function maskGrid(textarea, name, onChange, outer, onlyBooleans = false) {
  const grid = el("div", { class: "mask-grid", role: "group", "aria-label": `${name}: click a cell to toggle it` });
  const draw = () => {
    grid.replaceChildren();
    let v;
    try { v = parseValue(textarea.value, outer); } catch { return; }
    const shape = shapeOf(v);
    if (shape === null || shape.length < 1 || shape.length > 2 || (onlyBooleans && !isMask(v))) return;
    const rows = shape.length === 1 ? [v] : v;
    rows.forEach((row, i) => {
      const r = el("div", { class: "mask-row" });
      row.forEach((cell, j) => {
        const on = cell === true || cell === 1;
        const at = shape.length === 1 ? `${j}` : `${i}, ${j}`;
        const b = el("button", { type: "button", class: on ? "on" : "", "aria-pressed": String(on),
          "aria-label": `${name}[${at}] ${on ? "masked" : "kept"}`, text: on ? "■" : "·" });
        b.addEventListener("click", () => {
          if (shape.length === 1) v[j] = !on; else v[i][j] = !on;
          textarea.value = formatValue(shape.length === 1 ? v.map(Boolean) : v.map((r2) => r2.map(Boolean)));
          textarea.dispatchEvent(new Event("input"));
          grid.querySelector(`[data-at="${at}"]`)?.focus();
          onChange();
        });
        b.dataset.at = at;
        r.append(b);
      });
      grid.append(r);
    });
  };
  textarea.addEventListener("input", draw);
  draw();
  return grid;
}

/**
 * A field for one registry input.
 * @returns {{field: HTMLElement, read: () => any, write: (v) => void, requiresGrad: () => boolean}}
 *   read() returns the wire value, or `undefined` for "use the default"; it throws an
 *   Error whose message completes "input <name> ..." when the text cannot be read.
 *   `outer`: how deep the request nests the value ({"inputs": {"a": …}}: 2), for the
 *   sandbox's JSON depth limit.
 */
export function makeEditor(spec, value, { requiresGrad = true, onChange = () => {}, idPrefix = "in", outer = 2 } = {}) {
  const id = `${idPrefix}-${spec.name}`;
  const msgId = `msg-${idPrefix}-${spec.name}`;
  const field = el("div", { class: `field kind-${spec.kind}` });
  field.dataset.input = spec.name;
  const words = KIND_WORDS[spec.kind] ?? spec.kind;
  const isBoolean = spec.dtype === "bool";
  const integer = spec.dtype !== "float64";     // a typed -0 is the integer 0 there, not -0.0
  field.append(el("label", { for: id },
    el("span", { class: "name", text: spec.name }), " ",
    el("span", { class: "kind", text: words + (spec.shape ? ` · ${spec.shape}` : "") })));
  if (spec.doc) field.append(el("p", { class: "doc", id: `${id}-doc` }, ...withClauseLinks(spec.doc)));
  const described = `${msgId}${spec.doc ? ` ${id}-doc` : ""}`;
  let control;
  let read;
  let write;

  if (spec.array) {
    control = el("textarea", { id, class: "code", rows: "3", spellcheck: "false", "aria-describedby": described });
    const shape = el("span", { class: "shape-live", "aria-live": "polite" });
    write = (v) => {
      control.value = v === undefined || v === null ? "" : formatValue(v);
      control.rows = Math.min(8, Math.max(1, control.value.split("\n").length));
      liveShape(control, shape, isBoolean, outer);
    };
    read = () => {
      if (control.value.trim() === "" && !spec.required) return undefined;
      const v = parseValue(control.value, outer);
      return integer ? withoutNegativeZero(v) : v;
    };
    control.addEventListener("input", () => {
      control.rows = Math.min(8, Math.max(control.rows, control.value.split("\n").length));
      liveShape(control, shape, isBoolean, outer);
      onChange();
    });
    field.append(control, shape);
    write(value);
    if (isBoolean) field.append(maskGrid(control, spec.name, onChange, outer));
    if (spec.kind === "variable") field.append(maskGrid(control, spec.name, onChange, outer, true));
  } else if (isBoolean) {
    control = el("input", { id, type: "checkbox", "aria-describedby": described });
    write = (v) => { control.checked = Boolean(v); };
    read = () => control.checked;
    control.addEventListener("change", onChange);
    field.querySelector("label").prepend(control, " ");
    write(value ?? spec.default);
  } else {
    control = el("input", { id, type: "text", class: "code", spellcheck: "false", autocomplete: "off",
      "aria-describedby": described, placeholder: spec.required ? "" : `default: ${toJSON(spec.default)}` });
    write = (v) => {
      control.value = v === undefined || v === null ? "" : formatValue(v);
    };
    read = () => {
      const text = control.value.trim();
      if (text === "") {
        if (!spec.required) return undefined;
        throw new Error("is required");
      }
      let v = parseValue(text, outer);
      if (integer) v = withoutNegativeZero(v);
      if (spec.dtype === "int64" && !Number.isInteger(v)) throw new Error("must be an integer");
      if (spec.kind === "shape" && typeof v === "number") return [v];
      return v;
    };
    control.addEventListener("input", onChange);
    field.append(control);
    write(value);
  }
  control.dataset.control = "";

  let grad = null;
  if (spec.differentiable) {
    grad = el("input", { type: "checkbox", id: `${id}-grad` });
    grad.checked = requiresGrad;
    grad.addEventListener("change", () => { grad.dataset.explicit = "true"; onChange(); });
    const toggle = el("label", { for: `${id}-grad`, class: "grad-toggle" }, grad, " requires grad");
    field.append(toggle);
    if (spec.kind === "variable") {            // a mask has no gradient: hide the toggle
      const sync = () => { let v; try { v = parseValue(control.value, outer); } catch { return; } toggle.hidden = isMask(v); };
      control.addEventListener("input", sync);
      sync();
    }
  }
  field.append(el("p", { class: "msg", id: msgId, "aria-live": "polite" }));
  return {
    field, read, write,
    requiresGrad: () => (grad ? grad.checked && !grad.closest("[hidden]") : false),
    /** Whether requires grad was set by the user or the case (else: the server decides). */
    gradExplicit: () => Boolean(grad?.dataset.explicit),
    setRequiresGrad: (on, explicit) => {
      if (!grad) return;
      grad.checked = on;
      if (explicit) grad.dataset.explicit = "true";
    },
  };
}
