"""Hiding follows the computation (docs/modes.md): in course homework, while exercises that
hide parts of matmul, rms_norm and softmax are open, no route runs a hidden op on numbers
the student chose — under another name (``linear``), inside a composite, in a batch, a
check (``reveal`` true or false), a PyTorch script, a mystery's eval or proof, model
attention on weights of their own — while the lessons and the shipped mysteries keep
answering on their own numbers, and no page or answer shows a hidden rule. Tried as a
student who has not read the code would try it; each way round is a case below."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import subprocess
import sys

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hiding_course import SALT, W, X, bisect, course_dir, exercise_file, rule_texts

from glassllm.course.lesson_requests import LESSONS
from glassllm.course.zoo import mystery as M
from glassllm.layers import GlassConfig, GlassLM
from glassllm.sandbox import registry
from glassllm.sandbox.registry.closure import runners
from glassllm.training.stream import encode_weights
from glassllm_service.app import create_app
from glassllm_service.record.tokens import Keyring
from glassllm_service.routes.contract import pages
from glassllm_service.settings import Settings
from glassllm_service.trained_weights import key_of, sign

SECRET = "h" * 40
STUDENT = {"X-Student-ID": "ada"}
RMS_X = [[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.0, 0.0]]
RMS_W = [1.0, 1.5, 2.0, 0.5]


def app(folder, **settings) -> TestClient:
    return TestClient(create_app(Settings(mode="course", course_salt=SALT,
                                          exercises_dir=str(folder), **settings)))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return app(course_dir(tmp_path_factory.mktemp("course")))


def post(client, path, body, **headers):
    return client.post(path, json=body, headers={**STUDENT, **headers})


def refused(r, exercise, op=None, part="expected"):
    """`r` is the hiding 403, naming `exercise` (and `op`), pointing to no way round."""
    assert r.status_code == 403, r.text[:300]
    err = r.json()["error"]
    assert (err["code"], err["exercise"], err["part"]) == ("hidden_by_exercise", exercise,
                                                          part), err
    if op is not None:
        assert err["op"] == op, err
    assert "reveal" not in err["message"]
    if part == "expected":
        assert f"POST /api/v1/exercises/{exercise}/submit" in err["message"]
    return err


MATMUL_WAYS = [
    ("/api/v1/eval", {"expression": "(x @ w).sum()", "variables": {"x": X, "w": W}}),
    ("/api/v1/eval", {"expression": "linear(x, w).sum()", "variables": {"x": X, "w": W}}),
    ("/api/v1/eval", {"expression": "matmul(x, w)", "variables": {"x": X, "w": W}}),
    ("/api/v1/eval", {"expression": "(w.T @ x.T).T", "variables": {"x": X, "w": W}}),
    ("/api/v1/eval", {"expression": "detach(x) @ w", "variables": {"x": X, "w": W}}),
    ("/api/v1/ops/matmul", {"inputs": {"a": X, "b": W}}),
    ("/api/v1/ops/linear", {"inputs": {"x": X, "weight": W}}),
    ("/api/v1/ops/swiglu", {"inputs": {"x": X, "w1": W, "w2": [[1.0, 0.0, 2.0], [0.5, 1.0, 0.0]],
                                       "w3": W}}),
    ("/api/v1/check", {"op": "linear", "inputs": {"x": X, "weight": W},
                       "claimed": {"grads": {"x": X}}, "reveal": False}),
    ("/api/v1/check", {"expression": "x @ w", "variables": {"x": X, "w": W},
                       "claimed": {"value": [[0.0, 0.0], [0.0, 0.0]]}, "digits": 3}),
    ("/api/v1/torch", {"op": "linear", "inputs": {"x": X, "weight": W}}),
    ("/api/v1/torch", {"expression": "(x @ w).sum()", "variables": {"x": X, "w": W}}),
    ("/api/v1/mysteries/mystery-mlp/eval", {"expression": "(x @ w).sum()",
                                            "variables": {"x": X, "w": W}}),
]


@pytest.mark.parametrize(("path", "body"), MATMUL_WAYS,
                         ids=[f"{p.rsplit('/', 1)[-1]}:{b.get('expression') or b.get('op')}"
                              for p, b in MATMUL_WAYS])
def test_x_at_w_and_linear_on_a_student_s_numbers_are_refused_alike(course, path, body):
    err = refused(post(course, path, body), "mm", "matmul")
    if "linear" in json.dumps(body) and "matmul" not in json.dumps(body):
        assert "through linear" in err["message"]


def test_a_batch_refuses_each_case_that_runs_a_hidden_op_and_answers_the_others(course):
    cases = [{"op": "linear", "inputs": {"x": X, "weight": W}},
             {"expression": "(x @ w).sum()", "variables": {"x": X, "w": W}, "expand": True},
             {"op": "transformer_block", **registry.OPS["transformer_block"].examples[0]
              .request()},
             {"op": "mul", "inputs": {"a": [2.0], "b": [3.0]}},
             {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}}]
    results = post(course, "/api/v1/batch", {"cases": cases}).json()["results"]
    for k in range(3):
        err = results[k]["error"]
        assert (err["code"], err["case"], err["input"]) == ("hidden_by_exercise", k,
                                                            f"cases[{k}]")
    assert results[3]["value"] == [6.0] and results[4]["grads"] == {"x": [2.0, 4.0]}


COMPOSITES = [
    ("/api/v1/ops/transformer_block", registry.OPS["transformer_block"].examples[0].request()),
    ("/api/v1/ops/attention", registry.OPS["attention"].examples[0].request()),
    ("/api/v1/eval", {"expression": "(rms_norm(x, w) * 2.0).sum()",
                      "variables": {"x": RMS_X, "w": RMS_W}, "expand": True}),
    ("/api/v1/eval", {"expression": "rms_norm(x, w).sum()", "variables": {"x": RMS_X, "w": RMS_W},
                      "paths": True, "dead": True}),
]


@pytest.mark.parametrize(("path", "body"), COMPOSITES, ids=["block", "attention", "expand",
                                                            "paths-dead"])
def test_a_hidden_op_inside_a_composite_is_refused(course, path, body):
    """Not served with its value, its gradient or its expansion: refused whole."""
    err = refused(post(course, path, body), "mm" if "attention" in path or "block" in path
                  else "rms")
    assert err["op"] in ("matmul", "rms_norm")


def test_check_is_held_to_what_eval_is_held_to(course):
    """Every check mode on a hidden op is the eval's 403, its message pointing nowhere but
    the exercise; a check that runs no hidden op grades as ever."""
    case = {"op": "rms_norm", "inputs": {"x": RMS_X, "weight": RMS_W}}
    eval_err = refused(post(course, "/api/v1/ops/rms_norm", {"inputs": case["inputs"]}), "rms")
    for extra in ({}, {"reveal": False}, {"reveal": True}, {"digits": 4},
                  {"digits": 2, "reveal": False}, {"atol": 1e3, "rtol": 0.0, "reveal": False}):
        err = refused(post(course, "/api/v1/check", {**case, **extra,
                                                     "claimed": {"grads": {"x": RMS_X}}}), "rms")
        assert err["message"] == eval_err["message"] and err["input"] == "op"
    ok = post(course, "/api/v1/check", {"op": "mul", "inputs": {"a": [2.0], "b": [3.0]},
                                        "claimed": {"value": [6.0]}, "reveal": False})
    assert ok.status_code == 200 and ok.json()["passed"] is True


def test_the_bisection_of_a_hidden_gradient_gets_nothing_but_403s(course, tmp_path):
    """The oracle: 50 checks with ``reveal: false`` and a shrinking ``atol`` recover
    rms_norm's gradient exactly where nothing is hidden; while the exercise is open every
    one of them is the same 403, and nothing of the gradient comes back."""
    case = {"op": "rms_norm", "inputs": {"x": RMS_X, "weight": RMS_W}}
    practice = TestClient(create_app(Settings()))
    truth = np.array(practice.post("/api/v1/ops/rms_norm", json={
        "inputs": case["inputs"]}).json()["grads"]["x"])
    found, answers = bisect(lambda b: practice.post("/api/v1/check", json=b), case, "x",
                            truth.shape)
    assert all(r.status_code == 200 for r in answers) and len(answers) == 50
    assert np.allclose(found, truth, rtol=0, atol=1e-12)          # the attack works
    found, answers = bisect(lambda b: post(course, "/api/v1/check", b), case, "x", truth.shape)
    assert len(answers) == 50 and np.isnan(found).all()
    bodies = {r.content for r in answers}
    assert all(r.status_code == 403 for r in answers) and len(bodies) == 1   # one answer
    assert b"mask" not in bodies.pop()


def test_what_runs_no_hidden_op_is_served_as_ever(course):
    r = post(course, "/api/v1/eval", {"expression": "(tanh(x) * x).sum()",
                                      "variables": {"x": [0.5, -1.0]}, "check": True,
                                      "expand": True, "paths": True, "dead": True})
    assert r.status_code == 200 and r.json()["nodes"][-1]["grad"] is not None
    assert post(course, "/api/v1/ops/silu", {"inputs": {"a": [0.0]}}).json()["grads"] == \
        {"a": [0.5]}
    # the same sum written out of primitives is the student's own derivation, served
    r = post(course, "/api/v1/eval", {"expression": "(x * pow((x * x).mean(axis=-1,"
                                      " keepdims=True) + 1e-6, -0.5) * w).sum()",
                                      "variables": {"x": RMS_X, "w": RMS_W}})
    assert r.status_code == 200


def test_lessons_and_mysteries_stay_served_on_their_own_numbers(course):
    """Hiding an op no longer switches off the shipped lessons and mysteries: every
    lesson is listed and runs as shipped, with its inner gradients; every mystery answers
    its own case, eval and proof, with the student's bug."""
    listed = course.get("/api/v1/lessons").json()["lessons"]
    assert [lesson["id"] for lesson in listed] == [lesson["id"] for lesson in LESSONS]
    for lesson in LESSONS:
        for path in ("/api/v1/eval", "/api/v1/mysteries/mystery-mlp/eval"):
            r = post(course, path, lesson["request"])
            assert r.status_code == 200, (lesson["id"], path, r.text[:200])
            assert all(n["grad"] is not None for n in r.json()["nodes"] if n["requires_grad"])
        for path in ("/api/v1/check", "/api/v1/torch"):
            body = {**lesson["request"], **({"claimed": {"value": 0.0}} if "check" in path
                                            else {})}
            body.pop("paths", None)
            assert post(course, path, body).status_code == 200, (lesson["id"], path)
    assert course.get("/api/v1/mysteries").status_code == 200
    for m in M.load_dir():
        assert course.get(f"/api/v1/mysteries/{m.id}").status_code == 200
        case = {"expression": m.expression, "variables": m.variables}
        r = post(course, f"/api/v1/mysteries/{m.id}/eval", {**case,
                                                            "check": {"modes": ["taylor"]}})
        assert r.status_code == 200, (m.id, r.text[:300])
        proof = post(course, f"/api/v1/mysteries/{m.id}/proof", {"node": 0})
        assert proof.status_code == 200 and "node_right" in proof.json(), m.id
        # a mystery's numbers are public wherever they go: plain eval too
        assert post(course, "/api/v1/eval", case).status_code == 200


