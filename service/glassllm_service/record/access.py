"""Who is asking: the course token of a request, checked before routing.

With ``GLASSLLM_COURSE_SECRETS`` set (course mode), `CourseAccess` replaces the shared
token's middleware (`glassllm_service.auth`). A request's token is its
``Authorization: Bearer`` credential, or else the page's ``glassllm_session`` cookie
(HttpOnly, SameSite=Strict: the page trades a token for it at ``POST /api/v1/session``
and never holds the token in script or storage). Then:

- every ``POST /api/v1/...`` (but the session's own) needs a valid course token of any
  role, or the shared ``GLASSLLM_API_TOKEN`` when one is set: it keeps working for the
  compute routes;
- an exercise for a student, its submit and hints, and ``/api/v1/record/...`` need a
  course token: the student id is the token's, and a header or query naming another
  student is refused; the shared token identifies no one there (403);
- the record's instructor routes need an instructor's token (403 for a student's).

Every refusal here says ``"access": true`` in its error body: the page shows it at the
sign-in, never under the student's formula.

A revoked or forgotten student's token (an older generation than the record's) is refused
here, before routing, by every route that takes a token: every POST of the API, the
personal routes (401 ``token_revoked``); on a route that needs no token it counts as
none, and ``GET /api/v1/session`` says why. The check reads this worker's set of revoked
tokens (`glassllm_service.record.revocations`), refreshed from the record at most once
per ``GLASSLLM_REVOCATION_REFRESH_S``, never the database per request; a submission also
checks the generation inside the transaction that records the attempt, under the
student's lock. When the set cannot be refreshed (the database does not answer), a
graded session refuses students' requests with 503 ``record_unavailable``; homework, and
instructors, go on with the last set read.

In a graded session (`glassllm_service.graded`), whoever is not a signed-in instructor —
a student, the shared token, no token — reaches only the routes the session leaves on;
any other answers 403 ``off_in_graded_session`` before routing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool

from glassllm_service.auth import B64TOKEN, REALM, digest, matches
from glassllm_service.http_errors import ApiError, error_response
from glassllm_service.record.revocations import Revocations
from glassllm_service.record.tokens import Claims, Keyring, TokenError

COOKIE = "glassllm_session"
SESSION_PATH = "/api/v1/session"
PERSONAL = ("/api/v1/exercises/", "/api/v1/record/")


@dataclass(frozen=True)
class Identity:
    """The caller: a course token's claims, or the shared token (``claims`` None)."""

    claims: Claims | None
    shared: bool = False


def refusal(status: int, code: str, message: str, *, challenge: str | None = None
            ) -> ApiError:
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = REALM if challenge is None else \
            f'{REALM}, error="{challenge}"'
    return ApiError(status, code, message, input="Authorization", headers=headers,
                    access=True)


def cookie_token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The session cookie's value, if the request carries one."""
    for name, value in headers:
        if name != b"cookie":
            continue
        for part in value.decode("latin-1").split(";"):
            key, _, token = part.strip().partition("=")
            if key == COOKIE and token:
                return token
    return None


def bearer(headers: list[tuple[bytes, bytes]]) -> tuple[str | None, ApiError | None]:
    """The Authorization header's Bearer token, or a refusal of a malformed one."""
    values = [v for k, v in headers if k == b"authorization"]
    if not values:
        return None, None
    if len(values) > 1:
        return None, refusal(400, "invalid_authorization", "the Authorization header is"
                             " given more than once")
    scheme, _, token = values[0].strip(b" \t").partition(b" ")
    token = token.strip(b" ")
    if scheme.lower() != b"bearer" or not B64TOKEN.fullmatch(token):
        return None, refusal(401, "unauthorized", "the Authorization header is not a Bearer"
                             " token", challenge="invalid_request")
    return token.decode("ascii"), None


def needs_identity(method: str, path: str) -> bool:
    """Routes refused without a token: every POST of the API but the session's, and the
    personal routes (an exercise for a student, the record) whatever the method."""
    if not path.startswith("/api/v1/") or path.startswith(SESSION_PATH):
        return False
    if path.startswith(PERSONAL) and path != "/api/v1/exercises/":
        return True
    return method == "POST"


