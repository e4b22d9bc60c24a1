"""An optional bearer token for a sandbox put on a network.

With ``GLASSLLM_API_TOKEN`` set, every ``POST /api/v1/...`` needs
``Authorization: Bearer <token>``. Health probes, the page, its assets, the docs, the
OpenAPI schema and the GET routes of the API stay open: they compute nothing.

The header is read as RFC 9110 §11 and RFC 6750 §2.1 say: the scheme is
case-insensitive (``bearer``, ``BEARER``), one or more spaces separate it from the token,
and the token is a b64token (``[A-Za-z0-9-._~+/]+=*``). The answers (RFC 6750 §3, §3.1):

- no ``Authorization``, or another scheme (``Basic …``): 401 with the challenge
  ``WWW-Authenticate: Bearer realm="glassllm"`` and no error code — the client did not
  know a token was needed;
- a Bearer token that does not match: 401, ``Bearer realm="glassllm",
  error="invalid_token", error_description="…"``;
- a malformed Bearer credential (no token, characters a token cannot hold, the header
  given twice): 400, ``error="invalid_request"`` (the envelope's code:
  ``invalid_authorization``).

The comparison takes the same time whatever the token sent: both sides are hashed with
SHA-256 first and the two 32-byte digests compared with `hmac.compare_digest`, so neither
a byte's position nor the token's length changes how long it takes.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

from glassllm_service.http_errors import ApiError, error_response

REALM = 'Bearer realm="glassllm"'
CHALLENGE = REALM
B64TOKEN = re.compile(rb"[A-Za-z0-9\-._~+/]+=*")   # RFC 6750 §2.1


def needs_token(method: str, path: str) -> bool:
    return method == "POST" and path.startswith("/api/v1/")


def digest(token: bytes) -> bytes:
    """The fixed-length form both sides are compared in."""
    return hashlib.sha256(token).digest()


def matches(given: bytes, expected_digest: bytes) -> bool:
    """Constant time in the given token's bytes and length (module docstring)."""
    return hmac.compare_digest(digest(given), expected_digest)


def _refusal(status: int, why: str, error: str | None = None) -> ApiError:
    challenge = REALM if error is None else f'{REALM}, error="{error}", error_description="{why}"'
    message = (f"this sandbox needs a token: {why}; send 'Authorization: Bearer <token>'"
               " (GLASSLLM_API_TOKEN)")
    headers = {"WWW-Authenticate": challenge}
    if status == 401:
        return ApiError(401, "unauthorized", message, input="Authorization", headers=headers)
    return ApiError(400, "invalid_authorization", message, input="Authorization",
                    headers=headers)


def check(values: list[bytes], expected_digest: bytes) -> ApiError | None:
    """The refusal of a request whose ``Authorization`` values are `values`, or None."""
    if not values:
        return _refusal(401, "the Authorization header is missing")
    if len(values) > 1:
        return _refusal(400, "the Authorization header is given more than once",
                        "invalid_request")
    scheme, _, token = values[0].strip(b" \t").partition(b" ")
    if scheme.lower() != b"bearer":
        return _refusal(401, "the Authorization header is not a Bearer token")
    token = token.strip(b" ")
    if not B64TOKEN.fullmatch(token):
        return _refusal(400, "the Bearer token is empty or holds characters a token cannot"
                        " (RFC 6750: letters, digits, - . _ ~ + / and trailing =)",
                        "invalid_request")
    if not matches(token, expected_digest):
        return _refusal(401, "the Bearer token does not match", "invalid_token")
    return None


class BearerToken:
    """The ASGI middleware: refuses a guarded request without the token, before routing."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, digest(token.encode())

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and needs_token(scope["method"], scope["path"]):
            values = [v for k, v in scope.get("headers", ()) if k == b"authorization"]
            err = check(values, self.expected)
            if err is not None:
                return await error_response(err)(scope, receive, send)
        await self.app(scope, receive, send)
