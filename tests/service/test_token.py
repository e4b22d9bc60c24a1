"""The bearer token over real HTTP (glassllm_service/auth.py): the scheme is case-insensitive (RFC
9110 §11.1), a wrong token's challenge says ``error="invalid_token"``, a missing one's
says no error (RFC 6750 §3.1), a malformed credential is 400 ``invalid_request``, and the
comparison is made on fixed-length digests with `hmac.compare_digest`."""

from __future__ import annotations

import hashlib
import re

import httpx
import pytest
from sandbox_server import running_sandbox

from glassllm_service import auth
from glassllm_service.settings import Settings, SettingsError

TOKEN = "s3cret-Class_2.0~+/=="
NEG = {"inputs": {"a": [1.0]}}


@pytest.fixture(scope="module")
def url():
    with running_sandbox(env={"GLASSLLM_API_TOKEN": TOKEN}) as u:
        yield u


def challenge(header: str) -> tuple[str, dict[str, str]]:
    """(scheme, auth-params) of a WWW-Authenticate value with one challenge."""
    scheme, _, rest = header.partition(" ")
    return scheme, dict(re.findall(r'([a-z_]+)="([^"]*)"', rest))


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
@pytest.mark.parametrize("gap", [" ", "   "])
def test_the_scheme_is_case_insensitive(url, scheme, gap):
    r = httpx.post(f"{url}/api/v1/ops/neg", json=NEG,
                   headers={"Authorization": f"{scheme}{gap}{TOKEN}"})
    assert r.status_code == 200 and r.json()["value"] == [-1.0]


@pytest.mark.parametrize("header", [None, "Basic dXNlcjpwYXNz", "Token " + TOKEN, TOKEN])
def test_no_bearer_credentials_get_the_challenge_without_an_error_code(url, header):
    """RFC 6750 §3.1: a request with no authentication information, or with another
    method, is answered with the bare challenge."""
    headers = {} if header is None else {"Authorization": header}
    r = httpx.post(f"{url}/api/v1/ops/neg", json=NEG, headers=headers)
    assert r.status_code == 401
    assert r.headers.get_list("www-authenticate") == ['Bearer realm="glassllm"']
    assert r.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("token", ["nope", TOKEN[:-1], "x" + TOKEN, TOKEN.upper(), "a" * 500])
def test_a_wrong_token_is_invalid_token(url, token):
    r = httpx.post(f"{url}/api/v1/eval", json={"expression": "x"},
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401
    scheme, params = challenge(r.headers["www-authenticate"])
    assert scheme == "Bearer"
    assert params["realm"] == "glassllm" and params["error"] == "invalid_token"
    assert "does not match" in params["error_description"]
    err = r.json()["error"]
    assert (err["code"], err["input"]) == ("unauthorized", "Authorization")


@pytest.mark.parametrize("headers", [[("Authorization", "Bearer")],
                                     [("Authorization", "Bearer a b")],
                                     [("Authorization", "Bearer tök")],
                                     [("Authorization", f"Bearer {TOKEN}"),
                                      ("Authorization", f"Bearer {TOKEN}")]])
def test_a_malformed_bearer_credential_is_invalid_request(url, headers):
    with httpx.Client() as c:
        r = c.post(f"{url}/api/v1/ops/neg", json=NEG,
                   headers=httpx.Headers([(k, v.encode()) for k, v in headers]))
    assert r.status_code == 400
    scheme, params = challenge(r.headers["www-authenticate"])
    assert scheme == "Bearer" and params["error"] == "invalid_request"
    assert r.json()["error"]["code"] == "invalid_authorization"


def test_reads_stay_open(url):
    for path in ("/healthz", "/api/v1/ops", "/openapi.json", "/"):
        assert httpx.get(url + path).status_code == 200


def test_the_comparison_is_of_two_fixed_length_digests(monkeypatch):
    """Constant time: whatever the token sent (its length, where it first differs), the
    comparison is `hmac.compare_digest` over two 32-byte SHA-256 digests, never `==` and
    never over the raw bytes (compare_digest's time depends on the lengths)."""
    seen = []
    real = auth.hmac.compare_digest

    def spy(a, b):
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    expected = auth.digest(TOKEN.encode())
    for given in (b"", b"x", TOKEN.encode()[:-1], TOKEN.encode(), b"y" * 10_000):
        assert auth.matches(given, expected) == (given == TOKEN.encode())
    assert len(seen) == 5
    for a, b in seen:
        assert isinstance(a, bytes) and len(a) == len(b) == 32
        assert b == hashlib.sha256(TOKEN.encode()).digest()


@pytest.mark.parametrize("token", ["with space", "tök", "semi;colon", 'quote"d', "=start"])
def test_a_token_no_client_could_send_stops_startup(token):
    with pytest.raises(SettingsError, match=r"GLASSLLM_API_TOKEN.*RFC 6750"):
        Settings(api_token=token)
