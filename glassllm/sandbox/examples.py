"""Every example of SPEC Part L as a ready ``POST /api/v1/eval`` request.

Used by ``GET /api/v1/examples``, the page's gallery and the tests. Inputs and expected
numbers come from the registry's examples (`glassllm.sandbox.registry`), so no number is written
twice; only the masked softmax, a composition of two ops, states its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from glassllm.sandbox import registry

__all__ = ["EXAMPLES", "example_runs"]


def _from_registry(op_name: str, clause: str, expression: str, rename: dict[str, str],
                   summed: bool = False) -> dict:
    """The registry example of `op_name` for `clause`, as an expression request.

    `rename` maps the registry's input names to the expression's variable names; inputs
    not renamed are literals written in `expression`. `summed`: the expression ends in
    `.sum()`, so the expected value is the sum of the op's value (the grads are unchanged:
    the default grad_output, ones, is the gradient of the sum, H2).
    """
    op = registry.OPS[op_name]
    example = next(e for e in op.examples if e.clause == clause and e.expected)
    variables = {new: {"value": example.inputs[old]} for old, new in rename.items()}
    expected: dict[str, Any] = {}
    if "value" in example.expected:
        value = example.expected["value"]
        expected["value"] = float(np.sum(value)) if summed else value
    if "grads" in example.expected:
        expected["grads"] = {rename[k]: v for k, v in example.expected["grads"].items()}
    return {"title": example.title, "clause": clause,
            "request": {"expression": expression, "variables": variables}, "expected": expected}


_MASK = registry.OPS["masked_fill"].examples[0].inputs
EXAMPLES: list[dict] = [
    _from_registry("embedding", "L3.2", "embedding(weight, ids).sum()",
                   {"weight": "weight", "ids": "ids"}, summed=True),
    {"title": "causal mask, then softmax: masked weights are 0, rows sum to 1", "clause": "L3.5",
     "request": {"expression": "softmax(masked_fill(scores, mask, -inf))",
                 "variables": {"scores": {"value": _MASK["a"], "requires_grad": True},
                               "mask": {"value": _MASK["mask"]}}},
     "expected": {"value": [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]],
                  "grads": {"scores": [[0.0] * 3] * 3}}},
    _from_registry("softmax_np", "L4.3", "softmax_np(x)", {"x": "x"}),
    _from_registry("log_softmax", "L4.1", "log_softmax(x)", {"a": "x"}),
    _from_registry("sigmoid", "L4.2", "sigmoid(x)", {"a": "x"}),
    _from_registry("silu", "L4.2", "silu(x).sum()", {"a": "x"}, summed=True),
    _from_registry("cross_entropy", "L5.1", "cross_entropy(logits, targets)",
                   {"logits": "logits", "targets": "targets"}),
    _from_registry("cross_entropy_grad", "L5.2", "cross_entropy_grad(logits, targets)",
                   {"logits": "logits", "targets": "targets"}),
    _from_registry("rope", "L6.1", "rope(x, cos, sin)", {"x": "x", "cos": "cos", "sin": "sin"}),
    _from_registry("repeat_kv", "L6.3", "repeat_kv(heads, 2)", {"x": "heads"}),
]


def _complete(example: dict) -> dict:
    """Fill what ``expected`` leaves out (value, or a variable's gradient) with the
    library's own answer; a test checks it against central differences."""
    from glassllm.sandbox.expr import evaluate  # expr imports registry, as we do
    r = evaluate(**example["request"])
    stated = example["expected"]
    example["expected"] = {"value": stated.get("value", r["value"]),
                           "grads": {**r["grads"], **stated.get("grads", {})}}
    return example


for _i, _e in enumerate(EXAMPLES):
    _e["id"] = f"{_e['clause']}-{_i}"
    _complete(_e)


def example_runs() -> list[frozenset[str]]:
    """The ops each example runs (`glassllm.sandbox.expr.computation.runs`), in order: what
    a course's hiding reads to leave out an example's expected numbers."""
    from glassllm.sandbox.expr import computation, prepare
    return [frozenset(computation.runs(prepare(**e["request"]))) for e in EXAMPLES]
