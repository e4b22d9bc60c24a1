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

from glassllm.client import Sandbox
from glassllm.expr import evaluate
from glassllm.wire import encode_base64
from service.app import create_app
from service.settings import Settings


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
    """H3 and L0.3 (the library reads the wire alike): `glassllm.expr.evaluate` gives the
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
