"""What a computation runs (`glassllm.sandbox.registry.closure`, and for an expression
`glassllm.sandbox.expr.computation`): the one place a course's hiding asks, held against
what the engine does. A recorder on every node the engine makes (`Tensor._make`, the one
constructor of an op's result, fused nodes included) runs each registry op on its
examples and on other shapes, and expressions with every report switched on: nothing is
recorded outside the closure. Each op an op declares it stands for computes that op's
numbers; each fused node stands for exactly the ops of its composed lines."""

from __future__ import annotations

import numpy as np
import pytest

from glassllm import Tensor, autograd, layers
from glassllm.course.lesson_requests import LESSONS
from glassllm.course.zoo import mystery
from glassllm.sandbox import expr, registry
from glassllm.sandbox.examples import EXAMPLES
from glassllm.sandbox.expr.computation import fingerprint, opened, runs
from glassllm.sandbox.limits import Limits
from glassllm.sandbox.registry.closure import closure, runners, traced


@pytest.fixture
def recorded(monkeypatch):
    """Every op name the engine makes a node of while the test runs."""
    closure("add")                  # the closures are traced once, before any recording
    names: set[str] = set()
    make = Tensor._make

    def recording(data, parents, op, backward):
        names.add(op)
        return make(data, parents, op, backward)

    monkeypatch.setattr(Tensor, "_make", staticmethod(recording))
    return names


