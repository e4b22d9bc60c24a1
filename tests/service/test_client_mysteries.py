"""`Sandbox.mysteries`, `.mystery`, `.mystery_eval`, `.prove` and `Result.dead` against a
real sandbox: each answer is the raw route's answer, element for element, read through
the client's types; refusals are the client's errors, naming what was wrong."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from glassllm.apps.client_types import from_wire
from glassllm.client import (
    AsyncSandbox,
    InvalidInputError,
    InvalidURLError,
    Mystery,
    MysteryGrade,
    NotFoundError,
    Sandbox,
)
from glassllm.course.zoo import mystery as M
from glassllm.sandbox.expr import evaluate

pytestmark = pytest.mark.slow

ID = "mystery-mlp"
TAYLOR = {"modes": ["taylor"]}


def raw(url: str, method: str, path: str, body: dict | None = None) -> dict:
    r = httpx.request(method, f"{url}{path}", json=body, timeout=30)
    assert r.status_code == 200, r.text[:600]
    return r.json()


def the_mystery() -> M.Mystery:
    return {x.id: x for x in M.load_dir()}[ID]


def node_of_the_bug(student: str) -> int:
    """The node whose op is `student`'s bug, found as tests/service/test_mysteries.py
    finds it for a right proof (the practice sandbox's default salt)."""
    m = the_mystery()
    bug = M.bug_for(m, student)
    return next(n["id"] for n in evaluate(m.expression, m.variables)["nodes"]
                if n["op"] == bug.op)


def same_arrays(result, answer: dict) -> None:
    """A client Result holds the route's value and gradients, bit for bit, as float64."""
    assert result.value.dtype == np.float64
    assert result.value.tobytes() == from_wire(answer["value"]).tobytes()
    assert set(result.grads) == set(answer["grads"])
    for k, g in result.grads.items():
        assert g.dtype == np.float64 and g.tobytes() == from_wire(answer["grads"][k]).tobytes()


def test_the_list_and_the_case_are_the_routes(url):
    listed = raw(url, "GET", "/api/v1/mysteries")["mysteries"]
    view = raw(url, "GET", f"/api/v1/mysteries/{ID}")
    with Sandbox(url) as sb:
        assert sb.mysteries() == listed and ID in {m["id"] for m in listed}
        case = sb.mystery(ID)
    assert isinstance(case, Mystery) and case.raw == view
    assert (case.id, case.title, case.text, case.points, case.expression) == (
        view["id"], view["title"], view["text"], view["points"], view["expression"])
    assert set(case.variables) == set(view["variables"])
    for name, array in case.variables.items():
        np.testing.assert_array_equal(array, np.asarray(view["variables"][name]["value"]))
    kinds = {k: v.dtype.kind for k, v in case.variables.items()}
    assert kinds == {"x": "f", "w1": "f", "w3": "f", "w2": "f", "c": "b", "t": "i"}
    assert case.variables["x"].dtype == np.float64 and "### " in case._repr_markdown_()


def test_mystery_eval_of_the_case_is_the_routes_answer(url):
    view = raw(url, "GET", f"/api/v1/mysteries/{ID}")
    body = {"expression": view["expression"], "variables": view["variables"],
            "check": TAYLOR, "dead": True}
    answer = raw(url, "POST", f"/api/v1/mysteries/{ID}/eval?student=ada", body)
    real = raw(url, "POST", "/api/v1/eval", body)
    with Sandbox(url) as sb:
        r = sb.mystery_eval(ID, check=TAYLOR, dead=True, student="ada")
    same_arrays(r, answer)
    assert r.raw["nodes"] == answer["nodes"] and r.raw["check"] == answer["check"]
    assert r.dead == answer["dead"] and r.raw["check"]["taylor"]["passed"] is False
    assert answer["grads"] != real["grads"]                # the bug was on: not eval's answer


def test_an_expression_of_ones_own_and_replaced_numbers(url):
    """One op alone under the bug (a student whose bug is tanh's), and the case with x
    replaced: the client's array and the route's JSON list give the same answer."""
    who = next(s for s in (f"s{k}" for k in range(200))
               if M.bug_for(the_mystery(), s).op == "tanh")
    z = np.array([0.5, -1.0, 2.0])
    mine = raw(url, "POST", f"/api/v1/mysteries/{ID}/eval?student={who}",
               {"expression": "tanh(z).sum()", "variables": {"z": z.tolist()}})
    view = raw(url, "POST", "/api/v1/eval", {"expression": "tanh(z).sum()",
                                              "variables": {"z": z.tolist()}})
    case = raw(url, "GET", f"/api/v1/mysteries/{ID}")
    x = np.asarray(case["variables"]["x"]["value"]) * 1.5
    replaced = raw(url, "POST", f"/api/v1/mysteries/{ID}/eval?student={who}", {
        "expression": case["expression"],
        "variables": {**case["variables"], "x": x.tolist()}})
    with Sandbox(url) as sb:
        r = sb.mystery_eval(ID, "tanh(z).sum()", {"z": z}, student=who)
        same_arrays(r, mine)
        assert mine["grads"] != view["grads"]
        same_arrays(sb.mystery_eval(ID, variables={"x": x}, student=who), replaced)


def test_the_student_defaults_to_glassllm_student(url, monkeypatch):
    """Without student=, $GLASSLLM_STUDENT's bug: cy's (tanh's) differs from ada's."""
    assert M.bug_for(the_mystery(), "cy").id != M.bug_for(the_mystery(), "ada").id
    with Sandbox(url) as sb:
        cy, ada = (sb.mystery_eval(ID, student=s) for s in ("cy", "ada"))
        monkeypatch.setenv("GLASSLLM_STUDENT", "cy")
        default = sb.mystery_eval(ID)
    assert all(np.array_equal(default.grads[k], cy.grads[k]) for k in cy.grads)
    assert not all(np.array_equal(default.grads[k], ada.grads[k]) for k in ada.grads)


def test_result_dead_is_the_reports(url):
    case = {"expression": "relu(x @ w).sum() + detach(v).sum()",
            "variables": {"x": [[1.0, -1.0]], "w": [[1.0, -1.0], [0.5, 1.0]], "v": [1.0, 2.0]}}
    answer = raw(url, "POST", "/api/v1/eval", {**case, "dead": True})
    with Sandbox(url) as sb:
        r = sb.eval(case["expression"], case["variables"], dead=True)
        plain = sb.eval(case["expression"], case["variables"])
    assert r.dead == answer["dead"] == r.raw["dead"]
    assert {d["variable"] for d in r.dead} == {"w", "v"}
    assert plain.dead is None


@pytest.mark.parametrize("base64_min", [1, 10**9], ids=["base64", "json"])
def test_a_right_proof_scores_what_the_route_scores(url, base64_min):
    """The bug's node and numbers on which the Taylor test fails under the bug (the
    case's, x scaled): the client's arrays, in either wire form, grade as the route's
    JSON does — 4 of 4; a node of another op gets the input's half only."""
    right = node_of_the_bug("ada")
    case = raw(url, "GET", f"/api/v1/mysteries/{ID}")
    x = np.asarray(case["variables"]["x"]["value"]) * 1.5
    answer = raw(url, "POST", f"/api/v1/mysteries/{ID}/proof?student=ada",
                 {"node": right, "variables": {"x": x.tolist()}})
    nodes = evaluate(case["expression"], case["variables"])["nodes"]
    other = next(n["id"] for n in nodes if n["op"] not in (
        M.bug_for(the_mystery(), "ada").op, "variable"))
    wrong = raw(url, "POST", f"/api/v1/mysteries/{ID}/proof?student=ada", {"node": other})
    with Sandbox(url, base64_min=base64_min) as sb:
        variables = {**sb.mystery(ID).variables, "x": x}       # c and t go back as they came
        g = sb.prove(ID, right, variables, student="ada")
        by_text = sb.prove(ID, nodes[right]["text"], {"x": x}, student="ada")
        w = sb.prove(ID, other, student="ada")
    assert isinstance(g, MysteryGrade) and g.raw == answer == by_text.raw
    assert (g.mystery, g.node_right, g.input_exposes, g.score, g.points) == (
        ID, True, True, 4.0, 4.0) == (answer["mystery"], answer["node_right"],
                                      answer["input_exposes"], answer["score"],
                                      answer["points"])
    assert g.orders == answer["orders"] and g.message == answer["message"]
    assert (w.node_right, w.score) == (False, 2.0) == (wrong["node_right"], wrong["score"])
    assert "4 of 4 points" in g._repr_markdown_()


def test_refusals_are_the_clients_errors_naming_what_was_wrong(url):
    with Sandbox(url) as sb:
        for call in (lambda: sb.mystery("no-such"),
                     lambda: sb.mystery_eval("no-such", "x.sum()", {"x": [1.0]}),
                     lambda: sb.mystery_eval("no-such"),
                     lambda: sb.prove("no-such", 1)):
            with pytest.raises(NotFoundError) as info:
                call()
            assert info.value.code == "unknown_mystery" and "'no-such'" in str(info.value)
            assert "/api/v1/mysteries/no-such" in info.value.url
        with pytest.raises(NotFoundError) as info:     # a dot segment stays an id
            sb.mystery("..")
        assert info.value.url.endswith("/api/v1/mysteries/%2E%2E")
        with pytest.raises(InvalidInputError) as info:
            sb.prove(ID, 999, student="ada")
        assert (info.value.code, info.value.input) == ("invalid_proof", "node")
        with pytest.raises(InvalidInputError) as info:
            sb.prove(ID, 1, {"nope": [1.0]}, student="ada")
        assert (info.value.code, info.value.input) == ("invalid_proof", "variables")
        with pytest.raises(InvalidInputError) as info:
            sb.mystery_eval(ID, student="not a student id")
        assert info.value.code == "invalid_student"
        with pytest.raises(TypeError, match="node must be"):
            sb.prove(ID, 1.5)
        with pytest.raises(TypeError, match="variables must be"):
            sb.prove(ID, 1, [1.0])


def test_the_async_client_gives_the_same_answers(url):
    right = node_of_the_bug("ada")

    async def go():
        async with AsyncSandbox(url) as sb:
            listed = await sb.mysteries()
            r = await sb.mystery_eval(ID, check=TAYLOR, dead=True, student="ada")
            g = await sb.prove(ID, right, student="ada")
            with pytest.raises(NotFoundError):
                await sb.mystery("no-such")
            return listed, r, g

    listed, r, g = asyncio.run(go())
    with Sandbox(url) as sb:
        assert listed == sb.mysteries()
        same = sb.mystery_eval(ID, check=TAYLOR, dead=True, student="ada")
        assert g == sb.prove(ID, right, student="ada")
    assert r.value.tobytes() == same.value.tobytes() and r.dead == same.dead
    assert all(r.grads[k].tobytes() == same.grads[k].tobytes() for k in same.grads)
    assert (g.node_right, g.input_exposes, g.score) == (True, True, 4.0)


def test_the_cases_variables_are_checked_and_an_empty_or_long_id_never_sent(url):
    """Without an expression a variable the case lacks (a typo) is refused, naming it and
    the case's variables, as prove's 422 refuses it, never the case run unchanged; an empty
    id is refused before the list route's redirect; an id too long for a URL is the client's
    InvalidURLError, not httpx's. Sync and async alike."""
    names = list(raw(url, "GET", f"/api/v1/mysteries/{ID}")["variables"])
    typo = f"variables\\['zz'\\]: the case of '{ID}' has no such variable; its variables" \
           f" are {', '.join(names)}"

    async def go():
        async with AsyncSandbox(url) as sb:
            with pytest.raises(ValueError, match=typo):
                await sb.mystery_eval(ID, variables={"zz": [1.0]}, student="ada")
            with pytest.raises(ValueError, match="mystery_id must not be empty"):
                await sb.mystery("")
            with pytest.raises(InvalidURLError, match="URL too long"):
                await sb.mystery("a" * 70_000)
    asyncio.run(go())
    with Sandbox(url) as sb:
        with pytest.raises(ValueError, match=typo):
            sb.mystery_eval(ID, variables={"zz": [1.0]}, student="ada")
        with pytest.raises(InvalidInputError) as info:       # the route refuses the same
            sb.prove(ID, 1, {"zz": [1.0]}, student="ada")
        assert info.value.input == "variables"
        for call in (lambda: sb.mystery(""), lambda: sb.mystery_eval(""),
                     lambda: sb.prove("", 1)):
            with pytest.raises(ValueError, match="mystery_id must not be empty"):
                call()
        for call in (lambda: sb.mystery("a" * 70_000), lambda: sb.prove("a" * 70_000, 1)):
            with pytest.raises(InvalidURLError, match="URL too long"):
                call()
        x = sb.mystery(ID).variables["x"]
        assert sb.mystery_eval(ID, variables={"x": x}, student="ada").value.shape == ()
