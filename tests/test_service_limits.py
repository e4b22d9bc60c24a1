"""The QA pass's oversize requests over HTTP (SPEC H5): each is a 413 naming the inputs,
decided from shapes before any compute (tests/test_plans.py shows the plans do no work
proportional to the result). In-process, TestClient."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.settings import Settings


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
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
