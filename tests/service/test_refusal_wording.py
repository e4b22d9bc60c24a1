"""How the sandbox words a refusal (SPEC H2, H4): the 404 of an unknown op in two
sentences, a grad_output with nothing to seed, and the op named on a body refused for its
size or depth."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox import registry as R
from glassllm.sandbox.wire import WireError
from glassllm_service.app import create_app
from glassllm_service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings(max_body_bytes=1000, max_json_depth=8))) as c:
        yield c


def error(r, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


# --------------------------------------------------------------------------------------
# H4: the 404 reads as two sentences
# --------------------------------------------------------------------------------------

def test_unknown_op_message_has_a_separator(client):
    err = error(client.get("/api/v1/ops/__class__"), 404)
    assert err["message"] == "there is no op named '__class__'. Every op: GET /api/v1/ops"
    err = error(client.post("/api/v1/ops/softmx", json={"inputs": {}}), 404)
    assert err["message"].startswith("there is no op named 'softmx'; did you mean softmax")
    assert err["message"].endswith("? Every op: GET /api/v1/ops")


# --------------------------------------------------------------------------------------
# H2: a grad_output with no backward to seed is refused, not ignored
# --------------------------------------------------------------------------------------

def test_grad_output_with_empty_requires_grad_is_422(client):
    body = {"inputs": {"a": [1.0, 2.0]}, "requires_grad": [], "grad_output": [5.0, 7.0]}
    err = error(client.post("/api/v1/ops/exp", json=body), 422)
    assert err["input"] == "grad_output" and err["op"] == "exp"
    assert "no input requires grad" in err["message"]
    assert "no backward to seed" in err["message"]
    r = client.post("/api/v1/ops/exp", json={"inputs": {"a": [0.0]}, "requires_grad": []})
    assert r.status_code == 200 and r.json()["grads"] == {} and r.json()["value"] == [1.0]


def test_the_library_refuses_it_too():
    op = R.OPS["exp"]
    with pytest.raises(WireError, match="no input requires grad") as err:
        R.run(op, R.coerce_inputs(op, {"a": [1.0]}), [], np.ones(1))
    assert err.value.input == "grad_output"
    seeded = R.run(op, R.coerce_inputs(op, {"a": [0.0]}), None, np.array([3.0]))
    assert seeded.grads["a"].tolist() == [3.0]                          # exp'(0) · 3


def test_eval_grad_output_without_a_variable_requiring_grad_is_422(client):
    body = {"expression": "exp(x)", "variables": {"x": {"value": [1.0], "requires_grad": False}},
            "grad_output": [2.0]}
    err = error(client.post("/api/v1/eval", json=body), 422)
    assert err["input"] == "grad_output" and "does not require grad" in err["message"]


# --------------------------------------------------------------------------------------
# H7: HEAD probes
# --------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------
# H4/H5: refusals of the body name the op the path names
# --------------------------------------------------------------------------------------

def test_body_too_large_names_the_op(client):
    big = b'{"inputs": {"a": [' + b"1.0," * 400 + b"1.0]}}"
    err = error(client.post("/api/v1/ops/softmax", content=big,
                            headers={"Content-Type": "application/json"}), 413)
    assert err["op"] == "softmax" and err["input"] == "request body"

    def streamed():                        # no Content-Length: counted while reading
        yield b'{"inputs": {"a": ['
        for _ in range(400):
            yield b"1.0,"
        yield b"1.0]}}"
    err = error(client.post("/api/v1/ops/softmax", content=streamed(),
                            headers={"Content-Type": "application/json"}), 413)
    assert err["op"] == "softmax" and err["code"] == "body_too_large"


def test_too_deep_names_the_op(client):
    deep = b'{"inputs": {"a": ' + b"[" * 10 + b"1.0" + b"]" * 10 + b"}}"
    err = error(client.post("/api/v1/ops/exp", content=deep,
                            headers={"Content-Type": "application/json"}), 422)
    assert err["op"] == "exp" and err["code"] == "too_deep"


# --------------------------------------------------------------------------------------
# the README points at the contract in words, not with a link that breaks in a clone
# --------------------------------------------------------------------------------------

