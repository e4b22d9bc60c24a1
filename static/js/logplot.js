// A log-log plot as SVG, drawn by the page's own code (no library, nothing from another
// host, no inline style: classes only, for the Content-Security-Policy). Used by the
// gradient checks (checkmodes.js): the eps sweep's error curve and the Taylor remainders.
// Each series is a polyline; a "points" series also draws a circle per point, carrying
// its numbers (data-x, data-y) for tests and a <title> for a pointer; a marker is a
// vertical line with its label. The figure says what it shows in its <title> and <desc>;
// `plotKey` writes its key as HTML beside it.

const NS = "http://www.w3.org/2000/svg";
const W = 440, H = 260, LEFT = 58, RIGHT = 12, TOP = 14, BOTTOM = 42;
let plots = 0;

function svgEl(tag, attrs = {}, text = null) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text != null) node.textContent = text;
  return node;
}

/** 1e-6 as "1e-6", 0.01 as "0.01": a decade's label. */
export function decade(e) { return e >= -2 && e <= 2 ? String(10 ** e) : `1e${e}`; }

/**
 * @param {{title: string, desc: string, xLabel: string, yLabel: string,
 *          series: {name: string, cls: string, points: [number, number][], dots?: boolean,
 *                   guide?: boolean}[],
 *          marker?: {x: number, label: string}}} spec
 * @returns {SVGSVGElement}
 */
export function logPlot({ title, desc, xLabel, yLabel, series, marker }) {
  const finite = ([x, y]) => x > 0 && y > 0 && Number.isFinite(x) && Number.isFinite(y);
  // a guide line is drawn only down to a tenth of the data: below, it would squash the plot
  const data = series.filter((s) => !s.guide).flatMap((s) => s.points.filter(finite));
  const low = data.length ? Math.min(...data.map(([, y]) => y)) / 10 : 0;
  const ok = (p) => finite(p) && p[1] >= low;
  const all = series.flatMap((s) => s.points.filter(s.guide ? ok : finite));
  const lx = all.map(([x]) => Math.log10(x)), ly = all.map(([, y]) => Math.log10(y));
  const x0 = Math.floor(Math.min(...lx)), x1 = Math.ceil(Math.max(...lx));
  const y0 = Math.floor(Math.min(...ly)), y1 = Math.max(Math.ceil(Math.max(...ly)), y0 + 1);
  const px = (x) => LEFT + ((Math.log10(x) - x0) / Math.max(1, x1 - x0)) * (W - LEFT - RIGHT);
  const py = (y) => TOP + (1 - (Math.log10(y) - y0) / (y1 - y0)) * (H - TOP - BOTTOM);
  const id = `plot-${++plots}`;
  const svg = svgEl("svg", { class: "log-plot", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-labelledby": `${id}-title ${id}-desc` });
  svg.append(svgEl("title", { id: `${id}-title` }, title), svgEl("desc", { id: `${id}-desc` }, desc));

  const grid = svgEl("g", { class: "plot-grid" });
  const xStep = Math.max(1, Math.ceil((x1 - x0) / 8)), yStep = Math.max(1, Math.ceil((y1 - y0) / 6));
  for (let e = x0; e <= x1; e += xStep) {
    grid.append(svgEl("line", { x1: px(10 ** e), x2: px(10 ** e), y1: TOP, y2: H - BOTTOM }));
    grid.append(svgEl("text", { class: "tick x-tick", x: px(10 ** e), y: H - BOTTOM + 16 }, decade(e)));
  }
  for (let e = y0; e <= y1; e += yStep) {
    grid.append(svgEl("line", { x1: LEFT, x2: W - RIGHT, y1: py(10 ** e), y2: py(10 ** e) }));
    grid.append(svgEl("text", { class: "tick y-tick", x: LEFT - 6, y: py(10 ** e) + 4 }, decade(e)));
  }
  grid.append(svgEl("rect", { class: "plot-frame", x: LEFT, y: TOP, width: W - LEFT - RIGHT, height: H - TOP - BOTTOM }));
  svg.append(grid,
    svgEl("text", { class: "axis-label", x: (LEFT + W - RIGHT) / 2, y: H - 6 }, xLabel),
    svgEl("text", { class: "axis-label", transform: `translate(14 ${(TOP + H - BOTTOM) / 2}) rotate(-90)` }, yLabel));

  if (marker && marker.x > 0) {
    const m = svgEl("g", { class: "plot-marker" });
    m.dataset.x = String(marker.x);
    m.append(svgEl("line", { x1: px(marker.x), x2: px(marker.x), y1: TOP, y2: H - BOTTOM }),
      svgEl("text", { x: px(marker.x) + 4, y: TOP + 12 }, marker.label));
    svg.append(m);
  }
  for (const s of series) {
    const pts = s.points.filter(s.guide ? ok : finite);
    const g = svgEl("g", { class: `series ${s.cls}` });
    g.dataset.series = s.name;
    if (pts.length) {
      g.append(svgEl("path", { d: pts.map(([x, y], i) => `${i ? "L" : "M"} ${px(x).toFixed(1)} ${py(y).toFixed(1)}`).join(" ") }));
    }
    if (s.dots) {
      for (const [x, y] of pts) {
        const c = svgEl("circle", { cx: px(x).toFixed(1), cy: py(y).toFixed(1), r: 3 });
        c.dataset.x = String(x);
        c.dataset.y = String(y);
        c.append(svgEl("title", {}, `${s.name}: ${y.toExponential(2)} at ${x.toExponential(1)}`));
        g.append(c);
      }
    }
    svg.append(g);
  }
  return svg;
}

/** The plot's key, as HTML below it (inside the plot it would cover the curve's ends). */
export function plotKey(series) {
  const ul = document.createElement("ul");
  ul.className = "plot-key";
  for (const s of series) {
    const li = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = `swatch ${s.cls}`;
    swatch.setAttribute("aria-hidden", "true");
    li.append(swatch, s.name);
    ul.append(li);
  }
  return ul;
}
