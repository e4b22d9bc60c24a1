"""Writes examples/notebooks/*.ipynb from the cells below, without outputs (the test suite
runs them: tests/notebooks/test_shipped_notebooks.py). Edit here, then:

    .venv/bin/python tools/make_notebooks.py
"""

from __future__ import annotations

from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "examples" / "notebooks"

NEURON = [
    ("md", """# From micrograd's neuron to softmax and cross-entropy

micrograd's README draws one neuron, `o = tanh(x1*w1 + x2*w2 + b)`, with the data and the
gradient on every node. glassllm's `Tensor` does the same with arrays: run this notebook
top to bottom, and every picture is the graph with **data** and **grad** on each node
(blue negative, orange positive, white zero)."""),
    ("code", """import numpy as np

from glassllm import Tensor, display
from glassllm import autograd as A"""),
    ("md", "## 1. The neuron, with micrograd's numbers"),
    ("code", """x1, x2 = Tensor(2.0, requires_grad=True), Tensor(0.0, requires_grad=True)
w1, w2 = Tensor(-3.0, requires_grad=True), Tensor(1.0, requires_grad=True)
b = Tensor(6.8813735870195432, requires_grad=True)
o = A.tanh(x1 * w1 + x2 * w2 + b)
o.backward()
display.graph(o, {"x1": x1, "x2": x2, "w1": w1, "w2": w2, "b": b})"""),
    ("md", """The numbers of micrograd's drawing: `o = 0.7071`, and `do/dx1 = w1 * (1 - o²) = -1.5`,
`do/dw1 = x1 * (1 - o²) = 1.0`, `do/dx2 = 0.5`, `do/dw2 = 0`."""),
    ("code", """assert abs(o.item() - 0.7071067811865476) < 1e-12
assert np.allclose([x1.grad, w1.grad, x2.grad, w2.grad], [-1.5, 1.0, 0.5, 0.0])"""),
    ("md", """## 2. A layer of neurons on a batch

The same neuron, four of them at once on a batch of three: `h = tanh(x @ W + b)`. A
tensor's picture shows arrays as small heatmaps."""),
    ("code", """rng = np.random.default_rng(0)
x = Tensor(rng.normal(size=(3, 2)), requires_grad=True)
W = Tensor(rng.normal(size=(2, 4)), requires_grad=True)
bias = Tensor(np.zeros(4), requires_grad=True)
h = A.tanh(x @ W + bias)
h.sum().backward()
display.graph(h.sum(), {"x": x, "W": W, "b": bias})"""),
    ("md", """## 3. Softmax and cross-entropy, by hand and by glassllm

Three classes, logits `z = h @ V`. The loss is the mean over rows of `-log softmax(z)[target]`.
By hand, its gradient with respect to the logits is `(softmax(z) - onehot(target)) / N`:
each row sums to zero, and only the target's entry is negative."""),
    ("code", """V = Tensor(rng.normal(size=(4, 3)), requires_grad=True)
targets = np.array([0, 2, 1])
x.grad = W.grad = bias.grad = None
h = A.tanh(x @ W + bias)
logits = (h @ V).retain_grad()
loss = A.cross_entropy(logits, targets)
loss.backward()
display.graph(loss, {"x": x, "W": W, "b": bias, "V": V})"""),
    ("code", """z = logits.data
p = np.exp(z - z.max(axis=1, keepdims=True))
p /= p.sum(axis=1, keepdims=True)
by_hand = (p - np.eye(3)[targets]) / len(targets)
print("max |by hand - glassllm| =", np.abs(by_hand - logits.grad).max())
assert np.allclose(by_hand, logits.grad, rtol=0, atol=1e-15)
assert np.allclose(by_hand.sum(axis=1), 0)"""),
    ("md", """The same loss from the same ops, spelled out (`log_softmax` and picking the targets'
entries), gives the same gradient for every parameter:"""),
    ("code", """grads = {n: t.grad.copy() for n, t in {"W": W, "V": V, "b": bias}.items()}
for t in (W, V, bias, x):
    t.grad = None
h = A.tanh(x @ W + bias)
picked = A.log_softmax(h @ V)[np.arange(3), targets]
(-picked.mean()).backward()
for n, t in {"W": W, "V": V, "b": bias}.items():
    print(n, np.abs(grads[n] - t.grad).max())
    assert np.allclose(grads[n], t.grad, rtol=1e-12, atol=1e-15)"""),
]