RMS_LESSON = next(lesson["request"] for lesson in LESSONS if lesson["id"] == "rms-norm")
MLP = next(m for m in M.load_dir() if m.id == "mystery-mlp")


def _edit(request: dict, how: str) -> dict:
    out = copy.deepcopy(request)
    v = out["variables"]
    first = next(iter(v))
    if how == "a changed number":
        row = v[first]["value"]
        while isinstance(row[0], list):
            row = row[0]
        row[0] += 0.5
    elif how == "an extra variable":
        v["spare"] = {"value": [1.0]}
    elif how == "a changed grad_output":
        out["grad_output"] = 2.0 if "rms" not in out["expression"] else [[1.0, -1.0]]
    elif how == "grad_output ones, given":
        out["grad_output"] = 1.0 if "rms" not in out["expression"] else [[1.0, 1.0]]
    elif how == "a reordered key":
        out["variables"] = dict(reversed(list(v.items())))
    elif how == "a renamed variable":
        v["renamed"] = v.pop(first)
        out["expression"] = out["expression"].replace(f"{first}", "renamed")
    return out


EDITS = ["a changed number", "an extra variable", "a changed grad_output",
         "grad_output ones, given", "a reordered key", "a renamed variable"]


@pytest.mark.parametrize("how", EDITS)
@pytest.mark.parametrize("path", ["/api/v1/eval", "/api/v1/check", "/api/v1/batch",
                                  "/api/v1/mysteries/mystery-mlp/eval"])
