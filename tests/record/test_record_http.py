"""The class record over HTTP with SQLite (docs/record.md): per-student tokens, forged
ones refused as access problems, the session cookie, every attempt kept once, the
gradebook, forget."""

from __future__ import annotations

import csv
import io
import time

import pytest
from fastapi.testclient import TestClient
from record_course import OTHER_SECRET, SECRET, answers, environment, keyring
from waiting import wait_until

from glassllm_service.app import create_app
from glassllm_service.settings import Settings

EX = "/api/v1/exercises/ce-record"


@pytest.fixture
def course(tmp_path, monkeypatch):
    # each worker reads the revoked tokens every REVOCATION_REFRESH_S (record/revocations.py)
    for key, value in environment(tmp_path, GLASSLLM_REVOCATION_REFRESH_S="0.1").items():
        monkeypatch.setenv(key, value)
    client = TestClient(create_app(Settings()))
    client.root = tmp_path
    return client


def refused(client, method, path, token, **kw) -> bool:
    """Whether `token` is refused as revoked there, waited for: the worker reads the
    revocations within its interval."""
    def check():
        r = client.request(method, path, headers=bearer(token), **kw)
        return r.status_code == 401 and r.json()["error"]["code"] == "token_revoked"
    return wait_until(check, what=f"{method} {path} to refuse the revoked token")


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def submit(client, token, *, right=True, key=None, student="ada", **headers):
    body = {"answers": answers(client.root, student, right)}
    if key is not None:
        body["idempotency_key"] = key
    return client.post(f"{EX}/submit", json=body, headers={**bearer(token), **headers})


def test_a_student_token_names_the_student_and_each_attempt_is_numbered(course):
    token = keyring().issue("ada", days=1)
    first = submit(course, token, right=False)
    assert first.status_code == 200, first.text
    assert first.json()["student"] == "ada"
    assert first.json()["attempt"] == {"number": 1, "recorded": True, "repeated": False,
                                       "max": 3, "remaining": 2}
    second = submit(course, token)
    assert second.json()["attempt"]["number"] == 2 and second.json()["passed"]
    rows = course.app.state.record.attempts("ada")
    assert [(r["attempt"], r["passed"], r["score"]) for r in rows] == [(1, False, 0.0),
                                                                       (2, True, 10.0)]


def test_the_same_idempotency_key_counts_once(course):
    token = keyring().issue("ada", days=1)
    a = submit(course, token, key="k-1").json()["attempt"]
    b = submit(course, token, key="k-1").json()["attempt"]
    assert (a["number"], a["repeated"], b["number"], b["repeated"]) == (1, False, 1, True)
    assert len(course.app.state.record.attempts("ada")) == 1


def test_a_key_reused_with_other_answers_is_refused_never_graded(course):
    """A retry is the same submission; the same key with other answers would be free
    feedback past max_attempts, and a score the record does not hold: 409, no verdict."""
    token = keyring().issue("ada", days=1)
    first = submit(course, token, right=False, key="k-1").json()
    assert first["passed"] is False and first["attempt"]["number"] == 1
    other = submit(course, token, right=True, key="k-1")
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert "answers" not in other.json() and "score" not in other.json()
    for _ in range(2):
        assert submit(course, token, right=False).status_code == 200     # 3 of 3 used
    again = submit(course, token, right=False, key="k-1").json()       # the retry itself
    assert again["attempt"] == {"number": 1, "recorded": True, "repeated": True, "max": 3,
                                "remaining": 0}
    assert again["answers"] == first["answers"] and again["score"] == first["score"] == 0.0
    late = submit(course, token, right=True, key="k-1")                 # still no way in
    assert late.status_code == 409 and "answers" not in late.json()
    rows = course.app.state.record.attempts("ada")
    assert [(r["attempt"], r["score"]) for r in rows] == [(1, 0.0), (2, 0.0), (3, 0.0)]


def test_an_instructor_tries_an_exercise_without_being_recorded(course):
    prof = keyring().issue("prof", "instructor", days=1)
    for _ in range(4):                                   # past max_attempts = 3: not counted
        r = submit(course, prof, student="prof")
        assert r.status_code == 200 and r.json()["passed"] is True
        assert r.json()["attempt"]["recorded"] is False
    hint = course.post(f"{EX}/hints", headers=bearer(prof))
    assert hint.json()["number"] == 1 and hint.json()["recorded"] is False
    assert course.app.state.record.attempts("prof") == []
    assert "prof" not in course.get("/api/v1/record/gradebook.csv",
                                     headers=bearer(prof)).text
    gen = course.app.state.record.revoke("prof", role="instructor")    # revoked: refused
    assert refused(course, "GET", "/api/v1/record/gradebook.csv", prof)
    assert submit(course, prof, student="prof").status_code == 401
    fresh = keyring().issue("prof", "instructor", days=1, gen=gen)
    book = course.get("/api/v1/record/gradebook.json", headers=bearer(fresh)).json()
    assert "prof" not in [row["student"] for row in book["students"]]   # still no student


