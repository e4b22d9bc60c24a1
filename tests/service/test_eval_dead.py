"""POST /api/v1/eval's ``"dead": true``: every variable whose gradient is missing or dead,
the reason in words and the node that cut it; the default answer is unchanged; a
non-boolean is refused naming the field; the client sends it."""

from __future__ import annotations

import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm_service.app import create_app

JSON = {"content-type": "application/json"}
CASE = {"expression": "relu(x @ w).sum() + detach(v).sum()",
        "variables": {"x": [[1.0, -1.0]], "w": [[1.0, -1.0], [0.5, 1.0]], "v": [1.0, 2.0]}}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def post(client, body, status=200):
    r = client.post("/api/v1/eval", content=orjson.dumps(body), headers=JSON)
    assert r.status_code == status, r.text[:600]
    return r.json()


def test_dead_is_answered_only_when_asked(client):
    plain = post(client, CASE)
    asked = post(client, {**CASE, "dead": True})
    assert "dead" not in plain
    assert {k: v for k, v in asked.items() if k != "dead"} == plain
    dead = {d["variable"]: d for d in asked["dead"]}
    texts = {n["id"]: n["text"] for n in asked["nodes"]}
    # x @ w = [[0.5, -2]]: the second unit is off, so w's second column and nothing of x
    (cw,) = dead["w"]["causes"]
    assert (cw["reason"], cw["op"], texts[cw["node"]], dead["w"]["dead"]) == (
        "dead_relu", "relu", "relu(x @ w)", 2)
    assert "x" not in dead
    (cv,) = dead["v"]["causes"]
    assert (cv["reason"], texts[cv["node"]], cv["words"]) == (
        "detached", "detach(v)", "detach() cut the path: the value is used, its gradient is not")


def test_dead_must_be_a_boolean(client):
    err = post(client, {**CASE, "dead": "yes"}, status=422)
    assert "dead" in orjson.dumps(err).decode()


def test_the_client_asks_for_dead(client):
    """The client's body goes to the real app (its answer, through the client's parsing)."""
    import httpx

    from glassllm.client import Sandbox
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(orjson.loads(request.content))
        r = client.post("/api/v1/eval", content=request.content, headers=JSON)
        return httpx.Response(r.status_code, content=r.content, headers=dict(r.headers))

    with Sandbox("http://sandbox", transport=httpx.MockTransport(handler)) as sb:
        r = sb.eval(CASE["expression"], CASE["variables"], dead=True)
        plain = sb.eval(CASE["expression"], CASE["variables"])
    assert sent[0]["dead"] is True and "dead" not in sent[1]
    assert {d["variable"] for d in r.dead} == {"w", "v"} and "dead" not in plain.raw
    assert r.dead is r.raw["dead"] and plain.dead is None