def test_a_lesson_edited_is_the_student_s_own(course, path, how):
    """The rms-norm lesson runs rms_norm, which an open exercise hides: as shipped it is
    served; slightly edited it is numbers the student chose, refused like any other."""
    body = _edit(RMS_LESSON, how)
    assert body != RMS_LESSON or how == "a reordered key"
    if path == "/api/v1/check":
        body = {**body, "claimed": {"value": [[0.0, 0.0]]}}
    if path == "/api/v1/batch":
        r = post(course, path, {"cases": [body]})
        assert r.json()["results"][0]["error"]["code"] == "hidden_by_exercise", how
        return
    refused(post(course, path, body), "rms", "rms_norm")


@pytest.mark.parametrize("how", EDITS)
def test_a_mystery_case_edited_is_the_student_s_own(course, how):
    """mystery-mlp runs matmul (and softmax, through cross_entropy), whose numbers open
    exercises hide: its own case answers, the case edited does not, by eval or by
    proof."""
    case = {"expression": MLP.expression, "variables": MLP.variables}
    body = _edit(case, how)
    refused(post(course, "/api/v1/mysteries/mystery-mlp/eval", body), "mm")
    if how == "a changed number":
        first = next(iter(MLP.variables))
        refused(post(course, "/api/v1/mysteries/mystery-mlp/proof",
                     {"node": 0, "variables": {first: body["variables"][first]}}), "mm")


