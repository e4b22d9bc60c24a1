// The wire format (SPEC H3) on the page side: nested lists of numbers, with the
// non-finite floats travelling as the strings "NaN", "Infinity", "-Infinity".

const TOKENS = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity,
                 nan: NaN, inf: Infinity, "-inf": -Infinity };

/** JSON text for the page's own data (request bodies, the permalink, copy as curl).
 *  JSON.stringify writes -0 as "0", which the sandbox reads as the integer 0: negative
 *  zero is written "-0.0", the float token the sandbox reads as float64 -0.0 (SPEC H3:
 *  floats round-trip exactly). Everything else as JSON.stringify writes it. */
export function toJSON(v) {
  if (typeof v === "number") return Object.is(v, -0) ? NEG_ZERO : JSON.stringify(v);
  if (Array.isArray(v)) {
    // a row of plain numbers, the bulk of any body, goes through the native writer
    if (!v.some((x) => typeof x !== "number" || Object.is(x, -0))) return JSON.stringify(v);
    return "[" + v.map((x) => (x === undefined || typeof x === "function" ? "null" : toJSON(x))).join(",") + "]";
  }
  if (v !== null && typeof v === "object" && typeof v.toJSON !== "function") {
    const parts = [];
    for (const [k, x] of Object.entries(v)) {
      if (x !== undefined && typeof x !== "function") parts.push(`${JSON.stringify(k)}:${toJSON(x)}`);
    }
    return "{" + parts.join(",") + "}";
  }
  return JSON.stringify(v);
}

const NEG_ZERO = "-0.0";

/** A value for an integer input (ids, axes, shapes, indices, masks): -0 is the integer 0
 *  there (the sandbox refuses the float -0.0 where it wants integers). */
export function withoutNegativeZero(v) {
  if (Object.is(v, -0)) return 0;
  if (Array.isArray(v)) return v.map(withoutNegativeZero);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withoutNegativeZero(x)]));
  }
  return v;
}

/** A wire value (number, token or nested list) as JS numbers. */
export function fromWire(v) {
  if (Array.isArray(v)) return v.map(fromWire);
  if (typeof v === "string" && v in TOKENS) return TOKENS[v];
  return v;
}

/** The shape of a rectangular nested list; null when ragged. Linear in the size of `v`:
 *  the shape is read once down the first children, then every list is checked against it
 *  (re-deriving each first child's shape doubled the work per nesting level). */
export function shapeOf(v) {
  const shape = [];
  for (let x = v; Array.isArray(x); x = x[0]) {
    shape.push(x.length);
    if (x.length === 0) break;
  }
  return fits(v, shape, 0) ? shape : null;
}

/** Whether `v` is a list of shape `shape.slice(k)` (a number when k is past the end). */
function fits(v, shape, k) {
  if (k === shape.length) return !Array.isArray(v);
  if (!Array.isArray(v) || v.length !== shape[k]) return false;
  for (const item of v) if (!fits(item, shape, k + 1)) return false;
  return true;
}

export function shapeText(shape) {
  if (shape === null) return "ragged";
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
}

/** The sandbox's limit on the nesting of [ and { in a request body (service/glassllm_service/settings.py,
 *  GLASSLLM_MAX_JSON_DEPTH). The page holds to it too: past it a request is refused anyway,
 *  and a list nested that deep is a typing slip, not a tensor. */
export const MAX_JSON_DEPTH = 32;

/** The deepest nesting of [ and { in JSON text, strings skipped; one pass, no parsing. */
export function nestingDepth(text) {
  let depth = 0, deepest = 0, inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") deepest = Math.max(deepest, ++depth);
    else if (c === "]" || c === "}") depth--;
  }
  return deepest;
}

/** Text a student typed as a wire value: JSON, plus bare inf / nan / -inf and Python's
 *  True / False / None, so `[[0, -inf]]` and `[True, False]` both work.
 *  `outer`: the nesting the request adds around the value ({"inputs": {"a": …}} is 2), so
 *  a value that would push the request past MAX_JSON_DEPTH is refused here, in the
 *  sandbox's words, before any work. */
export function parseValue(text, outer = 0) {
  return readValue(text, outer).value;
}

/** parseValue, plus how many numbers overflowed float64 (1e400 is read as inf, as NumPy and
 *  Python's float() read it, and travels as the token "Infinity"). */
export function readValue(text, outer = 0) {
  const src = text.trim();
  if (src === "") throw new Error("is empty");
  const depth = nestingDepth(src);
  if (depth + outer > MAX_JSON_DEPTH) {
    const err = new Error(`is nested ${depth} lists deep: JSON nesting depth ${depth + outer}` +
      ` exceeds ${MAX_JSON_DEPTH} (GLASSLLM_MAX_JSON_DEPTH)`);
    err.tooDeep = true;
    throw err;
  }
  const json = src.replace(/("(?:[^"\\]|\\.)*")|(-?)\b(inf(?:inity)?|nan)\b|\b(True|False|None)\b/gi,
    (m, str, minus, tok, py) => {
      if (str) return str;
      if (py) return { true: "true", false: "false", none: "null" }[py.toLowerCase()];
      if (tok.toLowerCase() === "nan") return '"NaN"';
      return minus ? '"-Infinity"' : '"Infinity"';
    });
  let overflowed = 0;
  // JSON.parse reads 1e400 as Infinity and JSON.stringify would send it as null: send the
  // wire token instead (SPEC H3), so it arrives as the float64 it is, inf
  const toToken = (key, v) => {
    if (typeof v !== "number" || Number.isFinite(v)) return v;
    overflowed += 1;
    return v > 0 ? "Infinity" : "-Infinity";
  };
  try {
    return { value: JSON.parse(json, toToken), overflowed };
  } catch (err) {
    throw new Error(`is not a number or a nested list of numbers (${err.message})`, { cause: err });
  }
}

/** A wire value as compact text: one innermost row per line. */
export function formatValue(v, indent = "") {
  if (!Array.isArray(v)) return formatLeaf(v);
  if (!v.some(Array.isArray)) return "[" + v.map(formatLeaf).join(", ") + "]";
  const inner = indent + " ";
  return "[" + v.map((x, i) => (i ? inner : "") + formatValue(x, inner)).join(",\n") + "]";
}

/** One element as typed: non-finite tokens bare (-inf, inf, nan), the rest as JSON
 *  (negative zero as -0.0, so it reads back as itself). */
function formatLeaf(x) {
  const bare = { NaN: "nan", Infinity: "inf", "-Infinity": "-inf" }[x];
  return bare ?? toJSON(x);
}

/** A number for a table cell: short, but exact enough to recognise (4 significant digits). */
export function formatNumber(x) {
  if (typeof x === "boolean") return x ? "true" : "false";
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "∞";
  if (x === -Infinity) return "−∞";
  if (x === 0) return Object.is(x, -0) ? "−0" : "0";
  const ax = Math.abs(x);
  let s;
  if (ax >= 1e5 || ax < 1e-3) s = x.toExponential(2).replace("e+", "e");
  else s = String(Number(x.toPrecision(4)));
  return s.replace("-", "−");
}

/** A number in a label (a graph node, a summary, a legend, a step's numbers): as
 *  formatNumber, but −0 reads 0 there; the sign of a zero is kept where a value is shown
 *  in full (a heatmap's cell, its hover text). */
export function labelNumber(x) {
  return Object.is(x, -0) ? "0" : formatNumber(x);
}

/** Every element of a nested list, flattened. */
export function flat(v) {
  return Array.isArray(v) ? v.flatMap(flat) : [v];
}
