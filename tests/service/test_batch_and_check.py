"""The tools of an autograder over HTTP, in process: exact binary arrays, /api/v1/batch,
/api/v1/check, and examples that carry their answers."""

from __future__ import annotations

import base64

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm import Tensor, autograd
from glassllm.errors import LimitError, WireError
from glassllm.gradients.checks import gradcheck
from glassllm.sandbox import registry
from glassllm.sandbox.compare import compare
from glassllm.sandbox.examples import EXAMPLES
from glassllm.sandbox.wire import coerce, encode_base64
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

EDGES = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 2.2250738585072014e-308,
                  np.finfo(np.float64).max, -np.finfo(np.float64).max, 1 / 3])


def b64(a, dtype="float64") -> dict:
    """The binary form written by hand (not by encode_base64, which it checks)."""
    raw = np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
    return {"dtype": dtype, "shape": list(np.shape(a)), "base64": base64.b64encode(raw).decode()}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def post(client, path, body):
    return client.post(path, content=orjson.dumps(body),
                       headers={"content-type": "application/json"})


def check(client, claimed: dict, **extra):
    return post(client, "/api/v1/check", {**SOFTMAX, "claimed": claimed, **extra})


# -- exact binary arrays ------------------------------------------------------------------

def test_base64_decodes_every_float64_bit_pattern():
    """NaN, ±Inf, -0.0, subnormals, the largest finite: the same bytes back (H3)."""
    back = coerce("tensor", "x", encode_base64(EDGES))
    assert back.tobytes() == EDGES.tobytes()
    assert back.flags.writeable and back.dtype == np.float64


def test_base64_int_and_bool_kinds():
    assert coerce("int_array", "ids", b64([3, -1, 2**62], "int64")).tolist() == [3, -1, 2**62]
    assert coerce("int_array", "ids", b64([[1, 2]], "int32")).tolist() == [[1, 2]]
    assert coerce("bool_mask", "m", b64([True, False], "bool")).tolist() == [True, False]
    with pytest.raises(WireError, match=r"'ids'.*dtype must be 'int64' or 'int32'"):
        coerce("int_array", "ids", b64([1.0], "float64"))
    bad = {"dtype": "bool", "shape": [1], "base64": base64.b64encode(b"\x02").decode()}
    with pytest.raises(WireError, match="0 or 1"):
        coerce("bool_mask", "m", bad)


@pytest.mark.parametrize("shape", [[0, 2**70], [2**30, 0, 2**30], [-1], [True], "3", [1] * 33])
def test_a_bad_base64_shape_is_422_never_a_500(shape):
    with pytest.raises(WireError, match="'x': shape"):
        coerce("tensor", "x", {"dtype": "float64", "shape": shape, "base64": ""})


def test_base64_limit_is_checked_on_the_declared_shape_before_decoding():
    """A shape of 10**12 elements with an empty text is a 413 (the limit), not a 422."""
    with pytest.raises(LimitError, match="1000000000000 elements"):
        coerce("tensor", "x", {"dtype": "float64", "shape": [10**6, 10**6], "base64": ""},
               max_elements=10**6)


@pytest.mark.parametrize("text, rule", [
    ("AAAAAAAA8D8=", "needs 16 bytes; the base64 text holds 8 bytes"),       # 1 of 2 floats
    ("!!!!AAAA8D8AAAAAAAAAQA==", "base64 is malformed"),
    ("AAAAAAAA8D8AAAAAAAAAQ", "not a multiple of 4"),
    ("!!!!", "base64 is malformed: it may hold only A-Z"),     # short and not base64 at all
    ("AAAAAAAA8D8=AAA", "base64 is malformed"),                # padding inside the text
    ("AA==", "needs 16 bytes; the base64 text holds 1 byte"),  # one byte, singular
])
def test_malformed_or_short_base64_is_422_naming_the_input(client, text, rule):
    r = post(client, "/api/v1/ops/mul", {"inputs": {"a": {"dtype": "float64", "shape": [2],
                                                          "base64": text}, "b": 1.0}})
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["input"] == "a" and rule in err["message"]