def test_a_lesson_spelled_otherwise_is_still_its_own_numbers(course):
    """The same numbers through the same graph are the lesson's: spaces, a base64 array,
    requires_grad said where it is the default."""
    x = np.array(RMS_LESSON["variables"]["x"]["value"], dtype="<f8")
    same = [{**RMS_LESSON, "expression": RMS_LESSON["expression"].replace(", ", ",")},
            {**RMS_LESSON, "variables": {**RMS_LESSON["variables"], "x": {
                "dtype": "float64", "shape": list(x.shape),
                "base64": base64.b64encode(x.tobytes()).decode()}}},
            {**RMS_LESSON, "variables": {**RMS_LESSON["variables"], "x": {
                **RMS_LESSON["variables"]["x"], "requires_grad": True}}}]
    for body in same:
        assert post(course, "/api/v1/eval", body).status_code == 200, body


def test_a_lesson_s_steps_stay_hidden_and_a_composite_s_at_every_depth(tmp_path):
    """``steps`` is the op's composition, not numbers: a lesson opened with ``expand``
    shows every node but rms_norm's expansion; ``graph_grads`` takes every inner gradient
    out, at every depth of the expansions, with the paths and the dead report."""
    block = registry.OPS["transformer_block"].examples[0]
    names = [i.name for i in registry.OPS["transformer_block"].inputs]
    args = ", ".join(f"{n}={n}" for n in names if n in block.inputs)
    request = {"expression": f"transformer_block({args}).sum()", "expand": True, "paths": True,
               "dead": True, "variables": {n: {"value": v} for n, v in block.inputs.items()
                                           if isinstance(v, list)}}
    request["expression"] = request["expression"].replace("n_heads=n_heads", "n_heads=1") \
        .replace("n_kv_heads=n_kv_heads", "n_kv_heads=1")
    steps = app(course_dir(tmp_path / "steps", {"st": (["steps"], ["rms_norm"],
                                                       "rms_norm(x, weight)",
                                                       {"x": [2, 4], "weight": [4]})}))
    lesson = post(steps, "/api/v1/eval", {**RMS_LESSON, "expand": True}).json()
    node = next(n for n in lesson["nodes"] if n["op"] == "rms_norm")
    assert "expansion" not in node and node["grad"] is not None
    answer = post(steps, "/api/v1/eval", request).json()
    top = next(n for n in answer["nodes"] if n["op"] == "transformer_block")
    inner = [n for n in top["expansion"]["nodes"]]
    assert any(n["op"] == "attention" and "expansion" in n for n in inner)
    assert [n for n in inner if n["op"] == "rms_norm"] and not any(
        "expansion" in n for n in inner if n["op"] == "rms_norm")
    grads = app(course_dir(tmp_path / "grads", {"gg": (["graph_grads"], ["rms_norm"],
                                                       "rms_norm(x, weight)",
                                                       {"x": [2, 4], "weight": [4]})}))
    answer = post(grads, "/api/v1/eval", request).json()
    assert answer["grads"] and "paths" not in answer and "dead" not in answer

    def every_node(result):
        for n in result["nodes"]:
            yield n
            if "expansion" in n:
                assert n["expansion"]["grads"] == {} and "paths" not in n["expansion"]
                yield from every_node(n["expansion"])
    nodes = list(every_node(answer))
    assert len(nodes) > 60 and all(n["grad"] is None for n in nodes)
    assert any("exercise 'gg'" in w for w in answer["warnings"])


