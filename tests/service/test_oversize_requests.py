"""The QA pass's oversize requests over HTTP (SPEC H5): each is a 413 naming the inputs,
decided from shapes before any compute (tests/library/test_plans.py shows the plans do no work
proportional to the result). In-process, TestClient."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app
from glassllm_service.settings import Settings


@pytest.fixture(scope="module")
def client():
    # a body limit large enough for the QA pass's payloads (x of 2000 × 500 zeros)
    with TestClient(create_app(Settings(max_body_bytes=32 * 1024 * 1024))) as c:
        yield c


def zeros(*shape: int) -> list:
    return np.zeros(shape).tolist()


def post(client, path: str, body: dict):
    return client.post(path, content=orjson.dumps(body),
                       headers={"Content-Type": "application/json"})


def too_large(r, names: str, rule: str) -> None:
    assert r.status_code == 413, r.text[:300]
    err = r.json()["error"]
    assert err["code"] == "too_large" and err["input"] == names and rule in err["message"]


def test_linear_with_a_batched_x_is_413_before_computing(client):
    r = post(client, "/api/v1/ops/linear",
             {"inputs": {"x": zeros(2000, 1, 500), "weight": zeros(500, 1000)}})
    too_large(r, "x, weight", "3000000000 multiply-adds")


def test_swiglu_with_a_batched_x_is_413_before_computing(client):
    r = post(client, "/api/v1/ops/swiglu",
             {"inputs": {"x": zeros(2000, 1, 500), "w1": zeros(500, 1000),
                         "w2": zeros(1000, 500), "w3": zeros(500, 1000)}})
    too_large(r, "x, w1, w2, w3", "9000000000 multiply-adds")


def test_attention_scores_are_counted(client):
    ws = {w: zeros(8, 8) for w in ("wq", "wk", "wv", "wo")}
    r = post(client, "/api/v1/ops/attention",
             {"inputs": {"x": zeros(1, 2048, 8), **ws, "n_heads": 4, "n_kv_heads": 4,
                         "cos": zeros(2048, 1), "sin": zeros(2048, 1)}})
    too_large(r, "x, n_heads", "16777216 elements")


def test_getitem_with_huge_broadcast_index_arrays_is_413(client):
    """QA: a ~360 KB request that was refused only after 20 s of CPU."""
    index = [{"array": [[0]] * 60000}, {"array": [[0] * 60000]}]
    r = post(client, "/api/v1/ops/getitem", {"inputs": {"a": [[1.0]], "index": index}})
    too_large(r, "a, index", "3600000000 elements")


def test_eval_index_arrays_are_planned_analytically(client):
    body = {"expression": "x[a, b]", "variables": {"x": [[1.0]], "a": [[0]] * 40000,
                                                   "b": [[0] * 40000]}}
    r = post(client, "/api/v1/eval", body)
    assert r.status_code == 413 and "1600000000 elements" in r.json()["error"]["message"]


def test_embedding_with_a_million_ids_is_413(client):
    r = post(client, "/api/v1/ops/embedding",
             {"inputs": {"weight": zeros(4, 1000), "ids": [0] * 1_000_000}})
    too_large(r, "weight, ids", "1000000000 elements")


def test_a_linear_layer_under_the_limits_still_runs(client):
    """The folded weight gradient (autograd.matmul) makes (200, 1, 500) @ (500, 1000) cheap."""
    x = np.full((200, 1, 500), 0.5)
    r = post(client, "/api/v1/ops/linear",
             {"inputs": {"x": x.tolist(), "weight": np.ones((500, 1000)).tolist()}})
    assert r.status_code == 200 and r.json()["shape"] == [200, 1, 1000]
    assert r.json()["value"][0][0][:2] == [250.0, 250.0]
    assert np.array(r.json()["grads"]["weight"])[0, 0] == 100.0     # sum over 200 rows of 0.5


READ_JSON_REFUSALS = [  # (body, content type, status, code, message, input)
    (b"{}", "text/plain", 415, "unsupported_media_type",
     "Content-Type must be application/json; got 'text/plain'", "Content-Type"),
    (b"  ", "application/json", 422, "invalid_request", "the body is empty; send {SEND}",
     "request body"),
    (b"{", "application/json", 422, "invalid_json", "the body is not valid JSON: unexpected"
     " end of data: line 1 column 2 (char 1)", "request body"),
    (b"[" * 200 + b"]" * 200, "application/json", 422, "too_deep",
     "JSON nesting depth 200 exceeds 32 (GLASSLLM_MAX_JSON_DEPTH)", "request body"),
]


@pytest.mark.parametrize("path,op,send", [
    ("/api/v1/ops/exp", "exp", '{"inputs": {...}}'),
    ("/api/v1/eval", None, '{"expression": ...}')])
@pytest.mark.parametrize("body,ctype,status,code,message,where", READ_JSON_REFUSALS,
                         ids=["415", "empty", "not-json", "too-deep"])
def test_both_routes_read_json_with_the_same_refusals(client, path, op, send, body, ctype,
                                                      status, code, message, where):
    assert Settings().max_json_depth == 32
    r = client.post(path, content=body, headers={"Content-Type": ctype})
    assert r.status_code == status
    assert r.json() == {"error": {"status": status, "code": code, "op": op, "input": where,
                                  "message": message.replace("{SEND}", send)}}


@pytest.mark.parametrize("text,expected", [(b'{"x": [1.0, 2.0]}', False),
                                           (b'{"x": [true]}', True), (b'{"x": false}', True)])
def test_read_json_returns_the_body_and_whether_it_spells_a_bool(text, expected):
    import asyncio

    from starlette.requests import Request

    from glassllm_service.body import read_json

    async def receive():
        return {"type": "http.request", "body": text, "more_body": False}

    request = Request({"type": "http", "method": "POST", "headers": [
        (b"content-type", b"application/json; charset=utf-8")]}, receive)
    parsed, maybe_bools = asyncio.run(read_json(request, Settings()))
    assert parsed == orjson.loads(text) and maybe_bools is expected