def test_base64_over_the_element_limit_is_413_naming_the_input():
    with TestClient(create_app(Settings(max_array_elements=10))) as c:
        r = post(c, "/api/v1/ops/neg", {"inputs": {"a": {"dtype": "float64", "shape": [11],
                                                          "base64": "AAAA"}}})
    assert r.status_code == 413 and r.json()["error"]["input"] == "a"


def test_base64_and_json_forms_give_identical_answers(client):
    rng = np.random.default_rng(0)
    a, b, g = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    as_json = post(client, "/api/v1/ops/matmul", {"inputs": {"a": a.tolist(), "b": b.tolist()},
                                                 "grad_output": g.tolist()}).json()
    as_b64 = post(client, "/api/v1/ops/matmul", {"inputs": {"a": b64(a), "b": b64(b)},
                                                "grad_output": b64(g), "encoding": "base64"}).json()
    assert as_b64["value"]["dtype"] == "float64" and as_b64["value"]["shape"] == [5, 3]
    # bit for bit: np.matmul on C-ordered arrays of the same shapes, on this machine
    assert coerce("tensor", "v", as_b64["value"]).tobytes() == \
        np.array(as_json["value"]).tobytes() == (a @ b).tobytes()
    for name in ("a", "b"):
        assert coerce("tensor", name, as_b64["grads"][name]).tobytes() == \
            np.array(as_json["grads"][name]).tobytes()


def test_base64_round_trips_edge_values_through_the_service(client):
    """mul by ones: the value and b's gradient are `a` itself, every bit of it."""
    r = post(client, "/api/v1/ops/mul", {"inputs": {"a": b64(EDGES), "b": b64(np.ones(10))},
                                         "encoding": "base64"}).json()
    assert coerce("tensor", "v", r["value"]).tobytes() == EDGES.tobytes()
    assert coerce("tensor", "g", r["grads"]["b"]).tobytes() == EDGES.tobytes()


def test_base64_everywhere_an_array_is(client):
    """ids (int64), masks (bool), index arrays and eval variables take the binary form."""
    r = post(client, "/api/v1/ops/embedding", {"inputs": {
        "weight": b64(np.zeros((4, 2))), "ids": b64([1, 2, 1], "int64")}}).json()
    assert r["grads"]["weight"] == [[0.0, 0.0], [2.0, 2.0], [1.0, 1.0], [0.0, 0.0]]
    r = post(client, "/api/v1/ops/masked_fill", {"inputs": {
        "a": [1.0, 2.0], "mask": b64([False, True], "bool"), "value": 0.0}}).json()
    assert r["value"] == [1.0, 0.0] and r["grads"]["a"] == [1.0, 0.0]
    r = post(client, "/api/v1/ops/getitem", {"inputs": {
        "a": [1.0, 2.0, 3.0], "index": [{"array": b64([2, 2], "int64")}]}}).json()
    assert r["value"] == [3.0, 3.0] and r["grads"]["a"] == [0.0, 0.0, 2.0]
    r = post(client, "/api/v1/eval", {"expression": "(x * x).sum()",
                                      "variables": {"x": b64([1.0, -2.0])},
                                      "encoding": "base64"}).json()
    assert r["value"] == {"dtype": "float64", "shape": [], "base64": encode_base64(
        np.float64(5.0))["base64"]}
    assert coerce("tensor", "g", r["grads"]["x"]).tolist() == [2.0, -4.0]


def test_encoding_must_be_json_or_base64(client):
    r = post(client, "/api/v1/ops/neg", {"inputs": {"a": 1.0}, "encoding": "hex"})
    assert r.status_code == 422 and r.json()["error"]["input"] == "encoding"


