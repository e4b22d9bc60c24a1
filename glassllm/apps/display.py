"""Pictures of glassllm's numbers in a notebook: a graph with data and grad on every node
(as micrograd's drawings), value and gradient heatmaps, and a check's per-element verdict.

Each picture is one self-contained piece of HTML holding inline SVG drawn with SVG's own
presentation attributes (``fill``, ``stroke``, ``font-size``): no script, no ``<style>``,
no ``style=`` attribute, no CDN, no RequireJS, no widget state. So it survives what drops
the others — ``jupyter nbconvert --to html``, GitHub's notebook preview (its sanitizer
strips ``<script>``, ``<style>`` and ``style`` attributes, and keeps SVG's attributes), a
hub with no internet, a strict Content-Security-Policy. Every picture also has a
``text/plain`` form (what a terminal, a doctest or a screen reader gets).

Colours follow the page: blue is negative, orange positive, white zero, each array on its
own symmetric scale (its largest magnitude is full colour).

Only NumPy: this module reads the objects it draws by their attributes, imports nothing
of glassllm, and is imported only when a notebook asks for a picture (a ``Tensor``'s
``_repr_mimebundle_``, the client's ``Result`` and verdicts).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

NEG, POS = (33, 102, 172), (230, 97, 1)        # the page's blue and orange
INK, MUTED, EDGE, CARD = "#1b1f24", "#57606a", "#8c959f", "#f6f8fa"
FONT = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
NODE_W, GAP_X, GAP_Y, PER_ROW = 184, 22, 34, 6   # a level wider than PER_ROW wraps
MINI_CELLS, BIG_CELLS = 10, 24                  # the rows / columns a heatmap shows at most


def colour(x: float, scale: float) -> str:
    """The fill of value `x` on a symmetric scale of ±`scale` (NaN: grey)."""
    if not np.isfinite(x):
        return "#bbbbbb" if np.isnan(x) else ("#6e1f8a" if x > 0 else "#0a2f57")
    t = 0.0 if scale == 0 else min(1.0, abs(x) / scale)
    r, g, b = POS if x > 0 else NEG
    return "#{:02x}{:02x}{:02x}".format(*(round(255 + (c - 255) * t) for c in (r, g, b)))


def fmt(x: float) -> str:
    return f"{x:.4g}" if np.isfinite(x) else str(x)


def _grid(a: np.ndarray) -> np.ndarray:
    """Any array as rows × columns: a scalar 1×1, a vector one row, more axes folded."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    return a.reshape(-1, a.shape[-1])


def _scale(a: np.ndarray) -> float:
    finite = a[np.isfinite(a)]
    return float(np.abs(finite).max()) if finite.size else 0.0


LEVELS = 64                                      # shades per side: finer than an eye sees
PALETTE = np.array([colour(k / LEVELS, 1.0) for k in range(-LEVELS, LEVELS + 1)])


def _colours(g: np.ndarray, scale: float) -> list[list[str]]:
    """`colour` of every element at once, from a palette of 2 * LEVELS + 1 shades (the
    picture of 40 nodes draws thousands of cells)."""
    t = np.zeros(g.shape) if scale == 0 else np.clip(np.nan_to_num(g) / scale, -1, 1)
    out = PALETTE[np.rint(t * LEVELS).astype(int) + LEVELS]
    bad = ~np.isfinite(g)
    if bad.any():
        out = out.astype(object)
        for i in zip(*np.nonzero(bad), strict=True):
            out[i] = colour(float(g[i]), scale)
    return out.tolist()


