// "Copy as Python" and "copy as curl": the case on screen as a glassllm script that
// reproduces it offline, or as the HTTP request the page sends.

import { toJSON } from "./wire.js";

function pyNumber(x) {
  if (x === true) return "True";
  if (x === false) return "False";
  if (x === null) return "None";
  if (x === "NaN" || x === "nan") return "np.nan";
  if (x === "Infinity" || x === "inf") return "np.inf";
  if (x === "-Infinity" || x === "-inf") return "-np.inf";
  if (Object.is(x, -0)) return "-0.0";           // String(-0) is "0", Python's int 0
  return String(x);
}

/** A wire value as a Python literal (nested lists, non-finite as np.inf / np.nan). */
export function pyLiteral(v) {
  if (Array.isArray(v)) return "[" + v.map(pyLiteral).join(", ") + "]";
  return pyNumber(v);
}

function pyFloatArray(v) {
  return `np.array(${pyLiteral(v)}, dtype=float)`;
}

/** A getitem index in JSON (glassllm/sandbox/wire.py decode_index) as Python subscript text. */
export function pyIndex(v) {
  const item = (it) => {
    if (it === null) return "None";
    if (it === "...") return "...";
    if (typeof it === "number") return String(it);
    if (it && "array" in it) return `np.array(${pyLiteral(it.array)})`;
    if (it && "mask" in it) return `np.array(${pyLiteral(it.mask)}, dtype=bool)`;
    const part = (x) => (x === null || x === undefined ? "" : String(x));
    return `${part(it.start)}:${part(it.stop)}` + (it.step != null ? `:${it.step}` : "");
  };
  if (Array.isArray(v)) return v.length === 1 ? `${item(v[0])},` : v.map(item).join(", ");
  return item(v);
}

/** A constant input as a Python argument, from what the registry says of it (array, dtype). */
function pyArg(spec, v) {
  if (spec.kind === "index") return `(${pyIndex(v)})`;
  if (spec.array) {
    if (spec.dtype === "bool") return `np.array(${pyLiteral(v)}, dtype=bool)`;
    return spec.dtype === "int64" ? `np.array(${pyLiteral(v)})` : pyFloatArray(v);
  }
  if (Array.isArray(v)) return `(${v.join(", ")}${v.length === 1 ? "," : ""})`;   // axis, axes, shape
  return pyNumber(v);
}

function backward(gradOutput) {
  return gradOutput == null ? "out.backward(np.ones_like(out.data))   # the gradient of out.sum()"
    : `out.backward(${pyFloatArray(gradOutput)})`;
}

const FOOTER = (out, names) => [
  "",
  `print("value:", ${out} if isinstance(${out}, np.ndarray) else ${out}.data)`,
  ...names.map((n) => `print("grad of ${n}:", ${n}.grad)`),
];

/** One op with its inputs, as a script using glassllm.autograd (or glassllm.layers). */
export function opPython(op, inputs, requiresGrad, gradOutput) {
  const lines = ["import numpy as np", "", "from glassllm import Tensor",
    `from ${op.module} import ${op.name}`, ""];
  const args = [];
  for (const spec of op.inputs) {
    const have = spec.name in inputs;
    const v = have ? inputs[spec.name] : spec.default;
    if (spec.differentiable) {                                    // a tensor
      const rg = requiresGrad.includes(spec.name) ? ", requires_grad=True" : "";
      lines.push(`${spec.name} = Tensor(${pyFloatArray(v)}${rg})`);
      args.push(spec.name);
    } else {
      args.push(have || !spec.required ? (v === null ? "None" : pyArg(spec, v)) : "None");
    }
  }
  lines.push(`out = ${op.name}(${args.join(", ")})`);
  if (op.output === "ndarray") {
    lines.push("", "print(out)   # an np.ndarray (L0.2): no graph, no gradients");
    return lines.join("\n") + "\n";
  }
  if (requiresGrad.length) lines.push(backward(gradOutput));
  lines.push(...FOOTER("out", requiresGrad));
  return lines.join("\n") + "\n";
}

/** An expression with its variables, as a script: the expression language is Python syntax
 *  over the registry's ops, so it runs as written. */
export function exprPython(expression, variables, ops, gradOutput, { kinds = {}, wantGrad = [] } = {}) {
  const used = ops.filter((op) => new RegExp(`\\b${op.name}\\s*\\(`).test(expression));
  const byModule = {};
  for (const op of used) (byModule[op.module] ??= []).push(op.name);
  const lines = ["import numpy as np", "", "from glassllm import Tensor"];
  for (const [mod, names] of Object.entries(byModule)) lines.push(`from ${mod} import ${names.sort().join(", ")}`);
  lines.push("", "inf, nan = np.inf, np.nan", "");
  // detach(e) / no_grad(e) of the expression language: e's value, cut from the graph
  for (const cut of ["detach", "no_grad"]) {
    if (new RegExp(`\\b${cut}\\s*\\(`).test(expression)) lines.push(`${cut} = Tensor.detach  # ${cut}(e): e's value, no gradient`);
  }
  const grads = [];
  // kinds: how the sandbox read each variable in the last run (tensor, int_array, ...)
  for (const [name, spec] of Object.entries(variables)) {
    const v = spec.value;
    const leaves = toJSON(v);
    const kind = kinds[name] ?? (/true|false/.test(leaves) ? "bool_mask" : /[.eE]|"/.test(leaves) ? "tensor" : "int_array");
    const grad = spec.requires_grad ?? wantGrad.includes(name);
    if (kind === "bool_mask") lines.push(`${name} = np.array(${pyLiteral(v)}, dtype=bool)`);
    else if (grad) { lines.push(`${name} = Tensor(${pyFloatArray(v)}, requires_grad=True)`); grads.push(name); }
    else if (kind === "tensor") lines.push(`${name} = Tensor(${pyFloatArray(v)})`);
    else if (kind === "int_array" || kind === "int") lines.push(`${name} = np.array(${pyLiteral(v)})`);
    else lines.push(`${name} = ${pyFloatArray(v)}`);
  }
  lines.push(`out = ${expression.trim()}`);
  if (grads.length) lines.push(backward(gradOutput));
  lines.push(...FOOTER("out", grads));
  return lines.join("\n") + "\n";
}

/** The request as a curl command line (single quotes escaped for POSIX shells). */
export function curl(url, body) {
  const json = toJSON(body).replace(/'/g, "'\\''");
  return `curl -sS -X POST '${url}' \\\n  -H 'Content-Type: application/json' \\\n  -d '${json}'\n`;
}