def test_openapi_describes_both_array_forms(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert {"$ref": "#/components/schemas/Base64Array"} in schemas["FloatArray"]["anyOf"]
    assert {"$ref": "#/components/schemas/FloatList"} in schemas["FloatArray"]["anyOf"]
    assert schemas["Base64Array"]["required"] == ["dtype", "shape", "base64"]


# -- batch ------------------------------------------------------------------------------------

def test_batch_answers_each_case_on_its_own_in_order(client):
    cases = [{"op": "mul", "inputs": {"a": [1.0, 2.0], "b": [3.0, 4.0]}},
             {"op": "nope", "inputs": {}},
             {"op": "mul", "inputs": {"a": [1.0], "b": "x"}},
             {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}},
             {"expression": "x +"},
             {"op": "matmul", "inputs": {"a": [[1.0, 2.0]], "b": [[1.0, 2.0]]}}]
    r = post(client, "/api/v1/batch", {"cases": cases})
    assert r.status_code == 200
    res = r.json()["results"]
    assert len(res) == 6
    single = post(client, "/api/v1/ops/mul", {"inputs": cases[0]["inputs"]}).json()
    assert res[0] == single
    assert res[1]["error"]["code"] == "unknown_op" and res[1]["error"]["input"] == "cases[1].op"
    assert res[2]["error"]["status"] == 422 and res[2]["error"]["input"] == "b"
    assert res[2]["error"]["case"] == 2
    assert res[3] == {"value": 5.0, "shape": [], "grads": {"x": [2.0, 4.0]}, "warnings": []}
    assert res[4]["error"]["status"] == 422 and res[4]["error"]["case"] == 4
    assert res[5]["error"]["status"] == 400 and res[5]["error"]["code"] == "numpy_error"


def test_batch_count_is_bounded():
    with TestClient(create_app(Settings(max_batch=2))) as c:
        r = post(c, "/api/v1/batch", {"cases": [{"op": "neg", "inputs": {"a": 1.0}}] * 3})
    assert r.status_code == 413
    assert r.json()["error"]["input"] == "cases[2]" and "GLASSLLM_MAX_BATCH" in r.text


def test_batch_work_is_bounded_up_front_naming_the_case_that_passes_it():
    """A batch's planned work is the sum of its cases' `Prepared.cost` (elements built plus
    multiply-adds). (8, 8) @ (8, 8): the 64-element output, 3 · 64 planned elements and
    3 · 512 multiply-adds (forward and backward) = 1792 per case; 2 fit in 4000 (with a neg:
    1), the third passes it. Nothing is computed."""
    a = np.ones((8, 8)).tolist()
    case = {"op": "matmul", "inputs": {"a": a, "b": a}}
    assert sum(registry.prepare(registry.OPS["matmul"], case["inputs"]).cost) == 1792
    with TestClient(create_app(Settings(max_matmul_madds=4000))) as c:
        ok = post(c, "/api/v1/batch", {"cases": [case, case]})
        r = post(c, "/api/v1/batch", {"cases": [case, {"op": "neg", "inputs": {"a": 1.0}},
                                                case, case]})
    assert ok.status_code == 200
    assert r.status_code == 413
    err = r.json()["error"]
    assert err["input"] == "cases[3]" and "5377" in err["message"]     # 1792 · 3 + 1 (neg)


# -- check ------------------------------------------------------------------------------------

SOFTMAX = {"op": "softmax", "inputs": {"a": [[1.0, 2.0, 3.0]]}, "grad_output": [[1.0, 0.0, 0.0]]}


def softmax_grad():
    s = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    g = np.array([1.0, 0.0, 0.0])
    return (s * (g - (g * s).sum()))[None, :]


def test_check_a_right_gradient_passes(client):
    r = check(client, {"grads": {"a": softmax_grad().tolist()}})
    body = r.json()
    assert r.status_code == 200 and body["passed"] is True
    rep = body["grads"]["a"]
    assert rep["allclose"] and rep["shape_match"] and rep["mismatches"] == 0
    assert rep["mask"] == [[False, False, False]] and rep["first_mismatch"] is None
    assert rep["max_abs_err"] < 1e-15