def heatmap_svg(a: np.ndarray, x: float, y: float, cell: float, most: int,
                numbers: bool = False, tips: bool = False) -> tuple[list[str], float, float]:
    """SVG elements of `a` as a heatmap at (x, y); at most `most` rows and columns are shown
    (an ellipsis marks the rest). Returns (elements, width, height)."""
    g = _grid(a)
    rows, cols = min(g.shape[0], most), min(g.shape[1], most)
    shown = g[:rows, :cols]
    s, w = _scale(g), cell * (2.6 if numbers else 1)
    fills, values = _colours(shown, s), shown.tolist()
    size = f'width="{w - .5:g}" height="{cell - .5:g}"'
    xs = [f"{x + j * w:g}" for j in range(cols)]
    out = []
    for i in range(rows):
        yi = f"{y + i * cell:g}"
        if not (tips or numbers):                   # the common case, kept lean
            out.append("".join(f'<rect x="{xs[j]}" y="{yi}" {size} fill="{fills[i][j]}"/>'
                               for j in range(cols)))
            continue
        for j in range(cols):
            v = values[i][j]
            tip = f"<title>[{i}, {j}] = {fmt(v)}</title>" if tips else ""
            out.append(f'<rect x="{xs[j]}" y="{yi}" {size} fill="{fills[i][j]}">{tip}</rect>')
            if numbers:
                dark = s and abs(v) / s > 0.6
                out.append(f'<text x="{x + j * w + w / 2:g}" y="{y + i * cell + cell * .7:g}" '
                           f'font-size="{cell * .5:g}" text-anchor="middle" '
                           f'fill="{"#ffffff" if dark else INK}">{fmt(v)}</text>')
    width, height = cols * w, rows * cell
    if g.shape[1] > cols:
        out.append(_text(x + width + 2, y + cell * .8, "…", cell, MUTED))
        width += cell
    if g.shape[0] > rows:
        out.append(_text(x, y + height + cell * .8, "⋮", cell, MUTED))
        height += cell
    return out, width, height


def _text(x: float, y: float, s: str, size: float, fill: str = INK, anchor: str = "start",
          weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:.1f}" fill="{fill}" '
            f'text-anchor="{anchor}" font-weight="{weight}">{html.escape(s)}</text>')


