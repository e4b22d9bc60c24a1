// The wire format (SPEC H3) on the page side: nested lists of numbers, with the
// non-finite floats travelling as the strings "NaN", "Infinity", "-Infinity".

const TOKENS = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity,
                 nan: NaN, inf: Infinity, "-inf": -Infinity };

/** A wire value (number, token or nested list) as JS numbers. */
export function fromWire(v) {
  if (Array.isArray(v)) return v.map(fromWire);
  if (typeof v === "string" && v in TOKENS) return TOKENS[v];
  return v;
}

/** The shape of a rectangular nested list; null when ragged. */
export function shapeOf(v) {
  if (!Array.isArray(v)) return [];
  if (v.length === 0) return [0];
  const inner = shapeOf(v[0]);
  if (inner === null) return null;
  for (const item of v) {
    const s = shapeOf(item);
    if (s === null || s.length !== inner.length || s.some((n, i) => n !== inner[i])) return null;
  }
  return [v.length, ...inner];
}

export function shapeText(shape) {
  if (shape === null) return "ragged";
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
}

/** Text a student typed as a wire value: JSON, plus bare inf / nan / -inf and Python's
 *  True / False / None, so `[[0, -inf]]` and `[True, False]` both work. */
export function parseValue(text) {
  const src = text.trim();
  if (src === "") throw new Error("is empty");
  const json = src.replace(/("(?:[^"\\]|\\.)*")|(-?)\b(inf(?:inity)?|nan)\b|\b(True|False|None)\b/gi,
    (m, str, minus, tok, py) => {
      if (str) return str;
      if (py) return { true: "true", false: "false", none: "null" }[py.toLowerCase()];
      if (tok.toLowerCase() === "nan") return '"NaN"';
      return minus ? '"-Infinity"' : '"Infinity"';
    });
  try {
    return JSON.parse(json);
  } catch (err) {
    throw new Error(`is not a number or a nested list of numbers (${err.message})`);
  }
}

/** A wire value as compact text: one innermost row per line. */
export function formatValue(v, indent = "") {
  if (!Array.isArray(v)) return formatLeaf(v);
  if (!v.some(Array.isArray)) return "[" + v.map(formatLeaf).join(", ") + "]";
  const inner = indent + " ";
  return "[" + v.map((x, i) => (i ? inner : "") + formatValue(x, inner)).join(",\n") + "]";
}

/** One element as typed: non-finite tokens bare (-inf, inf, nan), the rest as JSON. */
function formatLeaf(x) {
  const bare = { NaN: "nan", Infinity: "inf", "-Infinity": "-inf" }[x];
  return bare ?? JSON.stringify(x);
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

/** Every element of a nested list, flattened. */
export function flat(v) {
  return Array.isArray(v) ? v.flatMap(flat) : [v];
}
