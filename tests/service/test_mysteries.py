"""Mystery mode over HTTP: the list and a mystery's case (never its bug), an evaluation
with the student's bug switched on for that request only — the next plain eval in the
same worker is the real one — and a proof graded; refusals name the field."""

from __future__ import annotations

import orjson
import pytest
from fastapi.testclient import TestClient

from glassllm.course.zoo import BUGS
from glassllm.course.zoo import mystery as M
from glassllm.sandbox.expr import evaluate
from glassllm_service.app import create_app
from glassllm_service.settings import Settings

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def post(client, path, body, status=200, **headers):
    r = client.post(path, content=orjson.dumps(body), headers={**JSON, **headers})
    assert r.status_code == status, r.text[:600]
    return r.json()


def test_the_list_and_a_case_never_show_the_bug(client):
    ids = [m["id"] for m in client.get("/api/v1/mysteries").json()["mysteries"]]
    assert "mystery-mlp" in ids
    text = client.get("/api/v1/mysteries/mystery-mlp?student=ada").text
    assert not any(b.id in text for b in BUGS) and '"bugs"' not in text
    assert client.get("/api/v1/mysteries/no-such").json()["error"]["code"] == "unknown_mystery"


def test_the_bug_is_on_for_the_mystery_request_only(client):
    view = client.get("/api/v1/mysteries/mystery-mlp").json()
    case = {"expression": view["expression"], "variables": view["variables"]}
    real = evaluate(**case)
    m = {x.id: x for x in M.load_dir()}["mystery-mlp"]
    under = post(client, "/api/v1/mysteries/mystery-mlp/eval", {**case, "check": {
        "modes": ["taylor"]}}, **{"X-Student-ID": "ada"})
    expected = M.evaluate(m, "ada", expression=case["expression"], variables=case["variables"])
    assert under["grads"] == expected["grads"] != real["grads"]
    assert under["value"] == real["value"] and under["check"]["taylor"]["passed"] is False
    after = post(client, "/api/v1/eval", case)               # the same worker, no bug
    assert after["grads"] == real["grads"]


def test_a_proof_is_graded(client):
    m = {x.id: x for x in M.load_dir()}["mystery-mlp"]
    bug = M.bug_for(m, "ada")
    nodes = evaluate(m.expression, m.variables)["nodes"]
    right = next(n["id"] for n in nodes if n["op"] == bug.op)
    graded = post(client, "/api/v1/mysteries/mystery-mlp/proof?student=ada", {"node": right})
    assert (graded["node_right"], graded["input_exposes"], graded["score"]) == (True, True, 4.0)
    other = next(n["id"] for n in nodes if n["op"] not in (bug.op, "variable"))
    assert post(client, "/api/v1/mysteries/mystery-mlp/proof", {"node": other, "student": "ada"}
                )["node_right"] is False
    err = post(client, "/api/v1/mysteries/mystery-mlp/proof?student=ada", {"node": 999}, 422)
    assert err["error"]["input"] == "node"
    err = post(client, "/api/v1/mysteries/mystery-mlp/proof?student=ada", {"nod": 1}, 422)
    assert err["error"]["code"] == "invalid_proof"


def test_a_course_sandbox_needs_the_student():
    c = TestClient(create_app(Settings(mode="course", course_salt="a-secret-salt-of-the-course")))
    err = post(c, "/api/v1/mysteries/mystery-mlp/proof", {"node": 1}, 422)
    assert err["error"]["code"] == "student_required"


def test_an_exercise_that_hides_an_op_of_the_case_closes_its_eval_and_its_proof(tmp_path):
    """While an open exercise hides sigmoid's expected numbers, the mystery still answers
    on its own case (its numbers are in the repository), and its eval and its proof on
    numbers the student chose (one number changed, a variable replaced) are refused,
    naming the exercise: the proof's Taylor tests compute the gradients the eval would."""
    (tmp_path / "sig.toml").write_text('''id = "sig"
title = "sigmoid's backward"
text = "Derive it."
hide = ["expected"]
[case]
expression = "sigmoid(x)"
[case.variables.x]
shape = [3]
distribution = "normal"
[answer]
kind = "grads"
grads = ["x"]
''', encoding="utf-8")
    c = TestClient(create_app(Settings(mode="course", course_salt="salt",
                                       exercises_dir=str(tmp_path))))
    m = {x.id: x for x in M.load_dir()}["mystery-mlp"]
    body = {"expression": m.expression, "variables": m.variables}
    served = post(c, "/api/v1/mysteries/mystery-mlp/eval?student=ada", body)
    inner = [n for n in served["nodes"] if n["op"] == "sigmoid"]
    assert served["grads"] and inner and all(n["grad"] is not None for n in inner)
    assert post(c, "/api/v1/mysteries/mystery-mlp/proof?student=ada", {"node": 1})["points"]
    x = [[v + 0.25 for v in row] for row in m.variables["x"]["value"]]
    edited = {**body, "variables": {**m.variables, "x": {"value": x}}}
    for path, sent in (("eval", edited), ("proof", {"node": 1, "variables": {"x": x}})):
        err = post(c, f"/api/v1/mysteries/mystery-mlp/{path}?student=ada", sent, 403)
        assert (err["error"]["code"], err["error"]["exercise"]) == ("hidden_by_exercise", "sig")