def _svg(body: list[str], width: float, height: float, label: str) -> str:
    """One accessible SVG: role img, named by its <title>."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{html.escape(label)}" '
            f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'font-family="{FONT}"><title>{html.escape(label)}</title>'
            f'<rect width="100%" height="100%" fill="#ffffff"/>{"".join(body)}</svg>')


def _shape(a: np.ndarray) -> str:
    return "scalar" if a.ndim == 0 else str(tuple(a.shape)).replace(" ", " ")


# -- graphs ---------------------------------------------------------------------------

@dataclass
class Node:
    """One node of a drawn graph: what it is (`label`: an op or a variable's name, `text`:
    the expression it computes), the nodes it reads, its data and its gradient."""

    id: int
    label: str
    text: str
    inputs: list[int]
    value: np.ndarray
    grad: np.ndarray | None


def tensor_nodes(root: Any, names: Mapping[str, Any] | None = None) -> list[Node]:
    """The graph below a Tensor, inputs first, with every node's gradient.

    A Tensor keeps the gradient of its leaves only, so the picture replays the backward
    walk itself: the seed is 1 for a one-element root (what ``backward()`` uses) and ones
    otherwise (the gradient of the sum), and each node's backward closure turns its
    gradient into its inputs', added up where a tensor is used twice. `names` labels
    leaves (``{"x": x}``); the others are ``t0``, ``t1`` … in order."""
    label_of = {id(t): n for n, t in (names or {}).items()}
    order, seen, stack = [], set(), [(root, False)]
    while stack:                                   # iterative: a deep graph, no recursion
        t, done = stack.pop()
        if done:
            order.append(t)
        elif id(t) not in seen:
            seen.add(id(t))
            stack.append((t, True))
            stack.extend((p, False) for p in reversed(t._parents) if id(p) not in seen)
    grads: dict[int, np.ndarray] = {}
    if getattr(root, "requires_grad", False) and root._backward is not None:
        grads[id(root)] = np.ones(root.shape)
        for t in reversed(order):
            g = grads.get(id(t))
            if g is None or t._backward is None:
                continue
            for p, pg in zip(t._parents, t._backward(g), strict=True):
                if pg is not None and p.requires_grad:
                    grads[id(p)] = pg if id(p) not in grads else grads[id(p)] + pg
    index = {id(t): i for i, t in enumerate(order)}
    nodes, leaves = [], 0
    for i, t in enumerate(order):
        if t._parents:
            label = t._op or "op"
        else:
            label = label_of.get(id(t))
            if label is None and not t.requires_grad and t.size == 1:
                label = fmt(float(t.data))           # a constant: its value says what it is
            elif label is None:
                label, leaves = f"t{leaves}", leaves + 1
        g = grads.get(id(t))
        if g is None and not t._parents and t.grad is not None:
            g = t.grad
        nodes.append(Node(i, label, "", [index[id(p)] for p in t._parents],
                          np.asarray(t.data), None if g is None else np.asarray(g)))
    return nodes


def expression_nodes(nodes: Iterable[Mapping[str, Any]]) -> list[Node]:
    """The graph of an expression's answer (``/api/v1/eval``'s ``nodes``, or
    ``glassllm.sandbox.expr.evaluate``'s), values already arrays or in the wire's JSON."""
    out = []
    for n in nodes:
        label = n.get("name") or n["op"]
        out.append(Node(int(n["id"]), label, n.get("text") or "", list(n.get("inputs") or []),
                        _array(n.get("value")), None if n.get("grad") is None
                        else _array(n["grad"])))
    return out


def _array(v: Any) -> np.ndarray:
    """A wire value as a float64 array (non-finite numbers travel as strings)."""
    if isinstance(v, np.ndarray):
        return v.astype(np.float64)
    if isinstance(v, dict) and "base64" in v:
        import base64
        dtype = np.dtype(v["dtype"]).newbyteorder("<")
        raw = np.frombuffer(base64.b64decode(v["base64"]), dtype=dtype)
        return raw.astype(np.float64).reshape(v["shape"])
    def num(x: Any) -> Any:
        if isinstance(x, list):
            return [num(e) for e in x]
        return float(x) if x is not None else np.nan
    return np.asarray(num(v), dtype=np.float64)


def _node_card(n: Node, x: float, y: float) -> tuple[list[str], float]:
    """One node as SVG at (x, y): its label and shape; a scalar's data and grad as numbers,
    an array's as two small heatmaps. Returns (elements, height)."""
    body = [_text(x + 8, y + 15, n.label[:22], 12, INK, weight="bold"),
            _text(x + NODE_W - 8, y + 15, _shape(n.value), 10, MUTED, "end")]
    if n.text and n.text != n.label:
        body.append(_text(x + 8, y + 29, n.text if len(n.text) <= 28 else n.text[:27] + "…",
                          10, MUTED))
    top = y + (36 if n.text and n.text != n.label else 22)
    if n.value.size == 1:
        grad = "—" if n.grad is None else fmt(float(np.ravel(n.grad)[0]))
        body += [_text(x + 8, top + 12, f"data {fmt(float(np.ravel(n.value)[0]))}", 11),
                 _text(x + 8, top + 27, f"grad {grad}", 11, MUTED if n.grad is None else POS_TEXT)]
        h = top + 34 - y
    else:
        cols = min(_grid(n.value).shape[1], MINI_CELLS)
        cell = max(3.0, min(8.0, (NODE_W / 2 - 20) / cols))
        body += [_text(x + 8, top + 10, "data", 9, MUTED),
                 _text(x + NODE_W / 2 + 4, top + 10, "grad", 9, MUTED)]
        d, _, dh = heatmap_svg(n.value, x + 8, top + 14, cell, MINI_CELLS)
        body += d
        gh = 0.0
        if n.grad is not None:
            gr, _, gh = heatmap_svg(n.grad, x + NODE_W / 2 + 4, top + 14, cell, MINI_CELLS)
            body += gr
        else:
            body.append(_text(x + NODE_W / 2 + 4, top + 24, "none", 9, MUTED))
        h = top + 20 + max(dh, gh, 10) - y
    card = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{h:.1f}" rx="6" '
            f'fill="{CARD}" stroke="{EDGE}"/>')
    return [card, *body], h


POS_TEXT = "#8a3b00"                              # the grad line: orange ink, readable