def test_check_a_wrong_gradient_says_where_and_by_how_much(client):
    claimed = softmax_grad()
    expected_1 = claimed[0, 1]
    claimed[0, 1] += 0.5
    body = check(client, {"grads": {"a": claimed.tolist()}}).json()
    rep = body["grads"]["a"]
    assert body["passed"] is False and rep["allclose"] is False and rep["mismatches"] == 1
    assert rep["mask"] == [[False, True, False]]
    assert rep["first_mismatch"] == {"index": [0, 1], "expected": expected_1,
                                     "given": expected_1 + 0.5}
    assert rep["max_abs_err"] == pytest.approx(0.5, abs=1e-15)
    assert rep["max_rel_err"] == pytest.approx(0.5 / abs(expected_1))


def test_check_a_wrong_shaped_gradient(client):
    body = check(client, {"grads": {"a": [1.0, 2.0, 3.0]}}).json()
    rep = body["grads"]["a"]
    assert body["passed"] is False and rep["shape_match"] is False
    assert rep["expected_shape"] == [1, 3] and rep["given_shape"] == [3] and rep["mask"] is None


def test_check_reveal_false_leaks_no_expected_number(client):
    expected = softmax_grad()
    claimed = expected.copy()
    claimed[0, 2] = 7.0
    r = post(client, "/api/v1/check", {**SOFTMAX, "claimed": {"grads": {"a": claimed.tolist()},
                                                             "value": [[0.0, 0.0, 0.0]]},
                                       "reveal": False})
    rep = r.json()["grads"]["a"]
    assert rep["mask"] == [[False, False, True]] and rep["first_mismatch"] == {"index": [0, 2]}
    assert "max_abs_err" not in rep and "max_rel_err" not in rep
    for number in (*expected.ravel(), 7.0 - expected[0, 2], *np.exp([1.0, 2.0, 3.0]) /
                   np.exp([1.0, 2.0, 3.0]).sum()):
        assert repr(float(number)) not in r.text
        assert repr(float(number))[:8] not in r.text


def test_check_an_expression_and_its_refusals(client):
    body = post(client, "/api/v1/check", {"expression": "(x * x).sum()",
                                          "variables": {"x": [1.0, 2.0]},
                                          "claimed": {"value": 5.0, "grads": {"x": [2.0, 4.0]}}})
    assert body.json()["passed"] is True
    r = post(client, "/api/v1/check", {**SOFTMAX, "claimed": {"grads": {"b": [1.0]}}})
    assert r.status_code == 422 and r.json()["error"]["input"] == "claimed.grads.b"
    r = post(client, "/api/v1/check", {**SOFTMAX, "claimed": {"grads": {"a": "x"}}})
    assert r.status_code == 422 and r.json()["error"]["input"] == "claimed.grads.a"
    r = post(client, "/api/v1/check", {**SOFTMAX, "claimed": {}, "rtol": -1})
    assert r.status_code == 422 and r.json()["error"]["input"] == "rtol"


