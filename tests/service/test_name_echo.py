"""A user-supplied name echoed in an error is cut to a few dozen characters (SPEC H4): the
error still names the input — its first characters, then "…" — but never grows with it.
A 200 000-character name used to come back whole, twice (message and ``input``): 400 KB."""

from __future__ import annotations

import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm.errors import NAME_ECHO, echo_name
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

BIG = "x" * 200_000
CUT = "x" * NAME_ECHO + "…"
SMALL = 2048


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(Settings())) as c:
        yield c


def post(client, path: str, body: dict):
    return client.post(path, content=orjson.dumps(body),
                       headers={"Content-Type": "application/json"})


def small_error(r, status: int) -> dict:
    assert r.status_code == status, r.text[:300]
    assert len(r.content) < SMALL, len(r.content)
    body = r.json()
    return body["results"][0]["error"] if "results" in body else body["error"]


def test_echo_name_cuts_long_names_only():
    """H4: a short name is echoed as it is; a long one as its first characters and "…"."""
    assert echo_name("weight") == "weight"
    assert echo_name("y" * NAME_ECHO) == "y" * NAME_ECHO
    assert echo_name(BIG) == CUT and echo_name(BIG, 20) == "x" * 20 + "…"


@pytest.mark.parametrize("path, body, status, input", [
    ("/api/v1/ops/neg", {"inputs": {"a": [1.0]}, "requires_grad": [BIG]}, 422, "requires_grad"),
    ("/api/v1/ops/neg", {"inputs": {"a": [1.0], BIG: 1}}, 422, CUT),
    ("/api/v1/ops/neg", {"inputs": {"a": [1.0]}, BIG: 1}, 422, CUT),
    ("/api/v1/batch", {"cases": [{"op": "neg", "inputs": {"a": [1.0]},
                                  "requires_grad": [BIG]}]}, 200, "requires_grad"),
    ("/api/v1/batch", {"cases": [{"op": "neg", "inputs": {"a": [1.0], BIG: 1}}]}, 200, CUT),
    ("/api/v1/batch", {"cases": [], BIG: 1}, 422, CUT),
    ("/api/v1/eval", {"expression": "x * 1", "variables": {"x": [1.0]}, BIG: 1}, 422, CUT),
    ("/api/v1/check", {"op": "neg", "inputs": {"a": [1.0]}, "claimed": {"grads": {BIG: [1.0]}}},
     422, "claimed.grads." + CUT),
], ids=["ops-requires_grad", "ops-input", "ops-field", "batch-requires_grad", "batch-input",
        "batch-field", "eval-field", "check-claimed-grads"])
def test_a_200k_character_name_gives_a_small_error_that_still_names_it(client, path, body,
                                                                       status, input):
    """H4: the error is under 2 KB, its `input` is the (cut) name, its message repeats it."""
    err = small_error(post(client, path, body), status)
    assert err["status"] == 422 and err["input"] == input, err
    assert CUT in err["message"] and "x" * (NAME_ECHO + 1) not in err["message"]


def test_an_unknown_op_of_5000_characters_is_a_small_404(client):
    """H4: the op name of the path is cut too (60 characters)."""
    r = post(client, "/api/v1/ops/" + "y" * 5000, {"inputs": {"a": [1.0]}})
    err = small_error(r, 404)
    assert err["code"] == "unknown_op" and "y" * 60 + "…" in err["message"]
