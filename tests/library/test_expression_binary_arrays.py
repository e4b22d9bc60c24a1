"""Expressions over exact binary arrays (SPEC H3, "Exact binary arrays" of docs/http.md):
the base64 form ``{"dtype", "shape", "base64"}`` of an array answers exactly as its JSON
form does, wherever the array is used — here as an index variable (a bool mask, an int
index) — and a ``"encoding": "base64"`` answer keeps every float64 bit pattern, NaN sign
and payload included, in ``/api/v1/eval`` and in a batch's expression case."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm.apps.client import Sandbox
from glassllm.sandbox.expr import evaluate
from glassllm.sandbox.wire import encode_base64
from glassllm_service.app import create_app
from glassllm_service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def b64(arr: np.ndarray, dtype: str) -> dict:
    """`arr` as a binary array of the wire's `dtype` (little-endian, C order)."""
    le = {"bool": "|b1", "int64": "<i8", "int32": "<i4", "float64": "<f8"}[dtype]
    data = np.ascontiguousarray(arr, dtype=le).tobytes()
    return {"dtype": dtype, "shape": list(np.shape(arr)),
            "base64": base64.b64encode(data).decode("ascii")}


X = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
MASK = [True, False, True, False, False, True]
IDS = [5, 0, 5, 2]

# (expression, x, the index variable as JSON, its base64 dtype, value, x's gradient)
INDEX_CASES = [
    ("x[m].sum()", X, MASK, "bool", 7.0, [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]),
    ("x[i].sum()", X, IDS, "int64", 12.0, [1.0, 0.0, 1.0, 0.0, 0.0, 2.0]),
    ("x[i].sum()", X, IDS, "int32", 12.0, [1.0, 0.0, 1.0, 0.0, 0.0, 2.0]),
    ("(x[m] * 2.0).sum()", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
     [[False, True, False], [True, False, True]], "bool", 24.0,
     [[0.0, 2.0, 0.0], [2.0, 0.0, 2.0]]),
    ("x[:, i].sum()", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [2, 2, 0], "int64", 23.0,
     [[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]]),
]
IDS_OF_CASES = ["bool-mask", "int64-index", "int32-index", "2d-bool-mask", "int64-column-index"]


def _index_name(expression: str) -> str:
    return "m" if "[m]" in expression else "i"


@pytest.mark.parametrize("expression, x, index, dtype, value, grad", INDEX_CASES,
                         ids=IDS_OF_CASES)
def test_eval_index_variable_base64_answers_as_json(client, expression, x, index, dtype,
                                                    value, grad):
    """H3, binary arrays: an index variable sent as base64 (a ``bool`` mask, an ``int64`` or
    ``int32`` index array) is read as its JSON list is — same status, same answer, exactly
    (tester's D3: the base64 bool mask was read as an int index and refused with 422)."""
    name = _index_name(expression)
    as_json = client.post("/api/v1/eval", json={
        "expression": expression, "variables": {"x": x, name: index}})
    as_b64 = client.post("/api/v1/eval", json={
        "expression": expression, "variables": {"x": x, name: b64(np.array(index), dtype)}})
    assert as_json.status_code == 200, as_json.text
    assert as_b64.status_code == 200, as_b64.text
    assert as_json.json()["value"] == value
    assert as_json.json()["grads"] == {"x": grad}
    assert as_b64.json() == as_json.json()       # every node too: kind, value, grad