def test_check_and_batch_take_an_expression_with_composite_ops_opened(client):
    """The page sends `expand: true` with a composite op while "Open composite ops" is
    ticked: a check and a batch case take it as eval does, and the verdict is the one of
    the same case without it (expanding changes no number)."""
    logits = [[2.0, 0.5, -1.0], [0.0, 1.0, 3.0]]
    case = {"expression": "cross_entropy(z, t)",
            "variables": {"z": logits, "t": [0, 2]}}
    z = Tensor(logits, requires_grad=True)
    loss = autograd.cross_entropy(z, np.array([0, 2]))
    loss.backward()
    claimed = {"value": loss.item(), "grads": {"z": z.grad.tolist()}}
    answers = [post(client, "/api/v1/check", {**case, **extra, "claimed": claimed}).json()
               for extra in ({}, {"expand": True}, {"expand": False})]
    assert all(a["passed"] for a in answers) and answers[0] == answers[1] == answers[2]
    batch = post(client, "/api/v1/batch", {"cases": [case, {**case, "expand": True}]}).json()
    assert batch["results"][0] == batch["results"][1]
    assert batch["results"][0]["value"] == loss.item()
    for path, body, field in [("/api/v1/check", {**case, "expand": "yes", "claimed": claimed},
                               "expand"),
                              ("/api/v1/batch", {"cases": [{**case, "expand": 1}]}, None)]:
        r = post(client, path, body)
        if field:
            assert r.status_code == 422 and r.json()["error"] == {
                "status": 422, "code": "invalid_expression", "op": None, "input": "expand",
                "message": "'expand' must be true or false"}
        else:  # a batch case's refusal is its own result
            err = r.json()["results"][0]["error"]
            assert err["code"] == "invalid_expression" and err["input"] == "cases[0].expand"
    # eval's own options have no place in a check's answer: refused, and said so
    r = post(client, "/api/v1/check", {**case, "check": True, "claimed": claimed})
    assert r.status_code == 422 and r.json()["error"]["input"] == "request body.check"
    assert "/api/v1/eval's own option" in r.json()["error"]["message"]


def test_compare_nan_matches_nan_and_infinities_err_infinitely():
    r = compare([np.nan, np.inf, 1.0], [np.nan, np.inf, np.inf])
    assert r["mask"] == [False, False, True] and r["max_abs_err"] == "Infinity"
    r = compare([0.0], [1e-9])
    assert r["allclose"] is True and r["max_rel_err"] == "Infinity"


# -- examples carry their answers --------------------------------------------------------------

def _numeric_grads(op, example) -> dict:
    args = registry.coerce_inputs(op, example.inputs)
    names = [i.name for i in op.inputs if i.kind == "tensor"]

    def fn(*tensors):
        call = []
        it = iter(tensors)
        for spec in op.inputs:
            call.append(next(it) if spec.kind == "tensor" else args[spec.name])
        out = op.fn(*call)
        # -inf stays -inf at the same places under a small step: leave it out of the sum
        return autograd.where(np.isfinite(out.data), out, 0.0)
    result = gradcheck(fn, *[Tensor(args[n], requires_grad=True) for n in names])
    return {n: c.numeric for n, c in zip(names, result.inputs, strict=True)}


@pytest.mark.parametrize("name", [n for n, op in registry.OPS.items() if op.output == "tensor"])
def test_every_op_example_carries_value_and_gradients_checked_by_finite_differences(client, name):
    op = registry.OPS[name]
    listed = {o["name"]: o for o in client.get("/api/v1/ops").json()["ops"]}[name]
    for i, example in enumerate(op.examples):
        expected = listed["examples"][i]["expected"]
        assert set(expected) == {"value", "grads"}
        assert set(expected["grads"]) == set(op.differentiable)
        numeric = _numeric_grads(op, example)
        for input_name, grad in expected["grads"].items():
            np.testing.assert_allclose(coerce("tensor", "g", grad), numeric[input_name],
                                       rtol=1e-5, atol=1e-6, err_msg=f"{name}[{i}].{input_name}")
        for key, value in example.expected.items():            # the reference's own numbers
            assert expected[key] == value


def test_every_eval_example_carries_value_and_gradients(client):
    listed = client.get("/api/v1/examples").json()["examples"]
    assert len(listed) == len(EXAMPLES)
    for ex in listed:
        assert "value" in ex["expected"] and "grads" in ex["expected"]
        r = post(client, "/api/v1/eval", {**ex["request"], "check": True}).json()
        np.testing.assert_allclose(coerce("tensor", "v", ex["expected"]["value"]),
                                   coerce("tensor", "v", r["value"]))
        for var, g in ex["expected"]["grads"].items():       # central differences agree
            np.testing.assert_allclose(coerce("tensor", "g", g),
                                       coerce("tensor", "n", r["check"][var]["numeric"]),
                                       rtol=1e-5, atol=1e-6)
