"""An optional bearer token for a sandbox put on a network (issue 9).

With ``GLASSLLM_API_TOKEN`` set, every ``POST /api/v1/...`` needs
``Authorization: Bearer <token>``; anything else is ``401`` with
``WWW-Authenticate: Bearer realm="glassllm"``. The comparison is constant-time
(`hmac.compare_digest`). Health probes, the page, its assets, the docs, the OpenAPI
schema and the GET routes of the API stay open: they compute nothing.
"""

from __future__ import annotations

import hmac
from typing import Any

from service.errors import ApiError, error_response

CHALLENGE = 'Bearer realm="glassllm"'


def needs_token(method: str, path: str) -> bool:
    return method == "POST" and path.startswith("/api/v1/")


class BearerToken:
    """The ASGI middleware: refuses a guarded request without the token, before routing."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.expected = app, b"Bearer " + token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and needs_token(scope["method"], scope["path"]):
            given = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                why = "is missing" if not given else "does not match"
                err = ApiError(401, "unauthorized", f"this sandbox needs a token: the"
                               f" Authorization header {why}; send 'Authorization: Bearer"
                               " <token>' (GLASSLLM_API_TOKEN)", input="Authorization",
                               headers={"WWW-Authenticate": CHALLENGE})
                return await error_response(err)(scope, receive, send)
        await self.app(scope, receive, send)