@pytest.fixture(scope="module")
def shipped():
    """The shipped exercises in course mode: cross_entropy's and rms_norm's rules hidden."""
    return TestClient(create_app(Settings(mode="course", course_salt=SALT,
                                          shipped_exercises=True)))


@pytest.mark.parametrize(("which", "ops"), [("course", ["matmul", "rms_norm"]),
                                            ("shipped", ["cross_entropy", "rms_norm"])])
def test_no_page_or_answer_shows_a_hidden_rule(course, shipped, which, ops):
    """Every place a rule's text reaches: the op list and each op (every op that runs a
    hidden one: linear's rule is matmul's), /openapi.json, every contract page, the
    lessons' notes, the examples. And the same texts are there when nothing is hidden."""
    client = {"course": course, "shipped": shipped}[which]
    practice = TestClient(create_app(Settings()))
    reached = sorted({r for op in ops for r in runners(op)})
    paths = ["/api/v1/ops", "/openapi.json", "/api/v1/lessons", "/api/v1/examples",
             "/docs/contract/", *[f"/docs/contract/{p}" for p in pages() if p],
             *[f"/api/v1/ops/{op}" for op in reached]]
    texts = [t for op in ops for t in rule_texts(op)]
    seen_before = set()
    for path in paths:
        before, now = practice.get(path).text, client.get(path).text
        assert client.get(path).status_code == 200, path
        seen_before |= {t for t in texts if t in before}
        leaked = [t for t in texts if t in now]
        assert not leaked, (path, leaked)
    assert seen_before == set(texts)            # each text is served when nothing is hidden
    listed = {op["name"]: op for op in client.get("/api/v1/ops").json()["ops"]}
    for op in reached:
        assert listed[op]["vjp"] == {} and listed[op]["hidden_by"]["rule"], op
        assert listed[op]["sum_invariant"] is None and "not shown" in listed[op]["summary"]
    assert listed["tanh"]["vjp"] and "hidden_by" not in listed["tanh"]
    doc = client.get("/openapi.json").json()["paths"]
    assert all("not shown" in doc[f"/api/v1/ops/{op}"]["post"]["summary"] for op in reached)


