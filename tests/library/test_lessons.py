"""Every sentence of every lesson is checked against the numbers the lesson produces: the
claims live beside the text in glassllm/course/lesson_requests.py."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from glassllm.course.lesson_requests import LESSONS
from glassllm.sandbox.expr import evaluate
from glassllm.sandbox.wire import coerce
from glassllm_service.app import create_app

TOL = 1e-9
NEEDED = {"neuron", "classifier", "attention-head", "rms-norm", "rope", "swiglu",
          "tied-embeddings", "residual"}


def edges(result: dict, text: str) -> list[tuple[str, dict]]:
    """The paths of the node written `text`: (consumer text, edge)."""
    texts = {n["id"]: n["text"] for n in result["nodes"]}
    (entry,) = [p for p in result["paths"] if texts[p["node"]] == text]
    return [(texts[e["consumer"]], e) for e in entry["edges"]]


def read(result: dict, path: str):
    if path.startswith("paths:") and "|" not in path:
        return None
    if path.startswith("paths:"):
        shared, rest = path[6:].split("|", 1)
        consumer, field = rest.rsplit(".", 1)
        found = [e for text, e in edges(result, shared) if text == consumer]
        assert found, f"no path from {shared!r} to {consumer!r}"
        raw = found[0][field]
    elif path.startswith("node:"):
        text, field = path[5:].rsplit(".", 1)
        nodes = [n for n in result["nodes"] if n["text"] == text]
        assert len(nodes) >= 1, f"no node {text!r}"
        raw = nodes[0][field]
    elif path.startswith("grads."):
        raw = result["grads"][path[6:]]
    else:
        raw = result[path]
    return None if raw is None else np.asarray(coerce("array", path, raw), dtype=float)


def check(result: dict, claim: dict) -> None:
    arr = read(result, claim["path"])
    kind = claim["kind"]
    if kind == "none":
        assert arr is None, f"{claim['path']} should have no gradient"
        return
    if kind == "adds_up":
        shared = claim["path"][6:]
        parts = [np.asarray(coerce("array", "part", e["grad"])) for _, e in edges(result, shared)]
        total = read(result, f"node:{shared}.grad")
        bound = 2 * (len(parts) - 1) * 2.0 ** -53 * sum(np.abs(p) for p in parts)
        assert len(parts) >= 2 and np.all(np.abs(sum(parts) - total) <= bound), claim
        return
    assert arr is not None, claim["path"]
    if "at" in claim:
        arr = arr[tuple(claim["at"])]
    where = np.asarray(claim.get("where", True), dtype=bool)
    if kind == "approx":
        np.testing.assert_allclose(arr, claim["expect"], rtol=TOL, atol=TOL)
    elif kind == "zero":
        assert np.all(np.broadcast_to(arr, where.shape)[where] == 0.0) if where.ndim else \
            np.all(arr == 0.0), (claim, arr)
    elif kind == "nonzero":
        assert np.all(np.broadcast_to(arr, where.shape)[where] != 0.0) if where.ndim else \
            np.all(arr != 0.0), (claim, arr)
    elif kind == "sum":
        np.testing.assert_allclose(arr.sum(axis=claim.get("axis")), claim["expect"],
                                   rtol=TOL, atol=TOL)
    elif kind == "dot":
        other = read(result, claim["with"])
        assert abs(float(np.sum(arr * other)) - claim["expect"]) < TOL
    elif kind == "norm":
        assert abs(float(np.linalg.norm(arr)) - claim["expect"]) < TOL
    else:
        raise AssertionError(f"unknown claim kind {kind!r}")


def test_the_lessons_are_all_there():
    assert {lesson["id"] for lesson in LESSONS} == NEEDED


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson["id"] for lesson in LESSONS])
def test_every_sentence_holds_for_the_lessons_numbers(lesson):
    result = evaluate(**lesson["request"])
    assert 2 <= len(lesson["notes"]) <= 3
    for note in lesson["notes"]:
        assert note["text"].endswith(".") and note["claims"], note["text"]
        for claim in note["claims"]:
            check(result, claim)


def test_a_wrong_claim_fails():
    result = evaluate(**LESSONS[0]["request"])
    with pytest.raises(AssertionError):
        check(result, {"path": "grads.b", "kind": "approx", "expect": 0.25})
    with pytest.raises(AssertionError):
        check(result, {"path": "grads.x1", "kind": "zero"})
    tied = evaluate(**next(x for x in LESSONS if x["id"] == "tied-embeddings")["request"])
    with pytest.raises(AssertionError):
        check(tied, {"path": "paths:w|w.T.grad", "kind": "zero"})
    with pytest.raises(AssertionError):
        check(tied, {"path": "paths:w|embedding(w, ids).grad", "kind": "nonzero"})


def test_the_lessons_route_serves_them():
    body = TestClient(create_app()).get("/api/v1/lessons").json()
    assert [lesson["id"] for lesson in body["lessons"]] == [lesson["id"] for lesson in LESSONS]
    assert body["lessons"][0]["notes"][0]["text"] == LESSONS[0]["notes"][0]["text"]