class Gate:
    """The course's keyring and the shared token: who a token is."""

    def __init__(self, keyring: Keyring, shared_token: str | None = None) -> None:
        self.keyring = keyring
        self.shared = None if not shared_token else digest(shared_token.encode())

    def identify(self, token: str) -> Identity:
        """The identity of `token`, or `ApiError` (401)."""
        if self.shared is not None and matches(token.encode(), self.shared):
            return Identity(None, shared=True)
        try:
            return Identity(self.keyring.verify(token))
        except TokenError as exc:
            if exc.reason == "expired":
                raise refusal(401, "token_expired", str(exc),
                              challenge="invalid_token") from None
            raise refusal(401, "invalid_token", str(exc), challenge="invalid_token") from None


def record_unavailable(retry_after: int) -> ApiError:
    """The 503 of a graded session whose record cannot say which tokens are revoked."""
    return ApiError(503, "record_unavailable", "the class record's database is not"
                    " answering, so this sandbox cannot tell whether your token was revoked;"
                    f" try again in {retry_after} s", headers={"Retry-After": str(retry_after)})


def takes_token(method: str, path: str) -> bool:
    """The routes a course token counts on: the API's, but the sign-in and sign-out (the
    sign-in reads the generation itself, exactly; signing out needs no check)."""
    if not path.startswith("/api/v1/"):
        return False
    return not (path.startswith(SESSION_PATH) and method != "GET")


class CourseAccess:
    """The ASGI middleware of the module docstring. `revocations`: this worker's set (None:
    no record to read it from); `room`: a graded session's lock (None: homework)."""

    def __init__(self, app: Any, gate: Gate, revocations: Revocations | None = None,
                 room: Any = None, retry_after: int = 5) -> None:
        self.app, self.identify = app, gate.identify
        self.revocations, self.room, self.retry_after = revocations, room, retry_after

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path = scope["method"], scope["path"]
        headers = scope.get("headers", [])
        token, err = bearer(headers)
        if token is None and err is None:
            token = cookie_token(headers)
        identity = None
        if err is None and token is not None:
            try:
                identity = self.identify(token)
            except ApiError as exc:
                err = exc
        claims = identity.claims if identity is not None else None
        if claims is not None and self.revocations is not None and (
                takes_token(method, path) or (self.room is not None and claims.instructor)):
            verdict = await self._verdict(claims)
            if verdict == "revoked":
                identity, err = None, revoked()
            elif verdict == "stale" and self.room is not None and not claims.instructor:
                identity, err = None, record_unavailable(self.retry_after)
        if self.room is not None:
            locked = self.room.answer(method, path, instructor=identity is not None
                                      and identity.claims is not None
                                      and identity.claims.instructor)
            if locked is not None:
                return await locked(scope, receive, send)
        if needs_identity(method, path):
            if err is None and identity is None:
                err = refusal(401, "unauthorized", "sign in: this course needs your token"
                              " (Authorization: Bearer <token>, or the page's sign-in)")
            if err is not None:
                return await error_response(err)(scope, receive, send)
        state = scope.setdefault("state", {})
        state["identity"], state["access_problem"] = identity, err
        await self.app(scope, receive, send)

    async def _verdict(self, claims: Claims) -> str:
        """The revocation set's verdict on `claims`, the set read first when it is due (in
        a worker thread: the database is never read on the event loop)."""
        if not self.revocations.settled():
            await run_in_threadpool(self.revocations.refresh)
        return self.revocations.verdict(claims)


def identity_of(request: Any) -> Identity | None:
    return getattr(request.state, "identity", None)


def personal_claims(request: Any) -> Claims | None:
    """The course token's claims of a personal route; None when identities are off (no
    course secrets). The shared token is refused here: it names no student."""
    if getattr(request.app.state, "keyring", None) is None:
        return None
    identity = identity_of(request)
    if identity is None or identity.claims is None:
        raise refusal(403, "personal_token_required", "this course signs each student in"
                      " with their own token; the shared token names no student")
    return identity.claims


def revoked() -> ApiError:
    return refusal(401, "token_revoked", "this token was revoked; ask your instructor for a"
                   " new one", challenge="invalid_token")


async def current_student(request: Any) -> Claims | None:
    """`personal_claims`: the signed-in student (or instructor). A revoked token never gets
    here: `CourseAccess` refused it (or, on a route that needs no token, dropped it)."""
    return personal_claims(request)


def require_instructor(claims: Claims | None) -> Claims:
    if claims is None or not claims.instructor:
        raise refusal(403, "instructor_only", "this route is for the course's instructors:"
                      " an instructor's token is needed")
    return claims
