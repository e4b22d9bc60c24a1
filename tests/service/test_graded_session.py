"""A graded session is a locked room (docs/modes.md#graded-sessions, docs/integrity.md): a
student's token, the shared token or no token reaches the exercises, the sign-in, the
health probes and the page; every other route of the app answers 403
off_in_graded_session; an instructor's token reaches everything. Each route of the app is
placed here (a new one fails `test_every_route_of_the_app_is_placed`). A graded session
without course secrets does not start. The same against a real sandbox of two workers,
with SQLite and PostgreSQL: tests/record/test_revocation.py."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
from app_routes import app_routes
from fastapi.testclient import TestClient
from record_course import SALT, SECRETS, answers, course_dir, keyring
from sandbox_server import ROOT, free_port

from glassllm.sandbox import registry
from glassllm_service.app import create_app
from glassllm_service.settings import Settings, SettingsError

EX = "/api/v1/exercises/ce-record"
LESSON = "rms-norm"
SHARED = "the-shared-token"
CASE = {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}}
BAD_TRAIN = {"steps": 0}                    # refused after access: 422, nothing trained

# Every route of the app: a request to it, and what a student reaches in a graded session
# (on: anything but 403 off_in_graded_session). A route the app gains must be placed here.
ROUTES: dict[tuple[str, str], tuple[str, object, bool]] = {
    ("GET", "/"): ("/", None, True),
    ("GET", "/static/{path}"): ("/static/js/main.js", None, True),
    ("GET", "/docs"): ("/docs", None, True),
    ("GET", "/docs-assets/{path}"): ("/docs-assets/swagger-ui.css", None, True),
    ("GET", "/openapi.json"): ("/openapi.json", None, True),
    ("GET", "/healthz"): ("/healthz", None, True),
    ("GET", "/readyz"): ("/readyz", None, True),
    ("GET", "/metrics"): ("/metrics", None, True),
    ("GET", "/api/v1/session"): ("/api/v1/session", None, True),
    ("POST", "/api/v1/session"): ("/api/v1/session", "token", True),
    ("DELETE", "/api/v1/session"): ("/api/v1/session", None, True),
    ("GET", "/api/v1/exercises"): ("/api/v1/exercises", None, True),
    ("GET", "/api/v1/exercises/{exercise_id}"): (EX, None, True),
    ("POST", "/api/v1/exercises/{exercise_id}/submit"): (f"{EX}/submit", "answers", True),
    ("POST", "/api/v1/exercises/{exercise_id}/hints"): (f"{EX}/hints", {}, True),
    ("GET", "/api/v1/record/attempts"): ("/api/v1/record/attempts", None, True),
    ("GET", "/api/v1/record/gradebook.{fmt}"): ("/api/v1/record/gradebook.csv", None, True),
    # off: what computes, shows a rule, or hands out the library
    ("POST", "/api/v1/ops/{name}"): ("/api/v1/ops/neg", {"inputs": {"a": [1.0]}}, False),
    ("GET", "/api/v1/ops"): ("/api/v1/ops", None, False),
    ("GET", "/api/v1/ops/{name}"): ("/api/v1/ops/rms_norm", None, False),
    ("POST", "/api/v1/eval"): ("/api/v1/eval", {**CASE, "check": True}, False),
    ("POST", "/api/v1/check"): ("/api/v1/check", {
        "op": "neg", "inputs": {"a": [1.0]}, "claimed": {"value": [-1.0]}}, False),
    ("POST", "/api/v1/batch"): ("/api/v1/batch", {"cases": [CASE]}, False),
    ("POST", "/api/v1/torch"): ("/api/v1/torch", CASE, False),
    ("POST", "/api/v1/train"): ("/api/v1/train", BAD_TRAIN, False),
    ("POST", "/api/v1/model/attention"): ("/api/v1/model/attention",
                                          {"prompt": "ab", "seed": 0}, False),
    ("GET", "/api/v1/examples"): ("/api/v1/examples", None, False),
    ("GET", "/api/v1/hidden"): ("/api/v1/hidden", None, False),     # instructors' only
    ("GET", "/api/v1/lessons"): ("/api/v1/lessons", None, False),
    ("GET", "/api/v1/mysteries"): ("/api/v1/mysteries", None, False),
    ("GET", "/api/v1/mysteries/{mystery_id}"): ("/api/v1/mysteries/mystery-mlp", None, False),
    ("POST", "/api/v1/mysteries/{mystery_id}/eval"): ("/api/v1/mysteries/mystery-mlp/eval",
                                                      "mystery", False),
    ("POST", "/api/v1/mysteries/{mystery_id}/proof"): ("/api/v1/mysteries/mystery-mlp/proof",
                                                       {"node": 1}, False),
    ("GET", "/docs/contract"): ("/docs/contract", None, False),
    ("GET", "/docs/contract/"): ("/docs/contract/", None, False),
    ("GET", "/docs/contract/{page}"): ("/docs/contract/library", None, False),
    ("GET", "/dist/"): ("/dist/", None, False),
    ("GET", "/dist/{filename}"): ("/dist/glassllm-0.1.0-py3-none-any.whl", None, False),
    ("GET", "/simple/"): ("/simple/", None, False),
    ("GET", "/simple/{project}"): ("/simple/glassllm", None, False),
    ("GET", "/simple/{project}/"): ("/simple/glassllm/", None, False),
    ("GET", "/simple/{project}/{filename}"): ("/simple/glassllm/glassllm-0.1.0-py3-none-any.whl",
                                              None, False),
}
STUDENTS_PATHS = {"/api/v1/exercises", "/api/v1/exercises/{exercise_id}",
                  "/api/v1/exercises/{exercise_id}/submit",
                  "/api/v1/exercises/{exercise_id}/hints", "/api/v1/record/attempts",
                  "/api/v1/record/gradebook.{fmt}", "/api/v1/session", "/healthz",
                  "/readyz", "/metrics"}


def settings(root, **more) -> Settings:
    return Settings(mode="course", graded_session=True, course_salt=SALT,
                    course_secrets=SECRETS, exercises_dir=course_dir(root),
                    data_dir=root / "data", api_token=SHARED, **more)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("graded")
    client = TestClient(create_app(settings(root)))
    client.root = root
    return client


def bearer(token: str | None) -> dict:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


def send(client, method: str, path: str, body: object, token: str | None, student="ada"):
    if body == "token":
        body = {"token": token or "none"}
    elif body == "answers":
        body = {"answers": answers(client.root, student)}
    elif body == "mystery":
        view = client.get("/api/v1/mysteries/mystery-mlp",
                          headers=bearer(keyring().issue("prof", "instructor", days=1)))
        body = {k: view.json()[k] for k in ("expression", "variables")}
    client.cookies.clear()
    return client.request(method, path, json=body if method == "POST" else None,
                          headers=bearer(token))


def is_off(r) -> bool:
    return r.status_code == 403 and r.json()["error"]["code"] == "off_in_graded_session"


def test_every_route_of_the_app_is_placed(graded):
    assert app_routes(graded.app) == set(ROUTES)


@pytest.mark.parametrize("who", ["student", "shared token", "no token"])
def test_a_student_reaches_the_exercises_and_nothing_else(graded, who):
    token = {"student": keyring().issue("ada", days=1), "shared token": SHARED,
             "no token": None}[who]
    for (method, template), (path, body, on) in ROUTES.items():
        r = send(graded, method, path, body, token)
        assert is_off(r) is not on, (who, method, template, r.status_code, r.text[:200])
        assert r.status_code != 500
        if not on:                           # the refusal carries nothing of the route
            assert set(r.json()) == {"error"} and "graded session" in r.json()["error"][
                "message"]
    if who == "student":
        for path in ("/", EX, "/api/v1/exercises"):
            assert send(graded, "GET", path, None, token).status_code == 200
        done = send(graded, "POST", f"{EX}/submit", "answers", token)
        assert done.status_code == 200 and done.json()["passed"] is True


def test_an_instructor_keeps_every_route(graded):
    prof = keyring().issue("prof", "instructor", days=1)
    for (method, template), (path, body, _on) in ROUTES.items():
        r = send(graded, method, path, body, prof, student="prof")
        expected = {("POST", "/api/v1/train"): 422,          # the bad body, past access
                    ("POST", "/api/v1/mysteries/{mystery_id}/proof"): 200,
                    ("DELETE", "/api/v1/session"): 204}.get((method, template), 200)
        assert r.status_code == expected, (method, template, r.status_code, r.text[:200])
    ops = send(graded, "GET", "/api/v1/ops/rms_norm", None, prof).json()
    assert ops["vjp"] == registry.OPS["rms_norm"].vjp


def test_the_students_openapi_document_offers_only_what_they_reach(graded):
    student = graded.get("/openapi.json", headers=bearer(keyring().issue("ada", days=1)))
    anonymous = graded.get("/openapi.json")
    assert student.content == anonymous.content
    assert student.headers["cache-control"] == "no-store"
    assert student.headers["vary"] == "Authorization, Cookie"
    doc = student.json()
    assert set(doc["paths"]) == STUDENTS_PATHS
    text = student.text
    for op in registry.OPS.values():                 # no rule, no op, no op's schema
        for rule in op.vjp.values():
            assert rule not in text, (op.name, rule)
    assert "/api/v1/ops" not in text and "OpResult" not in doc["components"]["schemas"]
    refs = set()
    for value in json.dumps(doc).split('"$ref": "#/components/schemas/')[1:]:
        refs.add(value.split('"', 1)[0])
    assert refs <= set(doc["components"]["schemas"])         # every schema it names is in
    prof = graded.get("/openapi.json",
                      headers=bearer(keyring().issue("prof", "instructor", days=1)))
    assert "/api/v1/eval" in prof.json()["paths"] and "/api/v1/ops/rms_norm" in prof.json()[
        "paths"]
    assert prof.headers["cache-control"] == "no-store"


def test_no_page_file_a_student_fetches_states_a_rule(graded):
    """The page's own files are on in a graded session; those that state a backward rule
    (rule.js: cross_entropy's p − one-hot over N, term by term) are not. Every other file
    under static/ holds no op's rule as the registry writes it and no worked rule."""
    ada, prof = keyring().issue("ada", days=1), keyring().issue("prof", "instructor", days=1)
    rules = {r for op in registry.OPS.values() for r in op.vjp.values() if len(r) >= 8}
    fetched = 0
    for file in sorted((ROOT / "static").rglob("*")):
        if not file.is_file():
            continue
        path = "/" + file.relative_to(ROOT).as_posix()
        r = graded.get(path, headers=bearer(ada))
        if is_off(r):
            assert "one-hot" in file.read_text(encoding="utf-8"), path     # off for a reason
            assert graded.get(path, headers=bearer(prof)).status_code == 200
            continue
        assert r.status_code == 200, path
        fetched += 1
        text = r.content.decode("utf-8", errors="replace")
        assert not [rule for rule in rules if rule in text], path
        assert "one-hot" not in text and "p − one" not in text, path
    assert is_off(graded.get("/static/js/rule.js", headers=bearer(ada)))
    assert is_off(graded.get("/static/js/rule.js"))                 # nor without a token
    assert fetched > 30


def test_lessons_are_off_for_students_on_the_exercise_routes(graded):
    """A lesson's fixed case with its checked answers would be an oracle for the rule the
    exam asks (rms-norm's gradient on fixed numbers): off, listed nowhere."""
    ada = keyring().issue("ada", days=1)
    listed = graded.get("/api/v1/exercises", headers=bearer(ada)).json()["exercises"]
    assert [ex["id"] for ex in listed] == ["ce-record"]
    lesson = f"/api/v1/exercises/{LESSON}"
    for method, path, body in (("GET", lesson, None), ("POST", f"{lesson}/hints", {}),
                               ("POST", f"{lesson}/submit", {"answers": {"x": [[0.0]]},
                                                             "reveal": True})):
        assert is_off(graded.request(method, path, json=body, headers=bearer(ada))), path
    prof = keyring().issue("prof", "instructor", days=1)
    every = graded.get("/api/v1/exercises", headers=bearer(prof)).json()["exercises"]
    assert LESSON in [ex["id"] for ex in every]
    assert graded.get(lesson, headers=bearer(prof)).status_code == 200


def test_no_expected_number_is_revealed_to_a_student(graded):
    ada = keyring().issue("ada", days=1)
    before = len(graded.app.state.record.attempts("ada"))
    r = graded.post(f"{EX}/submit", headers=bearer(ada),
                    json={"answers": answers(graded.root, "ada", right=False), "reveal": True})
    assert is_off(r) and r.json()["error"]["input"] == "reveal"
    assert len(graded.app.state.record.attempts("ada")) == before       # not an attempt
    prof = keyring().issue("prof", "instructor", days=1)
    r = graded.post(f"{EX}/submit", headers=bearer(prof),
                    json={"answers": answers(graded.root, "prof"), "reveal": True})
    assert r.status_code == 200 and "expected" in r.json()["answers"]["logits"]


def test_another_students_numbers_are_refused(graded):
    ada = keyring().issue("ada", days=1)
    for method, path, body, headers in (
            ("GET", EX, None, {"X-Student-ID": "bob"}),
            ("GET", f"{EX}?student=bob", None, {}),
            ("POST", f"{EX}/submit", {"answers": answers(graded.root, "bob"),
                                      "student": "bob"}, {}),
            ("POST", f"{EX}/hints", {"student": "bob"}, {}),
            ("GET", "/api/v1/record/attempts?student=bob", None, {})):
        r = graded.request(method, path, json=body, headers={**bearer(ada), **headers})
        assert r.status_code == 403 and r.json()["error"]["code"] == "not_your_record", path
        assert "case" not in r.json() and "attempts" not in r.json()


def test_a_forged_instructor_role_opens_nothing(graded):
    head, kid, payload, sig = keyring().issue("ada", days=1).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["role"] = "instructor"
    raised = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    forged = f"{head}.{kid}.{raised}.{sig}"
    for path, body in (("/api/v1/eval", CASE), ("/api/v1/ops/neg", {"inputs": {"a": [1.0]}})):
        assert is_off(graded.post(path, json=body, headers=bearer(forged))), path
    assert is_off(graded.get("/api/v1/ops/rms_norm", headers=bearer(forged)))
    assert graded.get(EX, headers=bearer(forged)).json()["error"]["code"] == "invalid_token"


def test_a_graded_session_without_course_secrets_is_refused_naming_both_settings(tmp_path):
    with pytest.raises(SettingsError) as info:
        Settings(mode="course", graded_session=True, course_salt=SALT)
    said = str(info.value)
    assert "GLASSLLM_GRADED_SESSION=1 needs GLASSLLM_COURSE_SECRETS" in said
    assert "nothing tells an instructor from a student" in said


@pytest.mark.slow
def test_the_sandbox_refuses_to_start_a_graded_session_without_course_secrets(tmp_path):
    env = {"GLASSLLM_MODE": "course", "GLASSLLM_GRADED_SESSION": "1",
           "GLASSLLM_COURSE_SALT": SALT, "GLASSLLM_DATA_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli", "--port",
                           str(free_port())], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == ["glassllm-sandbox: invalid settings: GLASSLLM_GRADED_SESSION=1 needs"
                     " GLASSLLM_COURSE_SECRETS: without per-student tokens nothing tells an"
                     " instructor from a student (make a secret: glassllm-sandbox secret)"]