def test_max_attempts_is_enforced_by_the_record(course):
    token = keyring().issue("ada", days=1)
    for _ in range(3):
        assert submit(course, token, right=False).status_code == 200
    refused = submit(course, token)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "no_attempts_left"
    assert len(course.app.state.record.attempts("ada")) == 3


@pytest.mark.parametrize("forge, status, code", [
    (lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"), 401, "invalid_token"),
    (lambda t: keyring(secret=OTHER_SECRET).issue("ada", days=1), 401, "invalid_token"),
    (lambda t: keyring(course="another").issue("ada", days=1), 401, "invalid_token"),
    (lambda t: keyring(kid="k9").issue("ada", days=1), 401, "invalid_token"),
    (lambda t: keyring().issue("ada", days=1, now=time.time() - 3 * 86400), 401,
     "token_expired"),
    (lambda t: "", 401, "unauthorized"),
])
def test_a_forged_or_expired_token_is_an_access_refusal_with_no_data(course, forge, status,
                                                                     code):
    good = keyring().issue("ada", days=1)
    assert submit(course, good).status_code == 200
    token = forge(good)
    headers = bearer(token) if token else {}
    for r in (course.post(f"{EX}/submit", json={"answers": answers(course.root, "ada")},
                          headers=headers),
              course.get(EX, headers=headers),
              course.get("/api/v1/record/attempts", headers=headers),
              course.get("/api/v1/record/gradebook.csv", headers=headers)):
        assert r.status_code == status, (r.request.url, r.text)
        err = r.json()["error"]
        assert (err["code"], err["access"], err["input"]) == (code, True, "Authorization")
        assert "attempts" not in r.json() and "case" not in r.json()
    assert len(course.app.state.record.attempts("ada")) == 1


def test_a_revoked_token_is_refused_and_the_new_one_works(course):
    record = course.app.state.record
    old = keyring().issue("ada", days=1, gen=record.generation("ada"))
    assert submit(course, old).status_code == 200
    gen = record.revoke("ada")
    stale = submit(course, old)           # the attempt's transaction checks it at once
    assert stale.status_code == 401
    assert stale.json()["error"]["code"] == "token_revoked"
    assert refused(course, "GET", EX, old)
    fresh = keyring().issue("ada", days=1, gen=gen)
    assert submit(course, fresh).json()["attempt"]["number"] == 2


def test_a_student_reads_only_their_own_attempts_and_no_instructor_route(course):
    ada, bob = keyring().issue("ada", days=1), keyring().issue("bob", days=1)
    submit(course, ada)
    submit(course, bob, student="bob")
    own = course.get("/api/v1/record/attempts", headers=bearer(ada)).json()
    assert [a["student"] for a in own["attempts"]] == ["ada"]
    other = course.get("/api/v1/record/attempts?student=bob", headers=bearer(ada))
    assert other.status_code == 403 and other.json()["error"]["code"] == "not_your_record"
    for fmt in ("csv", "json"):
        r = course.get(f"/api/v1/record/gradebook.{fmt}", headers=bearer(ada))
        assert r.status_code == 403 and r.json()["error"]["code"] == "instructor_only"
    as_bob = submit(course, ada, **{"X-Student-ID": "bob"})
    assert as_bob.status_code == 403 and as_bob.json()["error"]["access"]
    assert len(course.app.state.record.attempts("bob")) == 1


def test_an_instructor_role_in_a_students_token_needs_the_secret(course):
    token = keyring().issue("ada", days=1)
    head, kid, payload, sig = token.split(".")
    import base64
    import json
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["role"] = "instructor"
    raised = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    r = course.get("/api/v1/record/gradebook.csv", headers=bearer(f"{head}.{kid}.{raised}.{sig}"))
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_token"


def test_the_gradebook_csv_opens_with_csv_and_matches_the_record(course):
    record = course.app.state.record
    record.enrol([("ada", "Ada Lovelace"), ("bob", "=HYPERLINK(\"x\")"), ("cy", None)])
    ada, bob = keyring().issue("ada", days=1), keyring().issue("bob", days=1)
    submit(course, ada, right=False)
    submit(course, ada)
    submit(course, bob, student="bob", right=False)
    prof = keyring().issue("prof", "instructor", days=1)
    r = course.get("/api/v1/record/gradebook.csv", headers=bearer(prof))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    by = {row["student"]: row for row in rows}
    assert rows[0]["student"] == "Points Possible"         # the row gradebook imports read
    assert (rows[0]["ce-record"], rows[0]["ce-record attempts"], rows[0]["total"]) == (
        "10.0", "", "10.0")
    assert set(by) == {"Points Possible", "ada", "bob", "cy"}
    assert (by["ada"]["display_name"], by["ada"]["ce-record"],
            by["ada"]["ce-record attempts"]) == ("Ada Lovelace", "10.0", "2")
    assert (by["bob"]["ce-record"], by["bob"]["ce-record attempts"]) == ("0.0", "1")
    assert by["bob"]["display_name"].startswith("'=")         # no formula in a spreadsheet
    assert (by["cy"]["ce-record"], by["cy"]["ce-record attempts"]) == ("", "0")
    book = course.get("/api/v1/record/gradebook.json", headers=bearer(prof)).json()
    ada_row = next(s for s in book["students"] if s["student"] == "ada")
    assert ada_row["exercises"]["ce-record"] == {"best": 10.0, "attempts": 2, "passed": True}


def test_the_page_trades_a_token_for_an_httponly_strict_cookie(course):
    token = keyring().issue("ada", days=1)
    r = course.post("/api/v1/session", json={"token": token})
    assert r.status_code == 200 and r.json()["student"] == "ada"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/;" in cookie
    assert token not in r.text
    # the cookie alone signs the next requests in (a permalink in a new tab)
    assert course.get("/api/v1/session").json()["student"] == "ada"
    assert course.get(EX).status_code == 200
    assert course.delete("/api/v1/session").status_code == 204
    course.cookies.clear()
    assert course.get("/api/v1/session").json() == {"sign_in": True, "signed_in": False,
                                                    "problem": None}
    empty = course.post("/api/v1/session", json={})
    assert empty.status_code == 422 and empty.json()["error"]["access"]
    bad = course.post("/api/v1/session", json={"token": token[:-3] + "xyz"})
    assert bad.status_code == 401 and "set-cookie" not in bad.headers


def test_the_cookie_is_scoped_to_a_proxy_prefix(tmp_path, monkeypatch):
    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    client = TestClient(create_app(Settings()), root_path="/course-a")
    r = client.post("/api/v1/session", json={"token": keyring().issue("ada", days=1)})
    assert "Path=/course-a/;" in r.headers["set-cookie"]


def test_the_shared_token_keeps_working_for_the_compute_routes(tmp_path, monkeypatch):
    for key, value in environment(tmp_path, GLASSLLM_API_TOKEN="shared-token").items():
        monkeypatch.setenv(key, value)
    client = TestClient(create_app(Settings()))
    ok = client.post("/api/v1/ops/relu", json={"inputs": {"a": [1.0, -1.0]}},
                     headers=bearer("shared-token"))
    assert ok.status_code == 200
    assert client.post("/api/v1/ops/relu", json={"inputs": {"a": [1.0]}}).status_code == 401
    student = client.post("/api/v1/ops/relu", json={"inputs": {"a": [1.0]}},
                          headers=bearer(keyring().issue("ada", days=1)))
    assert student.status_code == 200
    nobody = client.get(EX, headers=bearer("shared-token"))
    assert nobody.status_code == 403 and nobody.json()["error"]["access"]


def test_forget_deletes_a_students_attempts_and_name(course):
    record = course.app.state.record
    record.enrol([("ada", "Ada Lovelace"), ("bob", "Bob")])
    ada = keyring().issue("ada", days=1)
    submit(course, ada)
    submit(course, keyring().issue("bob", days=1), student="bob")
    assert record.forget("ada") == 1
    assert record.attempts("ada") == [] and len(record.attempts("bob")) == 1
    assert "ada" not in {s.student for s in record.students() if s.display_name}
    assert submit(course, ada).status_code == 401         # their tokens end too


def test_practice_mode_has_no_secret_and_no_record(tmp_path):
    from glassllm_service.settings import SettingsError
    with pytest.raises(SettingsError, match="COURSE_SECRETS is for course mode"):
        Settings(course_secrets=f"k1={SECRET}")
    app = create_app(Settings(data_dir=tmp_path))
    assert app.state.record is None and app.state.keyring is None
    client = TestClient(app)
    assert client.get("/api/v1/session").json() == {"sign_in": False, "signed_in": False}
    for r in (client.post("/api/v1/session", json={"token": "x"}),
              client.get("/api/v1/record/attempts"),
              client.get("/api/v1/record/gradebook.csv")):
        assert r.status_code == 404
        assert r.json()["error"]["code"] in ("no_sign_in", "no_record")
    assert not (tmp_path / "record.sqlite3").exists()


def test_the_access_log_holds_no_token_and_no_answer(course, access_lines):
    token = keyring().issue("ada", days=1)
    given = answers(course.root, "ada")
    course.post("/api/v1/session", json={"token": token})
    course.post(f"{EX}/submit?student=ada", json={"answers": given})
    submit(course, token, key="k-9")
    assert access_lines and all(token not in line for line in access_lines)
    first = repr(given[next(iter(given))][0][0])
    assert all(first not in line and "student=" not in line for line in access_lines)
    row = course.app.state.record.attempts("ada")[0]
    assert set(row) == {"student", "exercise", "attempt", "content_hash", "verdict_digest",
                        "pattern", "score", "passed", "hints_used", "created_at", "version",
                        "regradable"}


def test_hints_are_recorded_in_order_once(course):
    token = keyring().issue("ada", days=1)
    hint = f"{EX}/hints"
    skip = course.post(hint, json={"number": 2}, headers=bearer(token))
    assert skip.status_code == 409 and skip.json()["error"]["code"] == "hint_out_of_order"
    first = course.post(hint, headers=bearer(token)).json()
    again = course.post(hint, json={"number": 1}, headers=bearer(token)).json()
    assert (first["number"], first["recorded"], again["number"]) == (1, True, 1)
    assert course.app.state.record.hints_used("ada", "ce-record") == 1
    submit(course, token)
    assert course.app.state.record.attempts("ada")[0]["hints_used"] == 1


def test_the_records_get_routes_answer_head(course):
    prof = bearer(keyring().issue("prof", "instructor", days=1))
    for path in ("/api/v1/record/gradebook.csv", "/api/v1/record/gradebook.json",
                 "/api/v1/record/attempts?student=ada", "/api/v1/session"):
        r, g = course.head(path, headers=prof), course.get(path, headers=prof)
        assert r.status_code == g.status_code == 200, path
        assert r.content == b"" and r.headers["content-type"] == g.headers["content-type"]


def test_a_database_that_stops_answering_is_a_503_to_retry_and_readyz_says_so(
        tmp_path, monkeypatch, caplog):
    """PostgreSQL stopped under a running sandbox: a submission is 503 record_unavailable
    with Retry-After and one log line (no traceback, no 500 "this is a bug"); /readyz
    stays ready and says the record is unavailable; the compute routes still answer."""
    from postgres_server import running_postgres

    for key, value in environment(tmp_path).items():
        monkeypatch.setenv(key, value)
    token = keyring().issue("ada", days=1)
    with running_postgres() as url:
        monkeypatch.setenv("GLASSLLM_DATABASE_URL", url)
        client = TestClient(create_app(Settings()))
        client.root = tmp_path
        assert submit(client, token, key="k-1").json()["attempt"]["number"] == 1
        assert client.get("/readyz").json()["record"] == "ok"
    # the server is gone: its connections in the pool are dead, new ones are refused
    caplog.clear()
    for key in ("k-2", "k-2"):
        r = submit(client, token, key=key)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "record_unavailable"
        assert r.headers["retry-after"] == "5"
    lines = [rec for rec in caplog.records if rec.name == "glassllm.service"]
    assert lines and all(rec.levelname == "WARNING" and rec.exc_info is None
                         and "record database unavailable" in rec.getMessage()
                         for rec in lines)
    prof = keyring().issue("prof", "instructor", days=1)
    for method, path, body, who in (
            ("get", EX, None, token), ("post", f"{EX}/hints", None, token),
            ("get", "/api/v1/record/attempts", None, token),
            ("get", "/api/v1/record/gradebook.csv", None, prof),
            ("post", "/api/v1/session", {"token": token}, None)):
        r = client.request(method.upper(), path, json=body,
                           headers=bearer(who) if who else {})
        assert (r.status_code, r.json()["error"]["code"]) == (503, "record_unavailable"), path
    assert client.get("/api/v1/exercises", headers=bearer(token)).status_code == 200
    # an instructor's list too: the token is held to the revoked ones last read
    assert client.get("/api/v1/exercises", headers=bearer(prof)).status_code == 200
    # homework goes on with the revoked tokens last read (a graded session would not:
    # tests/record/test_revocation.py)
    who = client.get("/api/v1/session", headers=bearer(token)).json()    # always 200
    assert who["signed_in"] is True and who["student"] == "ada"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["record"] == "unavailable"
    assert client.post("/api/v1/eval", headers=bearer(token), json={
        "expression": "x.sum()", "variables": {"x": [1.0, 2.0]}}).json()["grads"]["x"] == [
            1.0, 1.0]
