"""Composed expressions: POST /api/v1/eval, GET /api/v1/examples, glassllm.sandbox.expr.

Clauses: Part L examples (L3.2, L3.5, L4.1-L4.3, L5.1, L5.2, L6.1, L6.3), L0.5 (the
broadcast ledger), L0.6 (constants get no gradient), H2 (default grad_output), H3 (strict
JSON), H4 (refusals name the position), H5 (bounded before computing).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

import glassllm.sandbox.expr as E
from glassllm import Tensor
from glassllm.autograd import log_softmax, masked_fill, matmul, softmax
from glassllm.sandbox import registry
from glassllm.sandbox.examples import EXAMPLES
from glassllm_service.app import create_app
from glassllm_service.http_errors import status_of
from glassllm_service.settings import Settings

TOKENS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def strict(response) -> dict:
    def reject(name):
        raise ValueError(f"non-strict JSON constant {name}")
    return json.loads(response.text, parse_constant=reject)


def arr(wire) -> np.ndarray:
    def leaf(v):
        return [leaf(x) for x in v] if isinstance(v, list) else TOKENS.get(v, v)
    return np.array(leaf(wire), dtype=np.float64)


def post(client, body, status=200) -> dict:
    r = client.post("/api/v1/eval", json=body)
    assert r.status_code == status, r.text
    return strict(r)


# --------------------------------------------------------------------------------------
# the reference's examples (Part L), over HTTP and offline
# --------------------------------------------------------------------------------------

def test_examples_endpoint_lists_every_part_l_example(client):
    got = strict(client.get("/api/v1/examples"))["examples"]
    assert got == json.loads(json.dumps(EXAMPLES))
    assert {e["clause"] for e in got} == {"L3.2", "L3.5", "L4.1", "L4.2", "L4.3", "L5.1",
                                          "L5.2", "L6.1", "L6.3"}
    assert any(e["request"]["expression"] == "embedding(weight, ids).sum()" for e in got)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["id"] for e in EXAMPLES])
def test_every_example_reproduces_the_reference_numbers(client, example):
    body = post(client, example["request"])
    expected = example["expected"]
    if "value" in expected:
        np.testing.assert_allclose(arr(body["value"]), expected["value"], rtol=1e-12, atol=0)
    for name, grad in expected.get("grads", {}).items():
        np.testing.assert_allclose(arr(body["grads"][name]), grad, rtol=1e-12, atol=1e-15)
    # the library answers exactly what the service answers (floats round-trip, H3)
    assert E.evaluate(**example["request"]) == body


def test_reference_numbers_spelled_out(client):
    """The numbers of Part L, written here once more so a wrong registry example fails."""
    by = {e["request"]["expression"]: post(client, e["request"]) for e in EXAMPLES}
    assert by["embedding(weight, ids).sum()"]["grads"]["weight"][1:3] == [[2.0, 2.0],
                                                                          [1.0, 1.0]]   # L3.2
    p = arr(by["softmax(masked_fill(scores, mask, -inf))"]["value"])                      # L3.5
    mask = np.triu(np.ones((3, 3), dtype=bool), k=1)
    assert (p[mask] == 0.0).all()
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-15)
    ce = by["cross_entropy(logits, targets)"]                                             # L5.1
    assert ce["value"] == pytest.approx(math.log(2), rel=1e-15)
    assert ce["grads"]["logits"] == [[0.5, -0.5]]
    assert by["cross_entropy_grad(logits, targets)"]["value"] == [[0.5, -0.5]]            # L5.2
    assert by["rope(x, cos, sin)"]["value"] == [[-2.0, 1.0, -4.0, 3.0]]                   # L6.1
    kv = by["repeat_kv(heads, 2)"]                                                        # L6.3
    assert arr(kv["value"]).ravel().tolist() == [1, 1, 2, 2]
    assert arr(kv["grads"]["heads"]).ravel().tolist() == [2, 2]
    assert by["softmax_np(x)"]["value"] == [[0.5, 0.5]]                                   # L4.3
    assert by["log_softmax(x)"]["value"] == [[-math.log(2)] * 2]                          # L4.1
    assert by["sigmoid(x)"]["value"] == [0.0, 0.5, 1.0]                                   # L4.2
    assert by["silu(x).sum()"]["grads"]["x"] == [0.5]                                     # L4.2
    assert by["softmax_np(x)"]["grads"] == {}, "ndarray ops have no gradient (L0.2)"


# --------------------------------------------------------------------------------------
# every node's adjoint equals the library's retain_grad; the output's equals grad_output
# --------------------------------------------------------------------------------------

def test_intermediate_adjoints_equal_the_library(client):
    rng = np.random.default_rng(0)
    scores, g = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    mask = np.triu(np.ones((3, 3), dtype=bool), k=1)
    body = post(client, {"expression": "softmax(masked_fill(scores, mask, -inf))",
                         "variables": {"scores": scores.tolist(), "mask": mask.tolist()},
                         "grad_output": g.tolist()})
    s = Tensor(scores, requires_grad=True)
    filled = masked_fill(s, mask, -np.inf).retain_grad()
    p = softmax(filled).retain_grad()
    p.backward(g)
    nodes = {n["op"]: n for n in body["nodes"]}
    np.testing.assert_array_equal(arr(nodes["masked_fill"]["grad"]), filled.grad)
    np.testing.assert_array_equal(arr(nodes["masked_fill"]["value"]), filled.data)
    np.testing.assert_array_equal(arr(nodes["softmax"]["grad"]), g)        # output adjoint
    np.testing.assert_array_equal(arr(body["grads"]["scores"]), s.grad)
    variables = {n["name"]: n for n in body["nodes"] if n["op"] == "variable"}
    assert variables["scores"]["grad"] == body["grads"]["scores"]
    assert variables["mask"]["grad"] is None and variables["mask"]["kind"] == "bool_mask"
    assert nodes["masked_fill"]["inputs"] == [variables["scores"]["id"], variables["mask"]["id"]]


def test_adjoints_of_a_longer_composition():
    rng = np.random.default_rng(1)
    x, w, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(4,))
    g = rng.normal(size=(2, 4))
    r = E.evaluate("log_softmax(x @ w + b) * 2", {"x": x, "w": w, "b": b}, grad_output=g)
    tx, tw, tb = (Tensor(v, requires_grad=True) for v in (x, w, b))
    xw = matmul(tx, tw).retain_grad()
    z = (xw + tb).retain_grad()
    ls = log_softmax(z).retain_grad()
    (ls * 2).backward(g)
    got = {n["text"]: n for n in r["nodes"]}
    for text, t in [("x @ w", xw), ("x @ w + b", z), ("log_softmax(x @ w + b)", ls)]:
        np.testing.assert_allclose(arr(got[text]["grad"]), t.grad, rtol=1e-13)
        assert got[text]["shape"] == list(t.shape)
    for name, t in [("x", tx), ("w", tw), ("b", tb)]:
        np.testing.assert_allclose(arr(r["grads"][name]), t.grad, rtol=1e-13)
    assert arr(r["nodes"][r["output"]]["grad"]).tolist() == g.tolist()
    assert r["output"] == len(r["nodes"]) - 1
    spans = {n["text"]: n["span"] for n in r["nodes"]}
    assert spans["x @ w + b"] == [12, 21]


def test_default_grad_output_is_ones_and_scalar_value_is_a_number():
    r = E.evaluate("(x * x).sum()", {"x": [1.0, 2.0]})
    assert r["value"] == 5.0 and r["shape"] == []
    assert r["grads"]["x"] == [2.0, 4.0]
    r = E.evaluate("x * 3", {"x": [1.0, 2.0]})
    assert r["nodes"][r["output"]]["grad"] == [1.0, 1.0]                      # H2


# --------------------------------------------------------------------------------------
# the broadcast ledger (L0.5)
# --------------------------------------------------------------------------------------

def test_broadcast_ledger_of_x_plus_b(client):
    body = post(client, {"expression": "x + b", "variables": {
        "x": np.ones((2, 3)).tolist(), "b": [1.0, 2.0, 3.0]}})
    add = body["nodes"][body["output"]]
    ids = {n["name"]: n["id"] for n in body["nodes"] if n["op"] == "variable"}
    assert add["ledger"] == [{"input": ids["x"], "summed_axes": []},
                             {"input": ids["b"], "summed_axes": [0]}]
    assert body["grads"]["b"] == [2.0, 2.0, 2.0]


def test_broadcast_ledger_of_batched_matmul_and_keepdims_shapes():
    r = E.evaluate("a @ w + c", {"a": np.ones((2, 3, 4)), "w": np.ones((4, 5)),
                                 "c": np.ones((3, 1))})
    mm = next(n for n in r["nodes"] if n["op"] == "matmul")
    add = next(n for n in r["nodes"] if n["op"] == "add")
    assert [e["summed_axes"] for e in mm["ledger"]] == [[], [0]]
    assert [e["summed_axes"] for e in add["ledger"]] == [[], [0, 2]]
    assert r["grads"]["c"] == [[10.0], [10.0], [10.0]]


# --------------------------------------------------------------------------------------
# check: gradcheck agrees for every registry op's example
# --------------------------------------------------------------------------------------

def _index_source(index) -> str:
    items = index if isinstance(index, tuple) else (index,)
    out = []
    for i in items:
        if isinstance(i, slice):
            out.append(":".join("" if v is None else str(v) for v in (i.start, i.stop, i.step)))
        elif i is None or i is Ellipsis:
            out.append("None" if i is None else "...")
        elif isinstance(i, np.ndarray):
            out.append(str(i.tolist()))
        else:
            out.append(str(i))
    return ", ".join(out)


def _as_expression(op, example) -> tuple[str, dict]:
    args = registry.coerce_inputs(op, example.inputs)
    variables, parts = {}, []
    for spec in op.inputs:
        if spec.name not in example.inputs:
            continue
        if spec.kind in ("tensor", "array", "table", "int_array", "bool_mask", "number", "int"):
            variables[spec.name] = {"value": example.inputs[spec.name]}
            parts.append(f"{spec.name}={spec.name}")
        elif spec.kind != "index":
            value = args[spec.name]
            parts.append(f"{spec.name}={tuple(value) if isinstance(value, list) else value!r}")
    if op.name == "getitem":
        return f"a[{_index_source(args['index'])}]", variables
    return f"{op.name}({', '.join(parts)})", variables


OP_EXAMPLES = [(op, ex) for op in registry.OPS.values() for ex in op.examples]


@pytest.mark.parametrize("op,example", OP_EXAMPLES,
                         ids=[f"{o.name}:{e.title}" for o, e in OP_EXAMPLES])
def test_check_agrees_for_every_registry_example(client, op, example):
    expression, variables = _as_expression(op, example)
    body = post(client, {"expression": expression, "variables": variables, "check": True})
    direct = registry.run(op, registry.coerce_inputs(op, example.inputs))
    np.testing.assert_allclose(arr(body["value"]), direct.value, rtol=1e-12)
    assert set(body["check"]) == set(direct.grads)
    for name, c in body["check"].items():
        assert c["passed"], (name, c)
        np.testing.assert_allclose(arr(c["analytic"]), direct.grads[name], rtol=1e-12)
        np.testing.assert_allclose(arr(c["numeric"]), arr(c["analytic"]), atol=1e-5, rtol=1e-4)
        assert c["max_abs_err"] < 1e-5


def test_check_is_refused_above_its_element_limit(client):
    body = post(client, {"expression": "x.sum()", "variables": {"x": [1.0] * 3000},
                         "check": True}, status=413)
    assert body["error"]["input"] == "check"
    assert post(client, {"expression": "x.sum()", "variables": {"x": [1.0] * 3000}})["value"] \
        == 3000.0


def test_check_work_is_bounded_by_the_multiply_add_limit(client, never_runs):
    """H5 (QA pass 3, defect 3): x of 2000 elements under a 3e8 multiply-add matmul took
    29 s with check (4000 forward passes) and 0.6 s without; refused before computing."""
    variables = {"x": np.full(2000, 0.5).tolist(),            # ones and halves: a short body
                 "A": {"value": np.ones((1000, 500)).tolist(), "requires_grad": False},
                 "B": {"value": np.ones((500, 600)).tolist(), "requires_grad": False}}
    expression = "((x.sum()*A)@B).sum()"
    err = post(client, {"expression": expression, "variables": variables, "check": True},
               status=413)["error"]                           # never_runs: no compute
    assert err["input"] == "check" and err["code"] == "too_large"
    assert err["message"].startswith("check would finite-difference 2000 elements with 2"
                                     " forward passes each, ")
    assert "the limit is 1000000000 (SPEC H5)" in err["message"]
    assert never_runs == []                                   # refused before any forward
    assert post(client, {"expression": expression, "variables": variables})["shape"] == []
    assert never_runs == [1]                                  # without check: one forward
    never_runs.clear()


def test_check_work_counts_multiply_adds_elements_and_nodes():
    """The bound's arithmetic: x (2, 3) and A (3, 4) both checked, 18 elements; one pass is
    x 6 + A 12 + x@A 8 + its sum 1 elements, 4 nodes × NODE_COST, 24 forward multiply-adds
    and the ops' planned arrays (the product's out 8, gradients 6 and 12; the sum's
    gradient spread over its 8 inputs): 2133."""
    variables = {"x": np.ones((2, 3)).tolist(), "A": np.ones((3, 4)).tolist()}
    assert E.NODE_COST == 512
    total = 2 * 18 * (6 + 12 + 8 + 1 + 4 * 512 + 24 + 26 + 8)
    assert total == 76788
    with pytest.raises(E.ExprError) as err:
        E.evaluate("(x @ A).sum()", variables, check=True,
                   limits=E.Limits(max_matmul_madds=total - 1))
    assert status_of(err.value) == 413 and err.value.input == "check"
    assert "2133 operations per pass" in err.value.message and "76788 in all" in err.value.message
    report = E.evaluate("(x @ A).sum()", variables, check=True,
                        limits=E.Limits(max_matmul_madds=total))["check"]
    np.testing.assert_allclose(arr(report["x"]["numeric"]), np.full((2, 3), 4.0), atol=1e-6)


# --------------------------------------------------------------------------------------
# NaN provenance, warnings, kinds
# --------------------------------------------------------------------------------------

def test_first_nonfinite_forward_and_backward(client):
    body = post(client, {"expression": "log(x) * 2", "variables": {"x": [1.0, 0.0]}})
    log_node = next(n for n in body["nodes"] if n["op"] == "log")
    assert body["first_nonfinite"] == {"node": log_node["id"], "pass": "forward", "count": 1}
    assert body["value"] == [0.0, "-Infinity"]
    assert any("divide by zero" in w and "log(x)" in w for w in body["warnings"])
    body = post(client, {"expression": "(x ** 0.5).sum()", "variables": {"x": [0.0, 4.0]}})
    x = next(n for n in body["nodes"] if n["op"] == "variable")
    assert body["first_nonfinite"] == {"node": x["id"], "pass": "backward", "count": 1}
    assert body["grads"]["x"] == ["Infinity", 0.25]


def test_constants_get_no_gradient(client):
    """L0.6: exponents, masks, ids are constants; asking for their gradient is a 422."""
    body = post(client, {"expression": "x ** x", "variables": {"x": [2.0]}}, status=422)
    assert body["error"]["position"] == 5 and "L0.6" in body["error"]["message"]
    body = post(client, {"expression": "x ** p", "variables": {"x": [2.0], "p": [3.0]}})
    assert body["grads"] == {"x": [12.0]}
    body = post(client, {"expression": "masked_fill(s, m, -inf)", "variables": {
        "s": [1.0], "m": {"value": [True], "requires_grad": True}}}, status=422)
    assert body["error"]["input"] == "variables.m"
    body = post(client, {"expression": "embedding(w, ids)", "variables": {
        "w": [[1.0]], "ids": [0.5]}}, status=422)
    assert body["error"]["input"] == "variables.ids" and "integer" in body["error"]["message"]


def test_indexing_methods_and_keywords():
    x = np.arange(6.0).reshape(2, 3)
    r = E.evaluate("x[:, 1:].sum(axis=0, keepdims=True) + x[None][..., 0].T.max()"
                   " + x.reshape(3, 2).transpose()[0, ids].mean()",
                   {"x": x, "ids": [0, 0, 2]})
    t = Tensor(x, requires_grad=True)
    want = t[:, 1:].sum(axis=0, keepdims=True) + t[None][..., 0].T.max() \
        + t.reshape(3, 2).transpose()[0, np.array([0, 0, 2])].mean()
    want.backward(np.ones(want.shape))
    np.testing.assert_array_equal(arr(r["value"]), want.data)
    np.testing.assert_array_equal(arr(r["grads"]["x"]), t.grad)


def test_grad_output_of_the_wrong_shape_names_both_shapes(client):
    body = post(client, {"expression": "x * 2", "variables": {"x": [1.0, 2.0]},
                         "grad_output": [1.0, 2.0, 3.0]}, status=422)
    assert body["error"]["input"] == "grad_output"
    assert "[3]" in body["error"]["message"] and "[2]" in body["error"]["message"]


# --------------------------------------------------------------------------------------
# hostile expressions: 422 with a position, never executed (H4, H5)
# --------------------------------------------------------------------------------------

HOSTILE = [
    ("__import__('os')", 0),
    ("scores.__class__", 7),
    ("(lambda: 1)()", 1),
    ("[x for x in y]", 0),
    ("y + 1", 0),                                # an undefined name
    ("scores + open(scores)", 9),                # a call of a non-registry name
    ("scores + 'abc'", 9),                       # a string literal
    ("scores > 0", 0),
    ("scores.sum().__globals__", 13),
    ("getattr(scores, 'T')", 0),
    ("softmax(*scores)", 8),
]


@pytest.fixture
def never_runs(monkeypatch):
    # patched where evaluation looks it up (glassllm.sandbox.expr.evaluation), not the re-export
    from glassllm.sandbox.expr import evaluation

    calls = []
    real = evaluation._forward
    monkeypatch.setattr(evaluation, "_forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    yield calls
    assert calls == [], "a refused expression must not be executed"


@pytest.mark.parametrize("expression,position", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_expressions_are_422_with_a_position(client, never_runs, expression, position):
    body = post(client, {"expression": expression, "variables": {"scores": [1.0]}}, status=422)
    assert body["error"]["input"] == "expression"
    assert body["error"]["position"] == position, body


SYNTAX = [
    ("x +", 3, True),                            # the missing operand: where the input ended
    ("x @", 3, True),
    ("x ** ", 4, True),                          # trailing spaces are not the end
    ("softmax(x) -", 12, True),
    ("x +\n\n", 3, False),                       # Python points at the line's end itself
    ("(x", 0, False),                            # the bracket that was never closed
    ("softmax(x", 7, False),
    ("x +* y", 3, False),                        # the operator that cannot follow
    ("1 2", 2, False),                           # the token that cannot follow
    ("x + y)", 5, False),                        # the unmatched bracket
]


@pytest.mark.parametrize("expression,position,ended", SYNTAX, ids=[s[0] for s in SYNTAX])
def test_syntax_errors_point_at_the_offending_position(client, never_runs, expression,
                                                       position, ended):
    """H4 (QA pass 3, defect 6): `x +` reported position 0; the caret belongs where the
    operand is missing, after the `+`, and on the offending token otherwise."""
    body = post(client, {"expression": expression, "variables": {"x": [1.0], "y": [1.0]}},
                status=422)
    err = body["error"]
    assert err["input"] == "expression" and err["position"] == position, err
    assert err["message"].startswith("syntax error: ")
    assert ("the expression ends too soon" in err["message"]) == ended


def test_nesting_and_size_are_refused_before_parsing(client, never_runs):
    deep = "(" * 10_000 + "x" + ")" * 10_000
    body = post(client, {"expression": deep, "variables": {"x": 1.0}}, status=422)
    assert body["error"]["code"] == "expression_too_long"
    body = post(client, {"expression": "x" * (1 << 20), "variables": {"x": 1.0}}, status=422)
    assert body["error"]["code"] == "expression_too_long"
    # past the length limit, the bracket depth and Python's own parser limits are 422 too
    with pytest.raises(E.ExprError) as err:
        E.evaluate(deep, {"x": 1.0}, limits=E.Limits(max_length=10**6))
    assert status_of(err.value) == 422 and err.value.code == "too_deep"
    with pytest.raises(E.ExprError) as err:
        E.evaluate(deep, {"x": 1.0}, limits=E.Limits(max_length=10**6, max_depth=10**6))
    assert status_of(err.value) == 422
    with pytest.raises(E.ExprError) as err:
        E.evaluate("-" * 5000 + "x", {"x": 1.0},
                   limits=E.Limits(max_length=10**6, max_depth=10**6))
    assert status_of(err.value) == 422
    with pytest.raises(E.ExprError) as err:
        E.evaluate("+".join(["x"] * 400), {"x": 1.0})
    assert err.value.code == "too_deep"


def test_huge_results_are_refused_from_shapes(client, never_runs):
    body = post(client, {"expression": "(a + b).sum()", "variables": {
        "a": [[1.0]] * 20000, "b": [[1.0] * 20000]}}, status=413)
    assert body["error"]["op"] == "add" and body["error"]["span"] == [1, 6]
    body = post(client, {"expression": "repeat_kv(x, 1000000000)", "variables": {
        "x": [[[[1.0]]]]}}, status=413)
    assert body["error"]["op"] == "repeat_kv"


def test_power_towers_are_bounded(client):
    """`2 ** 10 ** 10` is float64 arithmetic on constants: inf with a warning, in no time."""
    body = post(client, {"expression": "2 ** 10 ** 10", "variables": {}})
    assert body["value"] == "Infinity"
    assert any("overflow" in w for w in body["warnings"])
    body = post(client, {"expression": "x ** 1e308 ** 1e308", "variables": {"x": [2.0]}})
    assert body["value"] == ["Infinity"]


def test_numpy_errors_are_400_naming_the_op_and_span(client):
    body = post(client, {"expression": "x @ y", "variables": {"x": [[1.0, 2.0]],
                                                            "y": [[1.0, 2.0]]}}, status=400)
    assert body["error"]["op"] == "matmul" and body["error"]["span"] == [0, 5]
    body = post(client, {"expression": "softmax(x, axis=3)", "variables": {"x": [1.0]}},
                status=400)
    assert "axis" in body["error"]["message"]


def test_malformed_requests(client):
    r = client.post("/api/v1/eval", content=b"x", headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert post(client, {"expression": 3}, status=422)["error"]["input"] == "expression"
    assert post(client, {"expression": "x", "vars": {}}, status=422)["error"]["input"] == "vars"
    assert post(client, {"expression": "x", "variables": {"__x": 1}}, status=422)
    assert post(client, {"expression": "x", "variables": {"x": {"value": 1, "extra": 2}}},
                status=422)["error"]["input"] == "variables.x"
    assert post(client, {"expression": "x", "variables": {"x": [[1.0], [1.0, 2.0]]}},
                status=422)["error"]["input"] == "variables.x"


def test_constant_base_power_is_differentiable_in_its_exponent():
    """`2 ** x` is the reflected power (L1.1): x gets d/dx 2**x = 2**x log 2, not silence."""
    from glassllm.sandbox.expr import evaluate

    res = evaluate("2 ** x", {"x": {"value": [0.0, 1.0, 3.0], "requires_grad": True}})
    assert res["value"] == [1.0, 2.0, 8.0]
    np.testing.assert_allclose(res["grads"]["x"], np.array([1.0, 2.0, 8.0]) * np.log(2.0),
                               rtol=1e-15)
    assert res["nodes"][res["output"]]["op"] == "rpow"


# --------------------------------------------------------------------------------------
# `.T` is a property; no attribute path, nor any short token soup, escapes as a 500
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("expression,position", [
    ("x.T()", 2), ("x.T(1)", 2), ("x.T.T()", 4), ("(x).T()", 4), ("x.sum().T()", 8)])
def test_calling_dot_t_is_a_422_naming_the_property(client, never_runs, expression, position):
    body = post(client, {"expression": expression, "variables": {"x": [[1.0, 2.0]]}},
                status=422)
    assert body["error"]["position"] == position, body
    assert body["error"]["message"] == ("`.T` is a property, not a method; write x.T or"
                                        f" x.transpose() (at position {position})")


def test_other_attribute_paths_are_422_and_dot_t_still_transposes(client):
    body = post(client, {"expression": "x.sum.T", "variables": {"x": [[1.0, 2.0]]}},
                status=422)
    assert body["error"]["position"] == 2 and "'.sum'" in body["error"]["message"]
    res = E.evaluate("x.T.T + x.T.sum()", {"x": [[1.0, 2.0]]})
    assert res["value"] == [[4.0, 5.0]]
    assert E.evaluate("x.T", {"x": [[1.0, 2.0]]})["value"] == [[1.0], [2.0]]


def test_random_token_soup_is_a_result_or_an_expr_error():
    """Short expressions from the grammar's tokens: evaluate never raises anything but
    ExprError (a KeyError or IndexError here would be a 500 on /api/v1/eval)."""
    import random

    tokens = ["x", "y", "ids", "m", "softmax", "sum", "0", "1", "2", "-1", "1.5", "inf", "nan",
              "None", "...", "+", "-", "*", "/", "**", "@", ".sum()", ".T", ".T()", ".mean()",
              ".reshape(", ".transpose()", "[", "]", "(", ")", ",", ":"]
    variables = {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [1.0, -1.0], "ids": [0, 1],
                 "m": [True, False]}
    rng = random.Random(5)
    results = refusals = 0
    with np.errstate(all="ignore"):
        for _ in range(600):
            source = "".join(rng.choice(tokens) for _ in range(rng.randint(1, 7)))
            try:
                E.evaluate(source, variables)
                results += 1
            except E.ExprError as exc:
                assert status_of(exc) in (400, 413, 422), (source, exc)
                refusals += 1
    assert results > 20 and refusals > 300


def test_maybe_bools_false_reaches_the_variables(monkeypatch):
    """evaluate(maybe_bools=False) sends a large float variable down wire's fast path; the
    element-by-element path is made to raise, so only the fast path can answer."""
    import glassllm.sandbox.wire as W

    def slow(*_a, **_k):
        raise AssertionError("the element-wise path was taken")

    monkeypatch.setattr(W, "_exact_elements", slow)
    x = np.arange(20_000, dtype=np.float64).reshape(100, 200) / 7
    res = E.evaluate("x.sum()", {"x": x.tolist()}, maybe_bools=False)
    assert res["value"] == float(np.sum(x))
    np.testing.assert_array_equal(np.array(res["grads"]["x"]), np.ones((100, 200)))
    res = E.evaluate("embedding(w, ids).sum()", {"w": x[:4].tolist(), "ids": [1, 3, 1]},
                     maybe_bools=False)
    assert res["grads"]["w"][1] == [2.0] * 200 and res["grads"]["w"][0] == [0.0] * 200
    with pytest.raises(AssertionError, match="element-wise"):  # the default stays exact
        E.evaluate("x.sum()", {"x": x.tolist()})


def test_index_variables_are_read_as_a_mask_or_ids_by_their_leaves():
    x = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    res = E.evaluate("x[m]", {"x": x, "m": [True, False, True]})
    assert res["value"] == [[1.0, 2.0], [5.0, 6.0]]
    assert res["grads"]["x"] == [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    kinds = {n["name"]: n["kind"] for n in res["nodes"] if n["op"] == "variable"}
    assert kinds == {"x": "tensor", "m": "bool_mask"}
    res = E.evaluate("x[m]", {"x": x, "m": [[False, True], [True, False], [False, False]]})
    assert res["value"] == [2.0, 3.0]
    res = E.evaluate("x[ids]", {"x": x, "ids": [2, 0, 2]})
    assert res["value"] == [[5.0, 6.0], [1.0, 2.0], [5.0, 6.0]]
    assert res["grads"]["x"] == [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
    assert {n["name"]: n["kind"] for n in res["nodes"] if n["op"] == "variable"}["ids"] \
        == "int_array"
    assert E.evaluate("x[:, i]", {"x": x, "i": 1})["value"] == [2.0, 4.0, 6.0]
    assert E.evaluate("x[ids]", {"x": x, "ids": []})["value"] == []
    with pytest.raises(E.ExprError) as refused:
        E.evaluate("x[ids]", {"x": x, "ids": [0.5, 1.0]})
    assert refused.value.input == "variables.ids" and status_of(refused.value) == 422


def test_the_sandbox_reduces_a_0d_input_over_axis_0_like_the_library(client):
    """H2 over L2.1 / L4.1: max, tsum, mean and softmax of a 0-d x over axis 0 / -1 answer
    (PyTorch: amax(t, 0) = t with gradient 1, softmax(t, -1) = 1 with gradient 0)."""
    for expression, value, grad in (("max(x, axis=0)", 3.0, 1.0), ("tsum(x, axis=-1)", 3.0, 1.0),
                                    ("mean(x, axis=0)", 3.0, 1.0), ("softmax(x)", 1.0, 0.0)):
        r = client.post("/api/v1/eval", json={"expression": expression, "variables": {"x": 3.0}})
        assert r.status_code == 200, r.text
        assert r.json()["value"] == value and r.json()["grads"] == {"x": grad}
    r = client.post("/api/v1/eval", json={"expression": "tsum(x, axis=1)", "variables": {"x": 3.0}})
    assert r.status_code == 400 and "axis 1" in r.json()["error"]["message"]


def test_a_long_flat_chain_is_refused_with_how_to_group_it():
    """A flat 65-term sum is 64 levels of the syntax tree: the refusal says why a flat
    chain counts as nesting and how to group it; the grouped form of the same sum runs."""
    with pytest.raises(E.ExprError) as err:
        E.evaluate(" + ".join(["x"] * 66), {"x": 1.0})
    assert err.value.code == "too_deep"
    assert "each operator of a chain such as a + b + c is one level" in str(err.value)
    grouped = " + ".join("(" + " + ".join(["x"] * 11) + ")" for _ in range(6))
    assert E.evaluate(grouped, {"x": 1.0})["value"] == 66.0


@pytest.mark.parametrize("deep", ["x" + ".T" * 70, "-" * 70 + "x", "x" + "[0]" * 70,
                                  "2 ** " * 70 + "x"])
def test_deep_nesting_that_is_not_a_chain_gets_no_chain_advice(deep):
    """QA: brackets cannot flatten .T.T…, - - …, [0][0]… or the right-associative **."""
    with pytest.raises(E.ExprError) as err:
        E.evaluate(deep, {"x": np.ones((1,) * 2)}, limits=E.Limits(max_length=10**4))
    assert err.value.code == "too_deep"
    assert "nests deeper than 64 levels" in str(err.value)
    assert "chain" not in str(err.value)


def test_a_long_chain_inside_a_call_gets_the_chain_advice():
    with pytest.raises(E.ExprError) as err:
        E.evaluate("exp(" + " + ".join(["x"] * 70) + ")", {"x": 1.0})
    assert "each operator of a chain" in str(err.value)