def graph_svg(nodes: list[Node], title: str = "computation graph") -> str:
    """The graph top to bottom: inputs first, each node one level below its lowest input,
    a level of more than PER_ROW nodes wrapped; edges from an input's bottom to the node."""
    level: dict[int, int] = {}
    for n in nodes:                                  # nodes come inputs first
        level[n.id] = 1 + max((level[i] for i in n.inputs), default=-1)
    first_use: dict[int, int] = {}
    for n in nodes:
        for i in n.inputs:
            first_use[i] = min(first_use.get(i, level[n.id]), level[n.id])
    for n in nodes:                                  # an input sits just above its first use
        if not n.inputs and n.id in first_use:
            level[n.id] = first_use[n.id] - 1
    rows: dict[int, list[Node]] = {}
    for n in nodes:
        rows.setdefault(level[n.id], []).append(n)
    pos: dict[int, tuple[float, float, float]] = {}   # id -> x, y, height
    cards, y, width, slot = [], 10.0, 0.0, {}
    for lv in sorted(rows):
        row = sorted(rows[lv], key=lambda n: (np.mean([slot[i] for i in n.inputs])
                                              if n.inputs else slot.setdefault(n.id, n.id)))
        for start in range(0, len(row), PER_ROW):
            chunk, tallest = row[start:start + PER_ROW], 0.0
            for k, n in enumerate(chunk):
                x = 10 + k * (NODE_W + GAP_X)
                body, h = _node_card(n, x, y)
                cards += body
                pos[n.id] = (x, y, h)
                slot[n.id] = k
                tallest = max(tallest, h)
                width = max(width, x + NODE_W + 10)
            y += tallest + GAP_Y
    edges = []
    for n in nodes:
        x, y0, _ = pos[n.id]
        for k, i in enumerate(n.inputs):
            px, py, ph = pos[i]
            sx, sy = px + NODE_W / 2, py + ph
            tx = x + NODE_W / 2 + (k - (len(n.inputs) - 1) / 2) * 14
            mid = (sy + y0) / 2
            edges.append(f'<path d="M{sx:.1f},{sy:.1f} C{sx:.1f},{mid:.1f} {tx:.1f},{mid:.1f} '
                         f'{tx:.1f},{y0 - 4:.1f}" fill="none" stroke="{EDGE}" stroke-width="1.2"/>'
                         f'<path d="M{tx - 4:.1f},{y0 - 8:.1f} L{tx:.1f},{y0:.1f} L{tx + 4:.1f},'
                         f'{y0 - 8:.1f}" fill="none" stroke="{EDGE}" stroke-width="1.2"/>')
    label = f"{title}: {len(nodes)} nodes, inputs at the top, the output at the bottom"
    return _svg(edges + cards, max(width, 200), y - GAP_Y + 10, label)


def graph_text(nodes: list[Node]) -> str:
    """The graph as lines: one node a line, its inputs, shape, data and grad in short."""
    def short(a: np.ndarray | None) -> str:
        if a is None:
            return "—"
        return fmt(float(a.ravel()[0])) if a.size == 1 else f"|max| {fmt(_scale(_grid(a)))}"
    lines = []
    for n in nodes:
        reads = f"({', '.join(f'#{i}' for i in n.inputs)})" if n.inputs else ""
        lines.append(f"#{n.id} {n.label}{reads} {_shape(n.value)}  data {short(n.value)}  "
                     f"grad {short(n.grad)}")
    return "\n".join(lines)


# -- heatmaps of a result ------------------------------------------------------------------

def arrays_svg(arrays: Mapping[str, np.ndarray], title: str) -> str:
    """Named arrays side by side as heatmaps with their numbers (small ones) or a tooltip
    per cell (larger ones), each with its shape and range."""
    body, x, height = [], 10.0, 0.0
    for name, a in arrays.items():
        a = np.asarray(a, dtype=np.float64)
        g = _grid(a)
        numbers = g.shape[0] <= 8 and g.shape[1] <= 6
        cell = 22.0 if numbers else max(6.0, min(16.0, 320 / max(1, min(g.shape[1], BIG_CELLS))))
        body.append(_text(x, 16, name, 12, INK, weight="bold"))
        body.append(_text(x, 30, f"{_shape(a)} max |x| {fmt(_scale(g))}", 10, MUTED))
        cells, w, h = heatmap_svg(a, x, 38, cell, BIG_CELLS, numbers=numbers, tips=not numbers)
        body += cells
        x += max(w, 150) + 24
        height = max(height, 38 + h + 10)
    return _svg(body, x, height, title)


