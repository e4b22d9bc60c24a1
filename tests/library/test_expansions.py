"""Composite ops opened up: the composition of primitive ops that
``evaluate(..., expand=True)`` shows inside a node of cross_entropy, attention, rms_norm,
swiglu or transformer_block gives the op's value and gradients, for a random
incoming gradient, and every inner node carries a value and (where it depends on a
differentiable input) a gradient."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from glassllm import Tensor, layers
from glassllm.sandbox import registry as R
from glassllm.sandbox.expr import evaluate
from glassllm.sandbox.expr.expand import COMPOSITIONS

rng = np.random.default_rng(14)


def arr(*shape):
    return rng.normal(size=shape)


COS4, SIN4 = layers.rope_angles(3, 2)   # dk = 2 for the (d=4, H=2) cases
CASES = {
    "rms_norm": ("rms_norm(x, weight, 1e-6)", {"x": arr(2, 3, 4), "weight": arr(4)}),
    "swiglu": ("swiglu(x, w1, w2, w3)", {"x": arr(2, 3), "w1": arr(3, 5), "w2": arr(5, 3),
                                          "w3": arr(3, 5)}),
    "cross_entropy": ("cross_entropy(logits, t)", {"logits": arr(4, 3) * 3,
                                                   "t": np.array([0, 2, 1, -1])}),
    "attention": ("attention(x, wq, wk, wv, wo, 2, 1, cos, sin)",
                  {"x": arr(1, 3, 4), "wq": arr(4, 4), "wk": arr(4, 2), "wv": arr(4, 2),
                   "wo": arr(4, 4), "cos": COS4, "sin": SIN4}),
    "transformer_block": (
        "transformer_block(x, attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3, 2, 1, cos, sin)",
        {"x": arr(1, 3, 4), "attn_norm": arr(4), "wq": arr(4, 4), "wk": arr(4, 2),
         "wv": arr(4, 2), "wo": arr(4, 4), "ffn_norm": arr(4), "w1": arr(4, 6),
         "w2": arr(6, 4), "w3": arr(4, 6), "cos": COS4, "sin": SIN4}),
}
CONSTANTS = {"t", "cos", "sin"}


def test_every_composite_layer_op_has_a_composition():
    assert set(COMPOSITIONS) == set(CASES)
    assert set(COMPOSITIONS) <= set(R.OPS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_composition_gives_the_ops_numbers(name):
    expression, values = CASES[name]
    variables = {k: {"value": v, "requires_grad": k not in CONSTANTS} for k, v in values.items()}
    plain = evaluate(expression, variables)
    seed = rng.normal(size=np.shape(plain["value"]))
    whole = evaluate(expression, variables, grad_output=seed, expand=True)
    node = whole["nodes"][whole["output"]]
    inner = node["expansion"]
    assert node["op"] == name and inner["expression"] != expression
    np.testing.assert_allclose(inner["value"], whole["value"], rtol=1e-10, atol=1e-12)
    # the composition's inputs are the node's inputs: their gradients are the op's VJP
    for k in values:
        if k in CONSTANTS:
            assert k not in inner["grads"]
            continue
        np.testing.assert_allclose(inner["grads"][k], whole["grads"][k], rtol=1e-9, atol=1e-12)
    primitive_ops = {n["op"] for n in inner["nodes"]}
    assert len(inner["nodes"]) > 3 and name not in primitive_ops
    for n in inner["nodes"]:
        assert n["value"] is not None
        if n["requires_grad"]:
            assert n["grad"] is not None


def test_expansion_nests_and_is_off_by_default():
    expression, values = CASES["transformer_block"]
    variables = {k: {"value": v, "requires_grad": k not in CONSTANTS} for k, v in values.items()}
    assert "expansion" not in evaluate(expression, variables)["nodes"][-1]
    inner = evaluate(expression, variables, expand=True)["nodes"][-1]["expansion"]
    attention = [n for n in inner["nodes"] if n["op"] == "attention"]
    assert attention and all("expansion" in n for n in attention)
    with pytest.raises(ValueError, match="'expand' must be true or false"):
        evaluate(expression, variables, expand="yes")


def test_the_eval_route_takes_expand():
    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app

    client = TestClient(create_app())
    body = {"expression": "swiglu(x, w1, w2, w3)",
            "variables": {"x": [[1.0, 0.0]], "w1": [[1.0, 0.0], [0.0, 1.0]],
                          "w2": [[1.0, 2.0], [3.0, 4.0]], "w3": [[0.0, 1.0], [1.0, 0.0]]}}
    plain = client.post("/api/v1/eval", json=body).json()
    opened = client.post("/api/v1/eval", json={**body, "expand": True}).json()
    assert "expansion" not in plain["nodes"][-1]
    inner = opened["nodes"][-1]["expansion"]
    assert inner["expression"] == "(silu(x @ w1) * (x @ w3)) @ w2"
    assert inner["value"] == opened["value"] and inner["grads"] == opened["grads"]
    bad = client.post("/api/v1/eval", json={**body, "expand": 1})
    assert bad.status_code == 422 and "expand" in bad.json()["error"]["message"]


def _graph_ops(out) -> Counter:
    """The op of every node the Tensor `out` was computed from (its own graph)."""
    seen, stack, ops = set(), [out], Counter()
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.op:
            ops[t.op] += 1
        stack.extend(t._parents)
    return ops


@pytest.mark.parametrize("name", ["attention", "rms_norm", "swiglu"])
def test_the_composition_is_the_layers_own_lines(name):
    """The expansion runs the ops of the layer's composed lines (glassllm.layers, what the
    op runs), as many of each, and gives their numbers: one definition, written twice
    only because the expression language needs it as text."""
    expression, values = CASES[name]
    variables = {k: {"value": v, "requires_grad": k not in CONSTANTS} for k, v in values.items()}
    seed = rng.normal(size=np.shape(evaluate(expression, variables)["value"]))
    inner = evaluate(expression, variables, grad_output=seed, expand=True)
    inner = inner["nodes"][inner["output"]]["expansion"]
    leaves = {k: v if k in CONSTANTS else Tensor(v, requires_grad=True)
              for k, v in values.items()}
    args = [leaves[k] for k in values]
    if name == "attention":
        args = [*args[:5], 2, 1, *args[5:]]
    out = getattr(layers, name)(*args)
    out.backward(seed)
    expanded_ops = Counter(n["op"] for n in inner["nodes"] if n["op"] not in ("variable",
                                                                              "constant"))
    assert expanded_ops == _graph_ops(out)
    np.testing.assert_array_equal(inner["value"], out.data)
    for k, leaf in leaves.items():
        if k not in CONSTANTS:
            np.testing.assert_allclose(inner["grads"][k], leaf.grad, rtol=1e-15, atol=1e-15)
