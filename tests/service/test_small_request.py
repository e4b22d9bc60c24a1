"""The small request's path: one op route, the depth scan only where the body
could be deep, tiny computations inline on the event loop, inside their admission slot."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox import registry
from glassllm_service import body as limits
from glassllm_service.allow import flat_routes
from glassllm_service.app import create_app
from glassllm_service.requests.op_call import OpCall
from glassllm_service.settings import Settings

NEG = {"inputs": {"a": [[1.0, -2.0]]}}


@pytest.fixture()
def client():
    with TestClient(create_app(Settings(max_json_depth=8))) as c:
        yield c


def test_one_route_runs_every_op_and_openapi_still_lists_each(client):
    posts = [prefix + r.path for r, prefix in flat_routes(client.app.router.routes)
             if (prefix + getattr(r, "path", "")).startswith("/api/v1/ops/")
             and "POST" in (getattr(r, "methods", None) or ())]
    assert posts == ["/api/v1/ops/{name}"]
    paths = client.get("/openapi.json").json()["paths"]
    documented = {p.removeprefix("/api/v1/ops/") for p, item in paths.items()
                  if p.startswith("/api/v1/ops/") and "post" in item}
    assert documented == set(registry.OPS)
    r = client.post("/api/v1/ops/neg", json=NEG)
    assert r.status_code == 200 and r.json()["value"] == [[-1.0, 2.0]]
    assert r.json()["grads"]["a"] == [[-1.0, -1.0]]


def test_depth_scan_runs_only_when_the_brackets_could_reach_the_limit(client, monkeypatch):
    scanned = []
    real = limits.check_depth
    monkeypatch.setattr(limits, "check_depth", lambda body, *a, **k: (scanned.append(body),
                                                                      real(body, *a, **k)))
    assert client.post("/api/v1/ops/neg", json=NEG).status_code == 200  # 3 brackets ≤ 8
    assert scanned == []
    deep = {"inputs": {"a": [[[[[[[[[1.0]]]]]]]]]}}  # 11 levels > 8
    r = client.post("/api/v1/ops/neg", json=deep)
    error = r.json()["error"]
    assert r.status_code == 422 and error["code"] == "too_deep"
    assert "depth 11 exceeds 8" in error["message"] and len(scanned) == 1
    # many brackets but shallow: scanned, and accepted
    wide = {"inputs": {"a": [[float(i)] for i in range(10)]}}
    assert client.post("/api/v1/ops/neg", json=wide).status_code == 200 and len(scanned) == 2


def test_tiny_work_runs_on_the_event_loop_and_larger_work_in_a_worker_thread(client,
                                                                               monkeypatch):
    where = []
    real = OpCall.answer

    def spy(call):
        try:
            asyncio.get_running_loop()
            where.append(("loop", call.prepared.op.name))
        except RuntimeError:
            where.append(("thread", call.prepared.op.name))
        return real(call)

    monkeypatch.setattr(OpCall, "answer", spy)
    assert client.post("/api/v1/ops/neg", json=NEG).status_code == 200  # cost: a few elements
    big = {"inputs": {"a": [[1.0] * 200] * 200}}  # 40 000 elements > admission.INLINE_COST
    assert client.post("/api/v1/ops/neg", json=big).status_code == 200
    assert where == [("loop", "neg"), ("thread", "neg")]
    assert client.app.state.admission.running == 0  # both held and gave back their slot
