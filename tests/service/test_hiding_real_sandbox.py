"""Hiding follows the computation on a real sandbox (two workers, course homework, three
hiding exercises open): the main ways round, over HTTP as a student sends them — matmul
under its own name, as ``linear`` and inside a block; the check bisection; a lesson and
a mystery as shipped and edited; the rule on the page's data; the Train view's own
weights and weights of the student's."""

from __future__ import annotations

import copy
import sys

import httpx
import numpy as np
import pytest
from hiding_course import SALT, W, X, bisect, course_dir, rule_texts
from sandbox_server import running_sandbox
from training_streams import RUN, parse_sse

from glassllm.course.lesson_requests import LESSONS
from glassllm.course.zoo import mystery as M
from glassllm.sandbox import registry

pytestmark = pytest.mark.slow
STUDENT = {"X-Student-ID": "ada"}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    env = {"GLASSLLM_MODE": "course", "GLASSLLM_COURSE_SALT": SALT,
           "GLASSLLM_EXERCISES_DIR": str(course_dir(root / "exercises")),
           "GLASSLLM_DATA_DIR": str(root / "data"), "GLASSLLM_ACCESS_LOG": "0",
           "GLASSLLM_MAX_TRAIN_STEPS": "8", "GLASSLLM_MAX_TRAIN_SECONDS": "60"}
    command = [sys.executable, "-m", "glassllm_service.sandbox_cli", "--workers", "2"]
    with running_sandbox(env=env, command=command) as served:
        yield served


def code(r: httpx.Response) -> tuple[int, str | None, str | None]:
    """The status, and a refusal's code and exercise."""
    err = r.json()["error"] if r.status_code != 200 else {}
    return r.status_code, err.get("code"), err.get("exercise")


def test_matmul_is_refused_under_every_name_and_the_rest_is_served(url):
    with httpx.Client(base_url=url, headers=STUDENT, timeout=30) as c:
        for path, body in (
                ("/api/v1/eval", {"expression": "(x @ w).sum()", "variables": {"x": X, "w": W}}),
                ("/api/v1/eval", {"expression": "linear(x, w).sum()",
                                  "variables": {"x": X, "w": W}}),
                ("/api/v1/ops/linear", {"inputs": {"x": X, "weight": W}}),
                ("/api/v1/ops/transformer_block",
                 registry.OPS["transformer_block"].examples[0].request()),
                ("/api/v1/torch", {"op": "matmul", "inputs": {"a": X, "b": W}}),
                ("/api/v1/check", {"op": "linear", "inputs": {"x": X, "weight": W},
                                   "claimed": {"value": [[0.0, 0.0], [0.0, 0.0]]},
                                   "reveal": False})):
            assert code(c.post(path, json=body)) == (403, "hidden_by_exercise", "mm"), path
        r = c.post("/api/v1/eval", json={"expression": "(x * x).sum()",
                                         "variables": {"x": [1.0, 2.0]}})
        assert r.json()["grads"] == {"x": [2.0, 4.0]}


def test_the_check_bisection_gets_nothing_but_403s_over_http(url):
    case = {"op": "rms_norm", "inputs": {"x": [[1.0, 2.0, 3.0, 4.0]], "weight": [1.0] * 4}}
    with httpx.Client(base_url=url, headers=STUDENT, timeout=30) as c:
        found, answers = bisect(lambda b: c.post("/api/v1/check", json=b), case, "x", (1, 4))
    assert len(answers) == 50 and np.isnan(found).all()
    assert {code(r) for r in answers} == {(403, "hidden_by_exercise", "rms")}
    assert len({r.content for r in answers}) == 1


def test_lessons_and_mysteries_as_shipped_answer_and_edited_do_not(url):
    lesson = next(x["request"] for x in LESSONS if x["id"] == "rms-norm")
    edited = copy.deepcopy(lesson)
    edited["variables"]["x"]["value"][0][0] += 1.0
    m = next(x for x in M.load_dir() if x.id == "mystery-attention")
    case = {"expression": m.expression, "variables": m.variables}
    moved = {**case, "variables": dict(reversed(list(m.variables.items())))}
    with httpx.Client(base_url=url, headers=STUDENT, timeout=30) as c:
        assert len(c.get("/api/v1/lessons").json()["lessons"]) == len(LESSONS)
        for request in (x["request"] for x in LESSONS):
            assert c.post("/api/v1/eval", json=request).status_code == 200
        assert code(c.post("/api/v1/eval", json=edited)) == (403, "hidden_by_exercise", "rms")
        hunt = f"/api/v1/mysteries/{m.id}/eval"
        assert c.post(hunt, json=case).status_code == 200
        assert c.post(f"/api/v1/mysteries/{m.id}/proof", json={"node": 3}).status_code == 200
        assert code(c.post(hunt, json=moved))[:2] == (403, "hidden_by_exercise")


def test_the_page_s_data_shows_no_hidden_rule(url):
    with httpx.Client(base_url=url, timeout=30) as c:
        for path in ("/api/v1/ops", "/api/v1/ops/linear", "/api/v1/ops/rms_norm",
                     "/openapi.json", "/docs/contract/library", "/docs/contract/mystery",
                     "/docs/contract/http", "/api/v1/lessons"):
            text = c.get(path).text
            leaked = [t for op in ("matmul", "rms_norm") for t in rule_texts(op) if t in text]
            assert not leaked, (path, leaked)
        assert c.get("/api/v1/ops/tanh").json()["vjp"] == {"a": "g * (1 - out**2)"}


def test_the_train_view_s_weights_are_the_sandbox_s_own_and_the_student_s_are_not(url):
    """A run's done event carries weights signed by this course: the attention panel
    asks with them and is answered; the same weights with one number changed are the
    student's, refused while matmul is hidden; a fresh model by seed is answered."""
    with httpx.Client(base_url=url, headers=STUDENT, timeout=120) as c:
        with c.stream("POST", "/api/v1/train", json=RUN) as stream:
            events = parse_sse(stream.iter_lines())
        done = dict(events)["done"]["weights"]
        assert len(done["signature"]) == 64
        asked = c.post("/api/v1/model/attention", json={"prompt": "The", "weights": done})
        assert asked.status_code == 200 and asked.json()["shape"][0] == RUN["model"]["n_layers"]
        tampered = copy.deepcopy(done)
        tampered["config"]["rope_theta"] = 5000.0
        r = c.post("/api/v1/model/attention", json={"prompt": "The", "weights": tampered})
        assert code(r) == (403, "hidden_by_exercise", "mm")
        assert c.post("/api/v1/model/attention", json={"prompt": "The", "seed": 1}
                      ).status_code == 200
