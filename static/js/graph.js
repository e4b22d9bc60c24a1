// The computation graph of an expression as SVG: one box per node (op and shape), edges
// from inputs to the node that consumes them, laid out in columns by depth (leaves left,
// the output right). Nodes are focusable buttons: click or Enter selects one.

const NS = "http://www.w3.org/2000/svg";
const W = 150, H = 48, GAP_X = 56, GAP_Y = 18, PAD = 12;

function svgEl(tag, attrs = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

/** A node's first line: the variable's or constant's name, else the op. */
export function nodeLabel(n) {
  return n.name ?? (n.op === "constant" ? String(n.value) : n.op);
}

export function shapeLabel(shape) {
  if (!Array.isArray(shape)) return "";
  return shape.length === 1 ? `(${shape[0]},)` : `(${shape.join(", ")})`;
}

/** Columns by longest path from a leaf. */
function layout(nodes) {
  const depth = new Map();
  for (const n of nodes) {
    const ins = n.inputs.filter((i) => depth.has(i));
    depth.set(n.id, ins.length ? 1 + Math.max(...ins.map((i) => depth.get(i))) : 0);
  }
  const columns = [];
  for (const n of nodes) (columns[depth.get(n.id)] ??= []).push(n);
  const pos = new Map();
  columns.forEach((col, c) => col.forEach((n, r) => pos.set(n.id, { x: PAD + c * (W + GAP_X), y: PAD + r * (H + GAP_Y) })));
  const rows = Math.max(...columns.map((col) => col.length));
  return { pos, width: 2 * PAD + columns.length * W + (columns.length - 1) * GAP_X, height: 2 * PAD + rows * H + (rows - 1) * GAP_Y };
}

/**
 * Draw `nodes` (the eval response's list, in evaluation order) into `svg`.
 * @returns {{highlight: (id, cls) => void}}
 */
export function drawGraph(svg, nodes, { onSelect }) {
  svg.replaceChildren();
  if (!nodes.length) return { highlight() {} };
  const { pos, width, height } = layout(nodes);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  // fit the column's width, but never shrink below 60% (then the box scrolls sideways)
  svg.style.width = "100%";
  svg.style.maxWidth = `${width}px`;
  svg.style.minWidth = `${Math.round(width * 0.6)}px`;
  svg.style.height = "auto";
  const defs = svgEl("defs");
  const marker = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
  marker.append(svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }));
  defs.append(marker);
  svg.append(defs);

  const edges = svgEl("g", { class: "edges" });
  for (const n of nodes) {
    const to = pos.get(n.id);
    for (const i of n.inputs) {
      const from = pos.get(i);
      if (!from) continue;
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2;
      const mid = (x1 + x2) / 2;
      edges.append(svgEl("path", { d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`, class: "edge", "marker-end": "url(#arrow)" }));
    }
  }
  svg.append(edges);

  const boxes = new Map();
  for (const n of nodes) {
    const { x, y } = pos.get(n.id);
    const label = nodeLabel(n);
    const g = svgEl("g", { class: "node", tabindex: "0", role: "button", transform: `translate(${x} ${y})`,
      "aria-label": `node ${n.id}: ${label}, shape ${shapeLabel(n.shape)}` +
        (n.requires_grad === false ? ", constant: no gradient" : "") });
    g.dataset.id = String(n.id);
    g.append(svgEl("rect", { width: W, height: H, rx: "7" }));
    const t1 = svgEl("text", { x: W / 2, y: 20, class: "node-op" });
    t1.textContent = label.length > 18 ? label.slice(0, 17) + "…" : label;
    const t2 = svgEl("text", { x: W / 2, y: 38, class: "node-shape" });
    t2.textContent = `#${n.id} ${shapeLabel(n.shape)}`;
    const title = svgEl("title");
    title.textContent = `${label} ${shapeLabel(n.shape)}`;
    g.append(title, t1, t2);
    g.addEventListener("click", () => onSelect(n.id));
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSelect(n.id); }
    });
    boxes.set(n.id, g);
    svg.append(g);
  }
  return {
    highlight(id, cls = "selected") {
      for (const [nid, g] of boxes) g.classList.toggle(cls, nid === id);
    },
    mark(ids, cls) {
      for (const [nid, g] of boxes) g.classList.toggle(cls, ids.has(nid));
    },
  };
}
