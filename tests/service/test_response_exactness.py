"""Responses are exact to the bit (SPEC H3): −0.0 keeps its sign,
subnormals and the largest finite float64 survive, non-finite values travel as the tokens
"NaN", "Infinity", "-Infinity" — on the ops route and on the eval route, for 0-d results,
for all-finite arrays (orjson's NumPy writer) and for arrays that mix finite and
non-finite values (wire.encode_array's object path).

Values are compared as IEEE-754 bit patterns (struct), so 0.0 == -0.0 cannot hide a lost
sign. Each value goes out twice: as ``a * 1`` (the value) and as the gradient of ``b``
(∂(a·b)/∂b = a · grad_output with grad_output = 1).
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox.wire import encode_array
from glassllm_service.app import create_app
from glassllm_service.codec import dumps, encode_value
from glassllm_service.settings import Settings

EDGES = [
    -0.0, 0.0,
    5e-324, -5e-324,                                  # the smallest subnormal
    1e-320,                                           # a subnormal in between
    2.225073858507201e-308,                           # the largest subnormal
    2.2250738585072014e-308, -2.2250738585072014e-308,  # the smallest normal
    2.2250738585072019e-308,                          # the normal just above
    1.7976931348623157e308, -1.7976931348623157e308,  # the largest finite
    0.1, 1 / 3, 2.0 ** 52 + 1.0,
]
NONFINITE = [math.nan, math.inf, -math.inf]
TOKEN = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def to_wire(x: float):
    return TOKEN[repr(x)] if not math.isfinite(x) else x


def assert_exact(got, want: list[float]) -> None:
    """`got` (JSON as parsed by the standard library) equals `want` bit for bit."""
    assert isinstance(got, list) and len(got) == len(want), got
    for g, w in zip(got, want, strict=True):
        if math.isfinite(w):
            assert isinstance(g, float), (g, w)
            assert bits(g) == bits(w), (g, w)
        else:
            assert g == TOKEN[repr(w)], (g, w)


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def post(client, path: str, body: dict):
    r = client.post(path, content=orjson.dumps(body), headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text[:400]
    return json.loads(r.text)   # the standard library keeps -0.0 and every bit


@pytest.mark.parametrize("values", [EDGES, EDGES + NONFINITE, [*NONFINITE, -0.0]],
                         ids=["finite", "mixed", "nonfinite"])
def test_ops_route_values_and_gradients_are_bit_exact(client, values):
    body = {"inputs": {"a": [to_wire(v) for v in values], "b": [1.0] * len(values)},
            "requires_grad": ["a", "b"]}
    out = post(client, "/api/v1/ops/mul", body)
    assert_exact(out["value"], values)
    assert_exact(out["grads"]["b"], values)          # ∂(a·b)/∂b = a
    assert out["grads"]["a"] == [1.0] * len(values)


@pytest.mark.parametrize("x", EDGES + NONFINITE, ids=repr)
def test_ops_route_zero_d_results_are_bit_exact(client, x):
    out = post(client, "/api/v1/ops/mul", {"inputs": {"a": to_wire(x), "b": 1.0}})
    assert out["shape"] == []
    assert_exact([out["value"]], [x])
    assert_exact([out["grads"]["b"]], [x])


def test_negative_zero_is_written_as_minus_zero_in_the_response_text(client):
    r = client.post("/api/v1/ops/neg", content=b'{"inputs": {"a": [0.0, -0.0, 0.0]}}',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 200
    assert b'"value":[-0.0,0.0,-0.0]' in r.content
    r = client.post("/api/v1/ops/neg", content=b'{"inputs": {"a": 0.0}}',
                    headers={"Content-Type": "application/json"})
    assert b'"value":-0.0' in r.content


@pytest.mark.parametrize("values", [EDGES, EDGES + NONFINITE], ids=["finite", "mixed"])
def test_eval_route_values_gradients_and_nodes_are_bit_exact(client, values):
    body = {"expression": "a * b", "variables": {"a": [to_wire(v) for v in values],
                                                 "b": [1.0] * len(values)}}
    out = post(client, "/api/v1/eval", body)
    assert_exact(out["value"], values)
    assert_exact(out["grads"]["b"], values)
    node_a = next(n for n in out["nodes"] if n.get("name") == "a")
    assert_exact(node_a["value"], values)


@pytest.mark.parametrize("x", [-0.0, 5e-324, -1.7976931348623157e308, math.inf, math.nan],
                         ids=repr)
def test_eval_route_zero_d_results_are_bit_exact(client, x):
    out = post(client, "/api/v1/eval", {"expression": "a * 1.0",
                                        "variables": {"a": to_wire(x)}})
    assert_exact([out["value"]], [x])


def test_the_public_encoders_keep_every_bit():
    """glassllm.sandbox.wire.encode_array and the service's codec, without HTTP."""
    values = np.array(EDGES + NONFINITE)
    assert_exact(encode_array(values), EDGES + NONFINITE)
    assert_exact([encode_array(np.float64(-0.0))], [-0.0])
    finite = np.array(EDGES)
    assert_exact(json.loads(dumps({"v": encode_value(finite)}))["v"], EDGES)
    assert_exact(json.loads(dumps({"v": encode_value(values)}))["v"], EDGES + NONFINITE)
    assert json.loads(dumps({"v": encode_value(np.array([[-0.0], [math.inf]]))}))["v"] == [
        [-0.0], ["Infinity"]]
    assert np.signbit(json.loads(dumps({"v": encode_value(np.array([[-0.0], [math.inf]]))}))[
        "v"][0][0])
    # integer and boolean arrays keep their type
    assert encode_array(np.array([1, -2], dtype=np.int64)) == [1, -2]
    assert encode_array(np.array([True, False])) == [True, False]


def test_encode_value_writes_float64_whatever_the_dtype():
    assert dumps(encode_value(np.array([1, 2]))) == b"[1.0,2.0]"
    assert dumps(encode_value(np.array([0.1], dtype=np.float32))) == b"[0.10000000149011612]"
    assert dumps(encode_value(np.array(3))) == b"3.0"
