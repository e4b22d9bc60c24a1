"""Lessons: prepared cases with two or three sentences on what to notice.

Each lesson is a ready ``POST /api/v1/eval`` request and its notes. Every note is a sentence
for the student *and* the claims that make it true, so ``tests/library/test_lessons.py`` checks each
sentence against the numbers the lesson produces — the page shows the same text.

A claim reads one array of the result: ``"value"``, ``"grads.<variable>"``, or a node by its
source text, ``"node:<text>.value"`` / ``"node:<text>.grad"``; ``"at"`` picks an element.
Kinds:
  ``approx``   the array (or element) equals ``expect`` within 1e-9 (relative and absolute)
  ``zero``     every element is exactly 0 (where ``where`` is true, when given)
  ``nonzero``  no element is 0 (where ``where`` is true, when given)
  ``sum``      the sum along ``axis`` equals ``expect`` (within 1e-9)
  ``dot``      the dot product with the array at ``with`` equals ``expect`` (within 1e-9)
  ``norm``     the Euclidean norm equals ``expect`` (within 1e-9)
  ``none``     there is no array: a constant gets no gradient
Served by ``GET /api/v1/lessons``.
"""

from __future__ import annotations

import math

__all__ = ["LESSONS"]

_CAUSAL = [[False, True, True], [False, False, True], [False, False, False]]
_SCORES = "q @ k.T * 0.5"
_COS, _SIN = math.cos(math.pi / 3), math.sin(math.pi / 3)