RNG = np.random.default_rng(7)
_COS, _SIN = (t.tolist() for t in layers.rope_angles(3, 2))
# other shapes than the registry's examples: grouped heads, a batch of two, wider rows
OTHER = {
    "attention": {"x": RNG.normal(size=(2, 3, 4)).tolist(),
                  **{w: RNG.normal(size=s).tolist() for w, s in (
                      ("wq", (4, 4)), ("wk", (4, 2)), ("wv", (4, 2)), ("wo", (4, 4)))},
                  "n_heads": 2, "n_kv_heads": 1, "cos": _COS, "sin": _SIN},
    "rms_norm": {"x": RNG.normal(size=(2, 3, 5)).tolist(), "weight": [1.0] * 5},
    "swiglu": {"x": RNG.normal(size=(3, 4)).tolist(), "w1": RNG.normal(size=(4, 6)).tolist(),
               "w2": RNG.normal(size=(6, 4)).tolist(), "w3": RNG.normal(size=(4, 6)).tolist()},
    "max": {"a": [[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], "axis": 1},
    "pow": {"a": [0.0, 2.0], "exponent": 0},
}


def _op_cases():
    for op in registry.OPS.values():
        for k, example in enumerate(op.examples):
            yield pytest.param(op.name, example.inputs, id=f"{op.name}-{k}")
        if op.name in OTHER:
            yield pytest.param(op.name, OTHER[op.name], id=f"{op.name}-other")


@pytest.mark.parametrize(("name", "inputs"), list(_op_cases()))
def test_an_op_runs_nothing_outside_its_closure(recorded, name, inputs):
    """The service's own path (prepare, run: forward and backward) records no op that the
    op's closure lacks."""
    op = registry.OPS[name]
    prepared = registry.prepare(op, inputs, None, None, Limits())
    registry.run(prepared)
    if op.output == "tensor":
        assert recorded, "the recorder saw nothing"
    assert recorded <= closure(name), sorted(recorded - closure(name))


EXPRESSIONS = [
    *[e["request"] for e in EXAMPLES], *[lesson["request"] for lesson in LESSONS],
    *[{"expression": m.expression, "variables": m.variables} for m in mystery.load_dir()],
    {"expression": "transformer_block(x, an, wq, wk, wv, wo, fn, w1, w2, w3, 2, 1, cos, sin)"
                   ".sum()",
     "variables": {"x": RNG.normal(size=(1, 3, 4)).tolist(), "an": [1.0] * 4,
                   "fn": [0.5] * 4, **{w: RNG.normal(size=s).tolist() for w, s in (
                       ("wq", (4, 4)), ("wk", (4, 2)), ("wv", (4, 2)), ("wo", (4, 4)),
                       ("w1", (4, 3)), ("w2", (3, 4)), ("w3", (4, 3)))},
                   "cos": _COS, "sin": _SIN}},
    {"expression": "(linear(x, w) * cross_entropy(linear(x, w), t)).sum()",
     "variables": {"x": [[1.0, 2.0], [0.5, -1.0]], "w": [[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]],
                   "t": [2, 0]}},
]


@pytest.mark.parametrize("request_", EXPRESSIONS, ids=lambda r: r["expression"][:40])
def test_an_expression_runs_nothing_outside_what_it_says_it_runs(recorded, request_):
    """eval with expand, paths, dead and the Taylor check switched on: every node the
    engine makes is of an op `runs` names (an opened composite's inner ops included)."""
    prepared = expr.prepare(**{**request_, "expand": True, "paths": True, "dead": True,
                               "check": {"modes": ["taylor"]}})
    expr.run(prepared)
    said = set(runs(prepared))
    assert recorded <= said, sorted(recorded - said)
    without = set(runs(expr.prepare(**{**request_, "paths": False})))
    assert without <= said


def test_linear_runs_matmul_and_the_block_runs_its_layers():
    assert closure("linear") == {"linear", "matmul"}
    assert {"rms_norm", "attention", "swiglu", "linear", "matmul", "softmax", "silu",
            "sigmoid", "rope", "repeat_kv", "masked_fill"} <= closure("transformer_block")
    assert runners("matmul") == {"matmul", "linear", "swiglu", "attention",
                                 "transformer_block"}
    assert runners("rms_norm") == {"rms_norm", "transformer_block"}
    assert closure("add") == {"add"} and closure("detach") == {"detach"}
    # with expand, cross_entropy opens as -tsum(log_softmax(logits) * onehot) / N
    assert {"log_softmax", "neg", "mul", "tsum", "div"} <= opened("cross_entropy")
    case = {"expression": "cross_entropy(z, t)", "variables": {"z": [[0.0, 1.0]], "t": [1]}}
    assert "neg" in runs(expr.prepare(**case, expand=True))
    assert "neg" not in runs(expr.prepare(**case))
    assert runs(expr.prepare("linear(x, w).sum()", {"x": [[1.0]], "w": [[2.0]]}))[
        "matmul"] == "linear"


@pytest.mark.parametrize("layer", ["rms_norm", "attention", "swiglu"])
def test_a_fused_node_stands_for_the_ops_of_its_composed_lines(layer):
    """``fused=True`` makes one node named after the layer; what it stands for (the
    layer's closure) is exactly what the composed lines run."""
    inputs = registry.coerce_inputs(registry.OPS[layer], OTHER[layer])
    op = registry.OPS[layer]
    args = [Tensor(inputs[i.name], requires_grad=True) if i.differentiable else inputs[i.name]
            for i in op.inputs]

    def run(fused: bool):
        out = getattr(layers, layer)(*args, fused=fused)
        out.backward(np.ones(out.shape))
        return out

    out, fused_ops = traced(lambda: run(True))
    assert out.op == layer and all(p.op == "" for p in out._parents)    # one node
    _, composed_ops = traced(lambda: run(False))
    stands_for = set().union(*map(closure, fused_ops))
    assert stands_for == set().union(*map(closure, composed_ops)) == closure(layer)


def test_each_declared_stand_in_computes_the_other_op_s_numbers():
    """`Op.stands_for`: each op computes the numbers of the ops it declares, so running
    it is running them."""
    declared = {op.name: set(op.stands_for) for op in registry.OPS.values() if op.stands_for}
    assert declared == {"softmax": {"softmax_np"}, "softmax_np": {"softmax"},
                        "log_softmax": {"softmax"}, "silu": {"sigmoid"},
                        "cross_entropy": {"log_softmax", "cross_entropy_grad"},
                        "cross_entropy_grad": {"cross_entropy", "softmax"}}
    z = np.array([[0.5, -1.0, 2.0], [3.0, 0.0, -0.5]])
    t = np.array([2, 0])
    p = autograd.softmax(Tensor(z)).data
    assert np.array_equal(p, autograd.softmax_np(z))                    # bit for bit
    g = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])
    a = Tensor(z, requires_grad=True)
    autograd.log_softmax(a).backward(g)
    assert np.allclose(a.grad, g - p * g.sum(axis=-1, keepdims=True), rtol=1e-13)
    s = autograd.sigmoid(Tensor(z)).data
    assert np.allclose(autograd.silu(Tensor(z)).data, z * s, rtol=1e-13)
    logits = Tensor(z, requires_grad=True)
    loss = autograd.cross_entropy(logits, t)
    loss.backward()
    log_p = autograd.log_softmax(Tensor(z)).data
    assert np.isclose(loss.item(), -log_p[[0, 1], t].mean(), rtol=1e-13)
    closed = autograd.cross_entropy_grad(z, t)
    assert np.allclose(logits.grad, closed, rtol=1e-13, atol=1e-16)
    assert np.allclose(closed, (p - np.eye(3)[t]) / 2, rtol=1e-13, atol=1e-16)