def test_eval_tester_request_base64_bool_mask_is_7(client):
    """H3: the tester's exact request (D3): the mask [1, 0, 1, 0, 0, 1] as base64 bytes
    ``AQABAAAB`` selects x[0] + x[2] + x[5] = 7.0, and the index node is a bool mask."""
    r = client.post("/api/v1/eval", json={
        "expression": "x[m].sum()",
        "variables": {"x": [0, 1, 2, 3, 4, 5],
                      "m": {"dtype": "bool", "shape": [6], "base64": "AQABAAAB"}}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["value"] == 7.0
    assert body["grads"] == {"x": [1.0, 0.0, 1.0, 0.0, 0.0, 1.0]}
    mask = next(n for n in body["nodes"] if n.get("name") == "m")
    assert mask["kind"] == "bool_mask"
    assert mask["value"] == [True, False, True, False, False, True]


@pytest.mark.parametrize("expression, x, index, dtype, value, grad", INDEX_CASES,
                         ids=IDS_OF_CASES)
def test_library_evaluate_index_variable_base64_answers_as_json(expression, x, index, dtype,
                                                               value, grad):
    """H3 and L0.3 (the library reads the wire alike): `glassllm.sandbox.expr.evaluate` gives the
    same result for the index as a JSON list, a base64 binary array and a NumPy array."""
    name = _index_name(expression)
    results = [evaluate(expression, {"x": x, name: form}) for form in
               (index, b64(np.array(index), dtype), np.array(index))]
    assert results[0]["value"] == value
    assert results[0]["grads"] == {"x": grad}
    assert results[1] == results[0]
    assert results[2] == results[0]


def test_base64_float_index_is_still_refused_naming_the_variable(client):
    """H4: a float64 binary array used as an index is neither a mask nor integers: 422
    naming the variable (the dtype decides, as a JSON float list is refused)."""
    r = client.post("/api/v1/eval", json={
        "expression": "x[i].sum()",
        "variables": {"x": X, "i": b64(np.array([0.0, 1.0]), "float64")}})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["input"] == "variables.i"
    assert "'int64' or 'int32'" in r.json()["error"]["message"]


@pytest.mark.parametrize("n", [63, 64, 200])
def test_client_eval_masks_and_indices_from_64_elements(client, n):
    """H3, docs/client.md: the Python client sends arrays of >= 64 elements as base64, so a
    mask and an index array of n elements must answer as the JSON form does at every n."""
    x = np.arange(n * 1.0)
    mask = np.arange(n) % 3 == 0
    ids = np.arange(n)[::-1] % 7
    with Sandbox("http://testserver", transport=client._transport) as sb:
        masked = sb.eval("x[m].sum()", {"x": x, "m": mask})
        indexed = sb.eval("x[i].sum()", {"x": x, "i": ids})
    assert float(masked.value) == float(x[mask].sum())
    np.testing.assert_array_equal(masked.grads["x"], mask.astype(np.float64))
    assert float(indexed.value) == float(x[ids].sum())
    np.testing.assert_array_equal(indexed.grads["x"],
                                  np.bincount(ids, minlength=n).astype(np.float64))


def test_encode_base64_of_a_mask_is_a_mask():
    """H3: the library's own writer gives a bool mask dtype ``bool``, read back as a mask."""
    mask = np.array(MASK)
    r = evaluate("x[m].sum()", {"x": X, "m": encode_base64(mask)})
    assert r["value"] == 7.0


# --------------------------------------------------------------------------------------
# D4: a base64 answer keeps every float64 bit pattern (NaN sign and payload included)
# --------------------------------------------------------------------------------------

# quiet NaNs with payloads and both signs, a signalling NaN, ±Infinity, -0.0, the smallest
# subnormal, the largest finite float and 1.0
BITS = np.array([0x7FF8000000000ABC, 0xFFF8000000000000, 0xFFF80000DEADBEEF,
                 0x7FF0000000000001, 0x7FF0000000000000, 0xFFF0000000000000,
                 0x8000000000000000, 0x0000000000000001, 0x7FEFFFFFFFFFFFFF,
                 0x3FF0000000000000], dtype=np.uint64)
X_BITS = BITS.view(np.float64)
# quiet NaNs only for a seed: the backward adds it to zeros, which quiets a signalling NaN
SEED_BITS = np.array([0x7FF8000000000123, 0xFFF8000000000456, 0x7FF8000000000000,
                      0xFFF8000000000000, 0x4000000000000000, 0x8000000000000000],
                     dtype=np.uint64)


def raw_bytes(answer: dict) -> bytes:
    """The little-endian bytes of one binary answer array, checked to be float64."""
    assert set(answer) == {"dtype", "shape", "base64"}
    assert answer["dtype"] == "float64"
    return base64.b64decode(answer["base64"], validate=True)


def test_eval_base64_answer_keeps_every_nan_bit_pattern(client):
    """H3, "Exact binary arrays": with ``"encoding": "base64"`` the value of ``x`` comes
    back with the bytes it went in with — a NaN's sign and payload, a signalling NaN,
    -0.0, a subnormal (tester's D4: every NaN came back as 0x7ff8000000000000)."""
    r = client.post("/api/v1/eval", json={
        "expression": "x", "variables": {"x": b64(X_BITS, "float64")}, "encoding": "base64"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["value"]["shape"] == [10]
    assert raw_bytes(body["value"]) == X_BITS.astype("<f8").tobytes()
    assert raw_bytes(body["grads"]["x"]) == np.ones(10).astype("<f8").tobytes()


def test_eval_base64_answer_keeps_nan_bits_through_a_reshape_and_a_seed(client):
    """H3: value and grads both exact — ``x.reshape(2, 3)``'s value keeps x's bytes, and
    x's gradient is the seed (grad_output) with its NaN payloads and signs, reshaped back."""
    x = X_BITS[:6]
    seed = SEED_BITS.view(np.float64).reshape(2, 3)
    r = client.post("/api/v1/eval", json={
        "expression": "x.reshape(2, 3)", "variables": {"x": b64(x, "float64")},
        "grad_output": b64(seed, "float64"), "encoding": "base64"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["value"]["shape"] == [2, 3]
    assert raw_bytes(body["value"]) == x.astype("<f8").tobytes()
    assert body["grads"]["x"]["shape"] == [6]
    assert raw_bytes(body["grads"]["x"]) == SEED_BITS.astype("<u8").tobytes()


def test_eval_base64_answer_is_bit_for_bit_the_reshape_op(client):
    """H3: ``/api/v1/eval`` of ``x.reshape(10)`` and ``/api/v1/ops/reshape`` answer the same
    bytes in base64 (the op route kept them before D4's fix; the expression now does too)."""
    x = b64(X_BITS, "float64")
    ev = client.post("/api/v1/eval", json={"expression": "x.reshape(10)",
                                           "variables": {"x": x}, "encoding": "base64"})
    op = client.post("/api/v1/ops/reshape", json={"inputs": {"a": x, "shape": [10]},
                                                  "encoding": "base64"})
    assert ev.status_code == op.status_code == 200, (ev.text, op.text)
    assert raw_bytes(ev.json()["value"]) == raw_bytes(op.json()["value"]) \
        == X_BITS.astype("<f8").tobytes()


def test_eval_json_answer_is_unchanged_by_the_binary_path(client):
    """H3: the JSON answer still writes the non-finite tokens (``"NaN"``, ``"Infinity"``)
    and -0.0, as before; only a base64 answer carries the NaN payloads."""
    r = client.post("/api/v1/eval", json={"expression": "x",
                                          "variables": {"x": b64(X_BITS[3:], "float64")}})
    assert r.status_code == 200, r.text
    assert r.json()["value"] == ["NaN", "Infinity", "-Infinity", -0.0, 5e-324,
                                 1.7976931348623157e308, 1.0]
    assert r.json()["grads"] == {"x": [1.0] * 7}


def test_batch_expression_case_base64_answer_keeps_every_nan_bit_pattern(client):
    """H3 and the batch (docs/http.md, ``POST /api/v1/batch``): an expression case answers
    in base64 with x's exact bytes and the seed's exact NaN payloads, as ``/api/v1/eval``
    does; an op case next to it keeps them too."""
    x = X_BITS[:6]
    seed = SEED_BITS.view(np.float64)
    r = client.post("/api/v1/batch", json={"encoding": "base64", "cases": [
        {"expression": "x", "variables": {"x": b64(X_BITS, "float64")}},
        {"expression": "x.reshape(2, 3)", "variables": {"x": b64(x, "float64")},
         "grad_output": b64(seed.reshape(2, 3), "float64")},
        {"op": "reshape", "inputs": {"a": b64(X_BITS, "float64"), "shape": [10]}}]})
    assert r.status_code == 200, r.text
    whole, reshaped, op = r.json()["results"]
    assert raw_bytes(whole["value"]) == X_BITS.astype("<f8").tobytes()
    assert raw_bytes(whole["grads"]["x"]) == np.ones(10).astype("<f8").tobytes()
    assert reshaped["value"]["shape"] == [2, 3]
    assert raw_bytes(reshaped["value"]) == x.astype("<f8").tobytes()
    assert raw_bytes(reshaped["grads"]["x"]) == SEED_BITS.astype("<u8").tobytes()
    assert "nodes" not in reshaped
    assert raw_bytes(op["value"]) == X_BITS.astype("<f8").tobytes()


def test_batch_expression_case_json_answer_is_unchanged(client):
    """H3: a batch's JSON expression answer is the eval's value and grads, tokens included."""
    r = client.post("/api/v1/batch", json={"cases": [
        {"expression": "(x * 2.0).sum()", "variables": {"x": [1.0, -0.0, 3.0]}},
        {"expression": "x", "variables": {"x": ["NaN", "-Infinity", 0.5]}}]})
    assert r.status_code == 200, r.text
    first, second = r.json()["results"]
    assert first == {"value": 8.0, "shape": [], "grads": {"x": [2.0, 2.0, 2.0]},
                     "warnings": []}
    assert second["value"] == ["NaN", "-Infinity", 0.5]
    assert second["grads"] == {"x": [1.0, 1.0, 1.0]}


def test_library_run_arrays_gives_the_float64_arrays_bit_exact():
    """H3, the library: ``expr.run(prepared, arrays=True)`` gives value and grads as float64
    arrays with the input's bytes (the service's base64 answer is written from these)."""
    from glassllm.sandbox import expr

    seed = SEED_BITS.view(np.float64)
    result = expr.run(expr.prepare("x", {"x": b64(X_BITS[:6], "float64")}, seed),
                      arrays=True)
    assert result["value"].dtype == np.float64
    assert result["value"].tobytes() == X_BITS[:6].tobytes()
    assert result["grads"]["x"].tobytes() == SEED_BITS.tobytes()
    assert evaluate("x", {"x": [1.0, "NaN"]})["value"] == [1.0, "NaN"]   # default: wire JSON
