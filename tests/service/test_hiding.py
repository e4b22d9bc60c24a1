"""Hidden means not served by this sandbox (docs/modes.md): while an exercise that hides a
part is open, every route that would serve it is asked for it and serves nothing of it
(a graded session's lock: tests/service/test_graded_session.py)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from fastapi.testclient import TestClient

from glassllm.sandbox import registry
from glassllm_service.app import create_app
from glassllm_service.settings import Settings, SettingsError

RULE = registry.OPS["rms_norm"].vjp             # the text that must not be served
X = [[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, 0.0]]
W = [1.0, 1.5, 2.0, 0.5]


def exercise(folder, hide, opens=None, closes=None, ex_id="rms"):
    folder.mkdir(parents=True, exist_ok=True)
    dates = "".join(f"{k} = {v.isoformat()}\n" for k, v in (("opens", opens), ("closes", closes))
                    if v is not None)
    (folder / f"{ex_id}.toml").write_text(f'''{dates}
id = "{ex_id}"
title = "RMSNorm's backward"
text = "Derive it."
hide = {json.dumps(hide)}
[case]
expression = "rms_norm(x, weight)"
[case.variables.x]
shape = [2, 4]
distribution = "normal"
[case.variables.weight]
value = [1.0, 1.0, 1.0, 1.0]
[answer]
kind = "grads"
grads = ["x", "weight"]
''', encoding="utf-8")
    return folder


def app(folder, **settings) -> TestClient:
    return TestClient(create_app(Settings(mode="course", course_salt="salt",
                                          exercises_dir=str(folder), **settings)))


ALL = ["rule", "steps", "graph_grads", "expected", "finite_differences"]


@pytest.fixture(scope="module")
def hiding(tmp_path_factory):
    return app(exercise(tmp_path_factory.mktemp("all"), ALL))


def served_rule(text: str) -> bool:
    """Whether a page or answer holds rms_norm's rule (the registry's text, or the
    contract's: r³ and the sum over x·weight·g)."""
    return any(rule in text for rule in RULE.values()) or "(d · r³)" in text \
        or "d * r**3" in text


def test_no_route_serves_the_rule_text(hiding):
    for path in ("/api/v1/ops", "/api/v1/ops/rms_norm", "/openapi.json",
                 "/docs/contract/library", "/api/v1/lessons", "/api/v1/examples"):
        r = hiding.get(path)
        assert r.status_code == 200, path
        assert not served_rule(r.text), path
    one = hiding.get("/api/v1/ops/rms_norm").json()
    assert one["vjp"] == {} and one["hidden_by"] == {"rule": ["rms"], "expected": ["rms"]}
    listed = {op["name"]: op for op in hiding.get("/api/v1/ops").json()["ops"]}
    assert listed["rms_norm"]["vjp"] == {} and listed["softmax"]["vjp"]   # only its own op
    assert "not shown while exercise rms is open" in hiding.get("/docs/contract/library").text
    # every lesson stays listed; the rms-norm lesson's notes speak of the rule: left out
    lessons = {lesson["id"]: lesson for lesson in hiding.get("/api/v1/lessons").json()["lessons"]}
    assert len(lessons) == 8 and lessons["rms-norm"]["hidden_by"] == {"rule": ["rms"]}
    assert [n["claims"] for n in lessons["rms-norm"]["notes"]] == [[]]
    assert "hidden_by" not in lessons["neuron"] and len(lessons["neuron"]["notes"]) > 1