ATTENTION = [
    ("md", """# Attention's gradient by hand, beside glassllm's

One head of causal self-attention, `out = softmax(Q Kᵀ / √d + mask) V`, forward in NumPy,
then backward by hand one step at a time — and glassllm's autograd on the same numbers."""),
    ("code", """import numpy as np

from glassllm import Tensor, display
from glassllm import autograd as A

rng = np.random.default_rng(1)
T, d = 4, 3
Q, K, V = (rng.normal(size=(T, d)) for _ in range(3))
G = rng.normal(size=(T, d))                       # the gradient arriving at out
causal = np.triu(np.ones((T, T), dtype=bool), k=1)  # True: a future key, masked"""),
    ("md", "## Forward, in NumPy"),
    ("code", """S = Q @ K.T / np.sqrt(d)
S = np.where(causal, -np.inf, S)
P = np.exp(S - S.max(axis=1, keepdims=True))
P /= P.sum(axis=1, keepdims=True)
out = P @ V"""),
    ("md", """## Backward, by hand

- `out = P V`: `dV = Pᵀ G`, `dP = G Vᵀ`.
- softmax, row by row: `dS = P ⊙ (dP − rowsum(dP ⊙ P))` (the Jacobian `diag(p) − p pᵀ`
  applied to each row); a masked entry has `P = 0`, so it gets no gradient.
- `S = Q Kᵀ / √d`: `dQ = dS K / √d`, `dK = dSᵀ Q / √d`."""),
    ("code", """dV = P.T @ G
dP = G @ V.T
dS = P * (dP - (dP * P).sum(axis=1, keepdims=True))
dQ = dS @ K / np.sqrt(d)
dK = dS.T @ Q / np.sqrt(d)"""),
    ("md", "## glassllm, on the same numbers"),
    ("code", """q, k, v = (Tensor(a, requires_grad=True) for a in (Q, K, V))
scores = A.masked_fill(q @ k.T / np.sqrt(d), causal, -np.inf)
o = A.softmax(scores) @ v
o.backward(G)
display.graph(o, {"Q": q, "K": k, "V": v})"""),
    ("code", """pairs = {"dQ": (dQ, q.grad), "dK": (dK, k.grad), "dV": (dV, v.grad)}
for name, (mine, theirs) in pairs.items():
    diff = np.abs(mine - theirs).max()
    print(f"{name}: max |by hand - glassllm| = {diff:.2e}")
    assert np.allclose(mine, theirs, rtol=1e-12, atol=1e-14)
assert np.allclose(out, o.data)"""),
    ("md", """The first query sees only the first key, so the gradient of the last key comes only
from the last query's row:"""),
    ("code", """assert np.allclose(dK[-1], dS[-1, -1] * Q[-1] / np.sqrt(d))
dK[-1]"""),
]

RMSNORM = [
    ("md", """# Implement RMSNorm's vector-Jacobian product, and check it

RMSNorm scales each row of `x` by the inverse of its root mean square, then by `weight`:

    out = x * r * weight,   r = 1 / sqrt(mean(x², last axis) + eps)

Write `rms_norm_backward(x, weight, g) -> (dx, dweight)`, check it against glassllm's
autograd here, then submit it to the sandbox's exercise `rmsnorm-backward` (your own
numbers and the edge cases it adds), which grades it per element."""),
    ("code", """import numpy as np

from glassllm import Tensor, layers
from glassllm.client import Sandbox

EPS = 1e-6"""),
    ("code", """def rms_norm_backward(x, weight, g):
    r = 1 / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + EPS)
    gw = g * weight
    dx = r * gw - x * r ** 3 * (gw * x).mean(axis=-1, keepdims=True)
    dweight = (g * x * r).reshape(-1, x.shape[-1]).sum(axis=0)
    return dx, dweight"""),
    ("md", "## Checked here, against glassllm's autograd"),
    ("code", """rng = np.random.default_rng(2)
x = rng.normal(size=(4, 8))
weight = rng.uniform(0.5, 1.5, size=8)
g = rng.normal(size=(4, 8))
xt, wt = Tensor(x, requires_grad=True), Tensor(weight, requires_grad=True)
layers.rms_norm(xt, wt, eps=EPS).backward(g)
dx, dweight = rms_norm_backward(x, weight, g)
print("dx", np.abs(dx - xt.grad).max(), " dweight", np.abs(dweight - wt.grad).max())
assert np.allclose(dx, xt.grad, rtol=1e-10, atol=1e-12)
assert np.allclose(dweight, wt.grad, rtol=1e-10, atol=1e-12)"""),
    ("md", """## Submitted to the sandbox's exercise

`Sandbox()` talks to `$GLASSLLM_URL` (in a JupyterHub with the glassllm tile, the
sandbox beside your notebook). The exercise runs your function on your own numbers and on
edge cases — a row of zeros, a large row — and grades each element to 6 digits."""),
    ("code", """sb = Sandbox()
exercise = sb.exercise("rmsnorm-backward", student="ada")
exercise"""),
    ("code", """verdict = sb.submit("rmsnorm-backward", function=rms_norm_backward, student="ada")
assert verdict.passed, verdict
verdict"""),
    ("md", """A mistake is marked element by element, and named when it has a known pattern: lose a
minus sign in `dweight` and the verdict says so."""),
    ("code", """def lost_a_minus(x, weight, g):
    dx, dweight = rms_norm_backward(x, weight, g)
    return dx, -dweight

wrong = sb.submit("rmsnorm-backward", function=lost_a_minus, student="ada")
assert not wrong.passed
assert "sign" in wrong.answers["generated/dweight"]["pattern"]["says"]
wrong"""),
]


def write(name: str, cells: list[tuple[str, str]]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md"
                else nbformat.v4.new_code_cell(src) for kind, src in cells]
    for i, cell in enumerate(nb.cells):       # stable ids: a rewrite changes no line
        cell["id"] = f"{name[:2]}-{i:02d}"
    OUT.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, OUT / f"{name}.ipynb")


def main() -> None:
    write("01-neuron-to-cross-entropy", NEURON)
    write("02-attention-gradient-by-hand", ATTENTION)
    write("03-rmsnorm-vjp", RMSNORM)


if __name__ == "__main__":
    main()