LESSONS: list[dict] = [
    {"id": "neuron", "title": "micrograd's neuron: tanh(x1·w1 + x2·w2 + b)",
     "request": {"expression": "tanh(x1*w1 + x2*w2 + b)",
                 "variables": {"x1": {"value": 2.0}, "w1": {"value": -3.0},
                               "x2": {"value": 0.0}, "w2": {"value": 1.0},
                               "b": {"value": 6.881373587019543}}},
     "notes": [
         {"text": "tanh's local slope is 1 − out² = 1 − 0.7071² = 0.5, so every gradient"
                  " below it is halved: the bias gets 0.5.",
          "claims": [{"path": "value", "kind": "approx", "expect": math.sqrt(0.5)},
                     {"path": "grads.b", "kind": "approx", "expect": 0.5}]},
         {"text": "A product hands each factor the other factor times g: x1 gets w1 · 0.5 ="
                  " −1.5 and w1 gets x1 · 0.5 = 1.",
          "claims": [{"path": "grads.x1", "kind": "approx", "expect": -1.5},
                     {"path": "grads.w1", "kind": "approx", "expect": 1.0}]},
         {"text": "w2 gets no gradient at all, because its input x2 is 0.",
          "claims": [{"path": "grads.w2", "kind": "zero"}]},
     ]},
    {"id": "classifier", "title": "a linear layer and cross-entropy on three classes",
     "request": {"expression": "cross_entropy(x @ w, t)",
                 "variables": {"x": {"value": [[1.0, 2.0], [0.5, -1.0]]},
                               "w": {"value": [[0.2, -0.1, 0.0], [0.1, 0.3, -0.2]]},
                               "t": {"value": [0, 2]}}},
     "notes": [
         {"text": "The logits' gradient is (softmax − one-hot) / N: negative only at each"
                  " row's target class, and every row sums to 0.",
          "claims": [{"path": "node:x @ w.grad", "kind": "sum", "axis": 1, "expect": [0.0, 0.0]},
                     {"path": "node:x @ w.grad", "kind": "approx", "at": [0, 0],
                      "expect": -0.30426697081278276},
                     {"path": "node:x @ w.grad", "kind": "approx", "at": [1, 2],
                      "expect": -0.2912910395373469}]},
         {"text": "The weights' gradient is xᵀ @ (that), so each of its rows sums to 0 too:"
                  " raising one class's logit lowers the others'.",
          "claims": [{"path": "grads.w", "kind": "sum", "axis": 1, "expect": [0.0, 0.0]}]},
         {"text": "The targets are class ids, not a tensor: they get no gradient (L0.6).",
          "claims": [{"path": "node:t.grad", "kind": "none"}]},
     ]},
    {"id": "attention-head", "title": "one causal attention head",
     "request": {"expression": f"(softmax(masked_fill({_SCORES}, mask, -inf)) @ v).sum()",
                 "variables": {"q": {"value": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]},
                               "k": {"value": [[1.0, 0.5], [0.0, 1.0], [-1.0, 1.0]]},
                               "v": {"value": [[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]]},
                               "mask": {"value": _CAUSAL}}},
     "notes": [
         {"text": "The masked weights are exactly 0 and get no gradient: a position never"
                  " learns from the future.",
          "claims": [{"path": f"node:softmax(masked_fill({_SCORES}, mask, -inf)).value",
                      "kind": "zero", "where": _CAUSAL},
                     {"path": f"node:{_SCORES}.grad", "kind": "zero", "where": _CAUSAL}]},
         {"text": "Every row of the weights sums to 1, so the first query, which sees only"
                  " itself, has weight exactly 1 whatever its score: q's first row gets no"
                  " gradient.",
          "claims": [{"path": f"node:softmax(masked_fill({_SCORES}, mask, -inf)).value",
                      "kind": "sum", "axis": 1, "expect": [1.0, 1.0, 1.0]},
                     {"path": "grads.q", "kind": "zero", "where": [[True, True], [False, False],
                                                                    [False, False]]}]},
         {"text": "v's gradient is the column sums of the weights: the first value row is"
                  " read by all three queries and gets the most.",
          "claims": [{"path": "grads.v", "kind": "approx", "at": [0, 0],
                      "expect": 1.0 + 0.4378234991142019 + 0.4442139791616654},
                     {"path": "grads.v", "kind": "approx", "at": [2, 1],
                      "expect": 0.2098318260159648}]},
     ]},
    {"id": "rms-norm", "title": "RMSNorm of a 3-4-5 row",
     "request": {"expression": "rms_norm(x, weight, 0.0)",
                 "variables": {"x": {"value": [[3.0, 4.0]]}, "weight": {"value": [1.0, 2.0]}}},
     "notes": [
         {"text": "The row is divided by its root mean square, √((9 + 16) / 2) = 3.5355, so"
                  " the weight's gradient is x / rms = (0.8485, 1.1314).",
          "claims": [{"path": "grads.weight", "kind": "approx",
                      "expect": [3 / math.sqrt(12.5), 4 / math.sqrt(12.5)]}]},
         {"text": "Scaling x does not change the output, so x's gradient is orthogonal to x"
                  " itself: x · ∂x = 0.",
          "claims": [{"path": "grads.x", "kind": "dot", "with": "node:x.value", "expect": 0.0}]},
     ]},
    {"id": "rope", "title": "RoPE rotating a query by 60°",
     "request": {"expression": "rope(q, cos, sin).sum()",
                 "variables": {"q": {"value": [[0.6, 0.8]]}, "cos": {"value": [[_COS]]},
                               "sin": {"value": [[_SIN]]}}},
     "notes": [
         {"text": "A rotation keeps the length: the rotated query still has norm 1.",
          "claims": [{"path": "node:rope(q, cos, sin).value", "kind": "norm", "expect": 1.0}]},
         {"text": "The gradient is g rotated back by −60°: (cos + sin, cos − sin) ="
                  " (1.366, −0.366) for g = (1, 1).",
          "claims": [{"path": "grads.q", "kind": "approx",
                      "expect": [[_COS + _SIN, _COS - _SIN]]}]},
         {"text": "The angle tables are constants: cos and sin get no gradient (L0.6).",
          "claims": [{"path": "node:cos.grad", "kind": "none"}]},
     ]},
    {"id": "swiglu", "title": "SwiGLU, written out: (silu(x @ w1) * (x @ w3)) @ w2",
     "request": {"expression": "((silu(x @ w1) * (x @ w3)) @ w2).sum()",
                 "variables": {"x": {"value": [[1.0, 0.0]]},
                               "w1": {"value": [[1.0, 0.0], [0.0, 1.0]]},
                               "w3": {"value": [[0.0, 1.0], [1.0, 0.0]]},
                               "w2": {"value": [[1.0, 2.0], [3.0, 4.0]]}}},
     "notes": [
         {"text": "The gate a = x @ w1 gets no gradient where the up projection b = x @ w3"
                  " is 0: ∂a = (g @ w2ᵀ) ⊙ b ⊙ silu′(a).",
          "claims": [{"path": "node:x @ w3.value", "kind": "zero", "where": [[True, False]]},
                     {"path": "node:x @ w1.grad", "kind": "zero", "where": [[True, False]]}]},
         {"text": "The up projection gets no gradient where silu(a) is 0, and silu(0) = 0:"
                  " the gate closes both ways.",
          "claims": [{"path": "node:silu(x @ w1).value", "kind": "zero",
                      "where": [[False, True]]},
                     {"path": "node:x @ w3.grad", "kind": "zero", "where": [[False, True]]}]},
         {"text": "Both products are 0 here, so the output is 0 and w2 gets no gradient,"
                  " while w1 and w3 still do.",
          "claims": [{"path": "value", "kind": "approx", "expect": 0.0},
                     {"path": "grads.w2", "kind": "zero"},
                     {"path": "grads.w1", "kind": "nonzero", "where": [[False, True],
                                                                       [False, False]]}]},
     ]},
]