def test_no_route_serves_an_example_s_expected_numbers_of_a_hidden_op(tmp_path):
    """The op's own examples and the ready examples that run it keep their request but
    not their expected value and gradients; other ops' examples are whole."""
    from glassllm.sandbox.examples import EXAMPLES, example_runs
    c = app(exercise(tmp_path, ["expected"]))
    one = c.get("/api/v1/ops/rms_norm").json()
    assert one["examples"] and all(e["expected"] == {} for e in one["examples"])
    assert one["hidden_by"] == {"expected": ["rms"]} and one["vjp"]      # the rule is not hidden
    listed = {op["name"]: op for op in c.get("/api/v1/ops").json()["ops"]}
    assert listed["rms_norm"]["examples"] == one["examples"]
    assert all(e["expected"] for e in listed["softmax"]["examples"])
    assert c.get("/api/v1/examples").json()["examples"] == EXAMPLES     # none calls rms_norm
    # an exercise on softmax: the ready example that calls it loses its expected numbers
    folder = tmp_path / "softmax"
    folder.mkdir()
    (folder / "sm.toml").write_text('''id = "sm"
title = "softmax's backward"
text = "Derive it."
hide = ["expected"]
[case]
expression = "softmax(x)"
[case.variables.x]
shape = [2, 3]
distribution = "normal"
[answer]
kind = "grads"
grads = ["x"]
''', encoding="utf-8")
    served = app(folder).get("/api/v1/examples").json()["examples"]
    # softmax_np, log_softmax and cross_entropy run softmax's numbers too
    calling = [e["id"] for e, ops in zip(EXAMPLES, example_runs(), strict=True)
               if "softmax" in ops]
    assert len(calling) == 5
    assert len(served) == len(EXAMPLES) and calling
    for e, got in zip(EXAMPLES, served, strict=True):
        if e["id"] in calling:
            assert got == {**e, "expected": {}, "hidden_by": {"expected": ["sm"]}}
        else:
            assert got == e