def arrays_text(arrays: Mapping[str, np.ndarray]) -> str:
    with np.printoptions(precision=6, threshold=64, edgeitems=3):
        return "\n".join(f"{name} = {np.array2string(np.asarray(a), prefix=name + ' = ')}"
                         for name, a in arrays.items())


# -- verdicts -----------------------------------------------------------------------------

GOOD, BAD = "#cdebd3", "#f6c6c6"


def verdict_svg(reports: Mapping[str, Mapping[str, Any] | None], title: str) -> str:
    """Per answer, per element: agrees (green) or not (red), with the digits it agrees to
    when the check counted them; the answer's verdict and the pattern of its mistake."""
    body, y, width = [], 8.0, 320.0
    if any(r and r.get("digits") is not None for r in reports.values()):
        body.append(_text(10, y + 10, "in each cell: the significant digits that agree"
                          " (= exactly equal)", 10, MUTED))
        y += 14
    for name, r in reports.items():
        if r is None:
            continue
        ok = bool(r.get("passed", r.get("allclose", False)))
        says = (r.get("pattern") or {}).get("says", "")
        body.append(_text(10, y + 14, f"{name}: {'right' if ok else 'wrong'}", 12,
                          "#1a7f37" if ok else "#b42318", weight="bold"))
        y += 20
        if says:
            body.append(_text(10, y + 10, says[:160], 11, INK))
            width = max(width, 20 + 6.8 * len(says[:160]))   # monospace: ~0.62 em a letter
            y += 16
        agree = r.get("agree", r.get("mask"))
        digits = r.get("digits")
        if agree is not None:
            a = _grid(np.asarray(agree, dtype=bool))
            mismatch_is_true = "agree" not in r          # /api/v1/check's mask marks mismatches
            dg = None if digits is None else _grid(_array(digits))
            rows, cols = min(a.shape[0], BIG_CELLS), min(a.shape[1], BIG_CELLS)
            for i in range(rows):
                for j in range(cols):
                    good = bool(a[i, j]) != mismatch_is_true
                    cx, cy = 10 + j * 30, y + i * 20
                    body.append(f'<rect x="{cx}" y="{cy:.1f}" width="30" height="20" '
                                f'fill="{GOOD if good else BAD}" stroke="#ffffff"/>')
                    mark = "✓" if good else "✗"
                    if dg is not None and dg.shape == a.shape:
                        d = float(dg[i, j])
                        mark = "=" if not np.isfinite(d) else f"{d:.0f}"
                    body.append(_text(cx + 15, cy + 14, mark, 11, INK, "middle"))
            width = max(width, 20 + cols * 30)
            y += rows * 20 + 10
    return _svg(body, width, y + 4, title)


def verdict_text(reports: Mapping[str, Mapping[str, Any] | None]) -> str:
    lines = []
    for name, r in reports.items():
        if r is None:
            continue
        ok = bool(r.get("passed", r.get("allclose", False)))
        says = (r.get("pattern") or {}).get("says", "")
        agree = r.get("agree", r.get("mask"))
        count = ""
        if agree is not None:
            a = np.asarray(agree, dtype=bool)
            good = int(a.sum()) if "agree" in r else int(a.size - a.sum())
            count = f" ({good} of {a.size} elements agree)"
        lines.append(f"{name}: {'right' if ok else 'wrong'}{count}"
                     + (f" — {says}" if says else ""))
    return "\n".join(lines)


def bundle(svg: str, text: str, caption: str = "") -> dict[str, str]:
    """The mime bundle: HTML (the SVG, under a caption) and plain text."""
    cap = f"<p><strong>{html.escape(caption)}</strong></p>" if caption else ""
    return {"text/html": f'<div class="glassllm-display">{cap}{svg}</div>', "text/plain": text}