BASE = {"expression": "rms_norm(x, weight, 0.0)",
        "variables": {"x": {"value": [[3.0, 4.0]]}, "weight": {"value": [1.0, 2.0]}}}


def _print(request: dict) -> bytes:
    return fingerprint(expr.prepare(request["expression"], request.get("variables"),
                                    request.get("grad_output")))


def test_the_fingerprint_is_what_is_computed_on_which_numbers():
    """The same numbers through the same graph: one fingerprint, however the request is
    spelled; a changed number, name, variable, order or seed: another."""
    same = [
        {**BASE, "expression": "rms_norm( x,weight , 0.0 )"},
        {**BASE, "expression": "rms_norm(x, weight, 0.)"},
        {**BASE, "expression": "rms_norm(x, weight, eps=0.0)"},        # the same call
        {**BASE, "variables": {"x": [[3.0, 4.0]], "weight": [1, 2]}},
        {**BASE, "variables": {"x": {"value": [[3.0, 4.0]], "requires_grad": True},
                               "weight": {"value": [1.0, 2.0]}}},
        {**BASE, "variables": {**BASE["variables"], "x": {
            "dtype": "float64", "shape": [1, 2], "base64": "AAAAAAAACEAAAAAAAAAQQA=="}}},
    ]
    for request in same:
        assert _print(request) == _print(BASE), request
    other = [
        {**BASE, "variables": {**BASE["variables"], "x": {"value": [[3.0, 4.000001]]}}},
        {**BASE, "variables": {**BASE["variables"], "x": {"value": [[3.0, -0.0 + 4.0]],
                                                          "requires_grad": False}}},
        {**BASE, "variables": {**BASE["variables"], "spare": {"value": [1.0]}}},
        {**BASE, "variables": {"weight": BASE["variables"]["weight"],
                               "x": BASE["variables"]["x"]}},            # reordered keys
        {**BASE, "variables": {"x": BASE["variables"]["weight"],
                               "weight": BASE["variables"]["x"]},
         "expression": "rms_norm(weight, x, 0.0)"},                      # values swapped
        {**BASE, "grad_output": [[1.0, 1.0]]},                           # ones, but given
        {**BASE, "grad_output": [[1.0, -1.0]]},
        {**BASE, "expression": "rms_norm(x, weight, 1e-6)"},
        {**BASE, "expression": "rms_norm(x, weight, 0.0) * 1.0"},
        {"expression": "rms_norm(y, weight, 0.0)",
         "variables": {"y": BASE["variables"]["x"], "weight": BASE["variables"]["weight"]}},
    ]
    prints = [_print(r) for r in other]
    assert _print(BASE) not in prints and len(set(prints)) == len(prints)
    zero = {"expression": "x * 2.0", "variables": {"x": [0.0]}}
    assert _print(zero) != _print({**zero, "variables": {"x": [-0.0]}})   # every bit