def test_no_route_computes_the_expected_numbers(hiding):
    body = {"inputs": {"x": X, "weight": W}}
    refused = [
        hiding.post("/api/v1/ops/rms_norm", json=body),
        hiding.post("/api/v1/eval", json={"expression": "rms_norm(x, w).sum()",
                                          "variables": {"x": X, "w": W}}),
        hiding.post("/api/v1/eval", json={"expression": "(rms_norm(x, w) * 2.0).sum()",
                                          "variables": {"x": X, "w": W}, "expand": True}),
        hiding.post("/api/v1/check", json={"op": "rms_norm", **body,
                                           "claimed": {"grads": {"x": X}}}),
        hiding.post("/api/v1/torch", json={"op": "rms_norm", **body}),   # the script's numbers
    ]
    for r in refused:
        assert r.status_code == 403, r.json()
        err = r.json()["error"]
        assert (err["code"], err["exercise"], err["part"]) == ("hidden_by_exercise", "rms",
                                                              "expected")
        assert "submit" in err["message"]
    batch = hiding.post("/api/v1/batch", json={"cases": [{"op": "rms_norm", **body},
                                                         {"op": "mul", "inputs": {"a": [2.0],
                                                                                  "b": [3.0]}}]})
    first, second = batch.json()["results"]
    assert first["error"]["code"] == "hidden_by_exercise" and first["error"]["case"] == 0
    assert second["value"] == [6.0]                     # the other case is answered
    # a check with reveal false is held to what eval is held to: its verdicts are an oracle
    r = hiding.post("/api/v1/check", json={"op": "rms_norm", **body, "reveal": False,
                                           "digits": 4, "claimed": {"grads": {"x": X}}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "hidden_by_exercise"
    assert "reveal" not in r.json()["error"]["message"]
    # what does not run the op is served as ever
    assert hiding.post("/api/v1/ops/softmax", json={"inputs": {"a": [1.0, 2.0]}}).status_code \
        == 200


@pytest.mark.parametrize("part", ["steps", "graph_grads", "finite_differences"])
def test_each_part_on_its_own(tmp_path, part):
    client = app(exercise(tmp_path, [part]))
    request = {"expression": "(rms_norm(x, w) * 2.0).sum()", "variables": {"x": X, "w": W},
               "expand": True, **({"dead": True} if part == "graph_grads" else {})}
    r = client.post("/api/v1/eval", json={**request, "check": part == "finite_differences"})
    if part == "finite_differences":
        assert r.status_code == 403 and r.json()["error"]["part"] == "finite_differences"
        assert client.post("/api/v1/eval", json=request).status_code == 200
        return
    body = r.json()
    node = next(n for n in body["nodes"] if n["op"] == "rms_norm")
    if part == "steps":
        assert "expansion" not in node and body["nodes"][0]["grad"] is not None
    else:
        assert all(n["grad"] is None for n in body["nodes"]) and "expansion" in node
        assert "dead" not in body                        # read off the inner gradients
    assert any("exercise 'rms'" in w for w in body["warnings"])
    assert body["grads"]                                # the variables' gradients: not hidden


def test_a_closed_exercise_hides_nothing_and_a_future_one_not_yet(tmp_path):
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    closed = app(exercise(tmp_path / "a", ALL, opens=now - dt.timedelta(days=3),
                          closes=now - dt.timedelta(days=1)))
    future = app(exercise(tmp_path / "b", ALL, opens=now + dt.timedelta(days=1)))
    for client in (closed, future):
        assert served_rule(client.get("/api/v1/ops/rms_norm").text)
        assert client.post("/api/v1/ops/rms_norm",
                           json={"inputs": {"x": X, "weight": W}}).status_code == 200


def test_practice_mode_hides_nothing(tmp_path):
    client = TestClient(create_app(Settings(exercises_dir=str(exercise(tmp_path, ALL)))))
    assert served_rule(client.get("/api/v1/ops/rms_norm").text)
    assert client.post("/api/v1/ops/rms_norm", json={"inputs": {"x": X, "weight": W}}) \
        .status_code == 200
    r = client.post("/api/v1/exercises/rms/submit", json={"answers": {"x": X}, "reveal": True})
    assert r.status_code == 200 and "expected" in r.json()["answers"]["x"]


def test_the_course_document_says_the_hiding_routes_answer_403(hiding):
    doc = hiding.get("/openapi.json").json()
    for path in ("/api/v1/eval", "/api/v1/check", "/api/v1/ops/rms_norm"):
        assert "403" in doc["paths"][path]["post"]["responses"], path


# a graded session, a locked room for students: tests/service/test_graded_session.py


def test_a_graded_session_in_practice_mode_is_refused_at_startup():
    with pytest.raises(SettingsError) as info:
        Settings(graded_session=True)
    assert "GLASSLLM_GRADED_SESSION=1" in str(info.value) and "GLASSLLM_MODE=course" in str(
        info.value)


# the grouped attention core's backward as docs/performance.md writes it (its section's
# paragraphs name no op as code: the heading "The attention's core" does)
ATTENTION_BACKWARD = ("ds·k/√dk", "dsᵀ·qg/√dk", "ds = p * (dp − Σ_j dp·p)",
                      "1/√dk folded into its table")


@pytest.mark.parametrize("op", ["attention", "softmax"])
def test_a_section_whose_heading_names_a_hidden_op_loses_its_gradient_prose(tmp_path, op):
    """Hiding softmax's rule hides attention's (attention runs softmax): the performance
    page's sections on the attention core keep their forward prose, not their backward."""
    folder = tmp_path / op
    folder.mkdir()
    (folder / "h.toml").write_text(f'''id = "h"
title = "The backward of {op}"
text = "Derive it."
hide = ["rule"]
hide_ops = ["{op}"]
[case]
expression = "softmax(x)"
[case.variables.x]
shape = [2, 3]
distribution = "normal"
[answer]
kind = "grads"
grads = ["x"]
''', encoding="utf-8")
    (tmp_path / "none").mkdir()
    whole = app(tmp_path / "none").get("/docs/contract/performance").text
    page = app(folder).get("/docs/contract/performance").text
    for text in ATTENTION_BACKWARD:
        assert text in whole, text           # the page without hiding says it
        assert text not in page, text
    assert "not shown while exercise h is open" in page
    assert "are stacked into one" in page            # the forward prose stays