def test_a_lesson_keeps_its_request_and_loses_only_notes_on_a_hidden_rule(shipped):
    lessons = {lesson["id"]: lesson for lesson in shipped.get("/api/v1/lessons").json()["lessons"]}
    shipped_lessons = {lesson["id"]: lesson for lesson in LESSONS}
    assert lessons.keys() == shipped_lessons.keys()
    for lesson_id, lesson in lessons.items():
        assert lesson["request"] == shipped_lessons[lesson_id]["request"]
        if lesson_id in ("rms-norm", "classifier", "tied-embeddings"):
            assert lesson["notes"][0]["text"].startswith("What to notice here speaks of the"
                                                         " backward rule of") and \
                lesson["hidden_by"]["rule"]
        else:
            assert lesson == shipped_lessons[lesson_id], lesson_id


def _attention(client, weights=None, **headers):
    body = {"prompt": "The cat", **({"weights": weights} if weights else {"seed": 0})}
    return client.post("/api/v1/model/attention", json=body, headers={**STUDENT, **headers})


def test_attention_maps_of_the_student_s_own_weights_are_refused(course):
    """Weights a student writes are numbers they chose, run through matmul, rms_norm and
    softmax: refused; a fresh model from a seed, and the weights one of this course's
    training runs gave back (signed), are not the student's numbers: served."""
    assert _attention(course).status_code == 200
    weights = encode_weights(GlassLM(GlassConfig(d_model=8, n_layers=1, n_heads=2,
                                                 n_kv_heads=1, ffn_hidden=8, max_seq_len=8)))
    assert refused(_attention(course, weights), "mm", "matmul")["input"] == "weights"
    trained = sign(weights, key_of(SALT))
    assert _attention(course, trained).status_code == 200
    forged = copy.deepcopy(trained)
    name = next(iter(forged["tensors"]))
    data = bytearray(base64.b64decode(forged["tensors"][name]["data"]))
    data[0] ^= 1
    forged["tensors"][name]["data"] = base64.b64encode(bytes(data)).decode()
    refused(_attention(course, forged), "mm")
    other_course = sign(weights, key_of("another course's salt"))
    refused(_attention(course, other_course), "mm")


def test_a_training_run_asks_and_runs_on_numbers_no_student_chose(course):
    """A run trains a model the sandbox initialises from a seed: it asks the one place
    what it runs (the model's ops, the fused layers standing for theirs) and is served."""
    from glassllm_service.requests import training_run
    run = training_run.prepare({"steps": 1, "model": {"d_model": 8, "n_layers": 1,
                                                      "n_heads": 2, "n_kv_heads": 1,
                                                      "ffn_hidden": 8, "max_seq_len": 8}},
                               course.app.state.settings)
    uses = run.uses()
    assert {"matmul", "rms_norm", "softmax", "attention", "cross_entropy"} <= uses.ops.keys()
    assert uses.student_chose() is False
    assert course.app.state.course.hide(run) is run
    assert bytes.fromhex(run.kwargs["signing_key"]) == key_of(SALT)


@pytest.fixture(scope="module")
def signed_in(tmp_path_factory):
    root = tmp_path_factory.mktemp("signed")
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    folder = course_dir(root / "exercises")
    (folder / "later.toml").write_text(exercise_file(
        "later", ["expected"], ["tanh"], "tanh(x)", {"x": [3]},
        extra=f"opens = {(now + dt.timedelta(days=2)).isoformat()}\n"
              f"closes = {(now + dt.timedelta(days=9)).isoformat()}\n"), encoding="utf-8")
    client = app(folder, course_secrets=f"k1={SECRET}", data_dir=str(root / "data"))
    ring = Keyring("course", {"k1": SECRET})
    return client, ring.issue("prof", "instructor", days=1), ring.issue("ada", days=1), now


