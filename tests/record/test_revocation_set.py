"""One worker's set of revoked tokens (service/glassllm_service/record/revocations.py), in
process with SQLite: read once per interval however many requests come; a token newer
than the set is not refused for the set's age; the cookie is checked like the header; a
revoked token cannot sign in again; the shared token is no one's to revoke. Across real
workers and PostgreSQL: tests/record/test_revocation.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from record_course import answers, environment, keyring
from waiting import wait_until

from glassllm_service.app import create_app
from glassllm_service.settings import Settings

EX = "/api/v1/exercises/ce-record"
CASE = {"expression": "(x * x).sum()", "variables": {"x": [1.0, 2.0]}}


def course(tmp_path, monkeypatch, refresh: str, **more) -> TestClient:
    for key, value in environment(tmp_path, GLASSLLM_REVOCATION_REFRESH_S=refresh,
                                  **more).items():
        monkeypatch.setenv(key, value)
    client = TestClient(create_app(Settings()))
    client.root = tmp_path
    return client


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_the_set_is_read_once_per_interval_not_per_request(tmp_path, monkeypatch):
    client = course(tmp_path, monkeypatch, "30")
    token = keyring().issue("ada", days=1)
    for _ in range(40):
        assert client.post("/api/v1/eval", json=CASE, headers=bearer(token)).status_code == 200
        assert client.get(EX, headers=bearer(token)).status_code == 200
    assert client.app.state.revocations.reads == 1
    for _ in range(10):                             # no token: nothing to check, no read
        client.get("/api/v1/exercises")
    assert client.app.state.revocations.reads == 1


def test_a_token_issued_after_the_revocation_works_before_the_worker_reads_again(
        tmp_path, monkeypatch):
    """The set is older than the new token: its generation is above the one read, and
    it is accepted at once; the old one dies when the worker reads."""
    client = course(tmp_path, monkeypatch, "0.2")
    record = client.app.state.record
    old = keyring().issue("ada", days=1)
    assert client.post("/api/v1/eval", json=CASE, headers=bearer(old)).status_code == 200
    new = keyring().issue("ada", days=1, gen=record.revoke("ada"))
    assert client.post("/api/v1/eval", json=CASE, headers=bearer(new)).status_code == 200
    wait_until(lambda: client.post("/api/v1/eval", json=CASE, headers=bearer(old))
               .status_code == 401, what="the old token refused")
    assert client.post("/api/v1/eval", json=CASE, headers=bearer(new)).status_code == 200
    again = keyring().issue("ada", days=1, gen=record.revoke("ada"))
    assert client.post(f"{EX}/submit", json={"answers": answers(tmp_path, "ada")},
                       headers=bearer(again)).json()["attempt"]["number"] == 1


def test_the_pages_cookie_is_refused_like_the_header_and_cannot_sign_in_again(
        tmp_path, monkeypatch):
    client = course(tmp_path, monkeypatch, "0.1")
    token = keyring().issue("ada", days=1)
    assert client.post("/api/v1/session", json={"token": token}).status_code == 200
    assert client.post("/api/v1/eval", json=CASE).status_code == 200        # the cookie
    client.app.state.record.revoke("ada")

    def refused() -> bool:
        r = client.post("/api/v1/eval", json=CASE)
        return r.status_code == 401 and r.json()["error"]["code"] == "token_revoked"
    wait_until(refused, what="the cookie's revoked token refused")
    assert client.get(EX).json()["error"]["code"] == "token_revoked"
    who = client.get("/api/v1/session").json()
    assert who["signed_in"] is False and who["problem"]["code"] == "token_revoked"
    assert client.get("/").status_code == 200                      # the page still loads
    client.cookies.clear()
    again = client.post("/api/v1/session", json={"token": token})  # read at once, exactly
    assert again.status_code == 401 and "set-cookie" not in again.headers


@pytest.mark.parametrize("route", ["/api/v1/eval", "/api/v1/ops/neg"])
def test_the_shared_token_is_no_ones_to_revoke(tmp_path, monkeypatch, route):
    client = course(tmp_path, monkeypatch, "0.1", GLASSLLM_API_TOKEN="shared-token")
    client.app.state.record.revoke("ada")
    body = CASE if route.endswith("eval") else {"inputs": {"a": [1.0]}}
    assert client.post(route, json=body, headers=bearer("shared-token")).status_code == 200
    assert client.app.state.revocations.reads == 0