# -- the objects ---------------------------------------------------------------------------

def tensor_bundle(t: Any, names: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A Tensor: its graph when it was computed from others, else its data (and grad)."""
    if t._parents:
        nodes = tensor_nodes(t, names)
        return bundle(graph_svg(nodes, "graph of a Tensor"), repr(t) + "\n" + graph_text(nodes))
    arrays = {"data": t.data} | ({} if t.grad is None else {"grad": t.grad})
    return bundle(arrays_svg(arrays, "a Tensor's data and gradient"), repr(t))


def expression_bundle(answer: Mapping[str, Any]) -> dict[str, str]:
    """An expression's answer (nodes with values and gradients): its graph."""
    nodes = expression_nodes(answer["nodes"])
    text = answer.get("expression") or ""
    return bundle(graph_svg(nodes, f"graph of {text}" if text else "expression graph"),
                  graph_text(nodes), caption=text)


def result_bundle(value: np.ndarray, grads: Mapping[str, np.ndarray], raw: Mapping[str, Any],
                  warnings: list[str]) -> dict[str, str]:
    """A client Result: value and gradient heatmaps, and the graph when it has nodes."""
    arrays = {"value": value} | {f"grad {k}": g for k, g in grads.items()}
    what = raw.get("op") or raw.get("expression") or "result"
    svg = arrays_svg(arrays, f"value and gradients of {what}")
    text = arrays_text(arrays)
    if raw.get("nodes"):
        nodes = expression_nodes(raw["nodes"])
        svg += graph_svg(nodes, f"graph of {what}")
    if warnings:
        text += "\nwarnings: " + "; ".join(warnings)
    return bundle(svg, text, caption=str(what))


def check_bundle(answer: Mapping[str, Any]) -> dict[str, str]:
    """A check (``/api/v1/check``'s answer): the value's and each gradient's verdict."""
    reports = {"value": answer.get("value")} | {f"grad {k}": v for k, v in
                                                 (answer.get("grads") or {}).items()}
    ok = "passed" if answer.get("passed") else "not passed"
    return bundle(verdict_svg(reports, f"check: {ok}"), f"check: {ok}\n" + verdict_text(reports),
                  caption=f"check: {ok}")


def submitted_bundle(passed: bool, score: float, points: float,
                     answers: Mapping[str, Mapping[str, Any]],
                     missing: list[str]) -> dict[str, str]:
    """An exercise's verdict: the score, and per answer the elements that agree."""
    head = f"{'passed' if passed else 'not yet'}: {score:g} of {points:g} points"
    text = head + "\n" + verdict_text(answers) + "".join(f"\n{k}: not given" for k in missing)
    return bundle(verdict_svg(answers, head), text, caption=head)


class Picture:
    """Any of the pictures above as a notebook output (``_repr_mimebundle_``), with its
    HTML in ``.html`` and its text in ``str()``."""

    def __init__(self, bundle: dict[str, str]) -> None:
        self.bundle = bundle
        self.html = bundle["text/html"]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return self.bundle

    def __repr__(self) -> str:
        return self.bundle["text/plain"]


def graph(tensor: Any, names: Mapping[str, Any] | None = None) -> Picture:
    """A Tensor's graph with its leaves named: ``graph(loss, {"x": x, "w": w})``."""
    return Picture(tensor_bundle(tensor, names))


def show(answer: Mapping[str, Any]) -> Picture:
    """A picture of an answer dict: an expression's (``glassllm.sandbox.expr.evaluate``,
    ``/api/v1/eval``: nodes) or a check's (``/api/v1/check``: value and grads reports)."""
    if "nodes" in answer:
        return Picture(expression_bundle(answer))
    if "passed" in answer and "value" in answer:
        return Picture(check_bundle(answer))
    raise ValueError("show() draws an expression's answer (with 'nodes') or a check's "
                     f"(with 'passed' and 'value'); this one has {sorted(answer)[:8]}")