def test_an_instructor_lists_what_is_hidden_now_and_why(signed_in):
    client, prof, ada, now = signed_in
    r = client.get("/api/v1/hidden", headers={"Authorization": f"Bearer {prof}"})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    head = client.head("/api/v1/hidden", headers={"Authorization": f"Bearer {prof}"})
    assert head.status_code == 200 and head.content == b""
    found = r.json()
    assert found["mode"] == "course" and found["hiding"] is True
    assert found["ops"]["matmul"] == {p: ["mm"] for p in ("expected", "finite_differences",
                                                          "graph_grads", "rule", "steps")}
    assert found["ops"]["softmax"] == {"expected": ["sm"], "graph_grads": ["sm"]}
    assert "tanh" not in found["ops"]                       # "later" is not open yet
    by_id = {ex["id"]: ex for ex in found["exercises"]}
    assert by_id["mm"]["reaches"] == ["attention", "linear", "matmul", "swiglu",
                                      "transformer_block"]
    assert by_id["rms"]["hide_ops"] == ["rms_norm"] and by_id["rms"]["closes"] is None
    assert (by_id["later"]["state"], by_id["later"]["hiding"]) == ("not open yet", False)
    at = (now + dt.timedelta(days=3)).isoformat()
    later = client.get("/api/v1/hidden", params={"at": at},
                       headers={"Authorization": f"Bearer {prof}"}).json()
    assert later["ops"]["tanh"] == {"expected": ["later"]}
    assert {ex["id"]: ex["state"] for ex in later["exercises"]}["later"] == "open"
    for headers, status, code in (({"Authorization": f"Bearer {ada}"}, 403, "instructor_only"),
                                  ({}, 401, "unauthorized"),
                                  ({"Authorization": "Bearer nope"}, 401, "invalid_token")):
        r = client.get("/api/v1/hidden", headers=headers)
        assert r.status_code == status, r.text
        assert code is None or r.json()["error"]["code"] == code
    r = client.get("/api/v1/hidden", params={"at": "next tuesday"},
                   headers={"Authorization": f"Bearer {prof}"})
    assert r.status_code == 422 and r.json()["error"]["input"] == "at"


def test_without_course_tokens_the_list_is_the_command_s(course, tmp_path):
    r = course.get("/api/v1/hidden")
    assert r.status_code == 404 and r.json()["error"]["code"] == "no_sign_in"
    folder = course_dir(tmp_path / "exercises")
    env = {"GLASSLLM_MODE": "course", "GLASSLLM_COURSE_SALT": SALT,
           "GLASSLLM_EXERCISES_DIR": str(folder), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "hidden"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "mm (open, always → no end): hides expected, finite_differences, graph_grads," \
        " rule, steps of matmul" in out.stdout
    assert "reaches the requests that run: attention, linear, matmul, swiglu," \
        " transformer_block" in out.stdout
    found = json.loads(subprocess.run(
        [sys.executable, "-m", "glassllm_service.sandbox_cli", "hidden", "--json"], env=env,
        capture_output=True, text=True, timeout=60).stdout)
    assert found["ops"]["rms_norm"]["rule"] == ["rms"]
    bad = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "hidden",
                          "--at", "soon"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr


def test_the_list_of_what_is_hidden_answers_while_the_record_does_not(tmp_path):
    """An instructor's token is held to the revoked tokens the worker last read from the
    record (a revoked one is dead): with PostgreSQL stopped the list still answers from
    the catalogue, never a 500."""
    from postgres_server import running_postgres
    ring = Keyring("course", {"k1": SECRET})
    prof = ring.issue("prof", "instructor", days=1)
    with running_postgres() as url:
        client = app(course_dir(tmp_path / "exercises"), course_secrets=f"k1={SECRET}",
                     database_url=url)
        first = client.get("/api/v1/hidden", headers={"Authorization": f"Bearer {prof}"})
        assert first.status_code == 200
        before = first.json()
    r = client.get("/api/v1/hidden", headers={"Authorization": f"Bearer {prof}"})
    assert r.status_code == 200, r.text
    assert {**r.json(), "at": None} == {**before, "at": None}
    client.app.state.record.close()
