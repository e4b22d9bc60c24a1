"""The class record over HTTP (docs/record.md): a page's sign-in traded for a cookie, a
student's own attempts, the instructor's gradebook. Course mode with course secrets
only; every refusal here is an access problem (``"access": true``)."""

from __future__ import annotations

import time
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from glassllm_service import schemas
from glassllm_service.body import read_json
from glassllm_service.deps import SettingsDep
from glassllm_service.http_errors import ApiError
from glassllm_service.record import export
from glassllm_service.record.access import (
    COOKIE,
    current_student,
    identity_of,
    refusal,
    require_instructor,
    revoked,
)

router = APIRouter(tags=["record"])
JSON = "application/json"


def _keyring(request: Request):
    keyring = getattr(request.app.state, "keyring", None)
    if keyring is None:
        raise ApiError(404, "no_sign_in", "this sandbox has no per-student sign-in (course"
                       " mode with GLASSLLM_COURSE_SECRETS)")
    return keyring


def _cookie(request: Request, token: str, max_age: int) -> str:
    """The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's
    page sends it), scoped to the sandbox's path, its prefix behind a proxy included."""
    path = (request.scope.get("root_path") or "").rstrip("/") + "/"
    secure = "; Secure" if request.url.scheme == "https" or \
        request.headers.get("x-forwarded-proto") == "https" else ""
    return (f"{COOKIE}={token}; Path={path}; Max-Age={max(0, max_age)}; HttpOnly;"
            f" SameSite=Strict{secure}")


def _who(claims) -> dict:
    return {"signed_in": True, "course": claims.course, "role": claims.role,
            "student": claims.sub, "expires": claims.exp}


@router.post("/api/v1/session", summary="Sign in: trade a course token for the page's cookie",
             responses=schemas.error_responses(401, 404, 422, 503,
                                                 why={503: schemas.RECORD_DOWN}))
async def sign_in(request: Request, settings: SettingsDep) -> Response:
    _keyring(request)
    body, _ = await read_json(request, settings, send='{"token": "..."}', queued=False)
    token = body.get("token") if isinstance(body, dict) else None
    if not isinstance(token, str) or not token.strip():
        raise ApiError(422, "invalid_request", "send {\"token\": \"...\"}: the token your"
                       " instructor gave you", input="token", access=True)
    claims = request.app.state.gate.identify(token.strip()).claims
    if claims is None:
        raise refusal(403, "personal_token_required", "the shared token names no student;"
                      " sign in with your own token")
    record = getattr(request.app.state, "record", None)
    if record is not None and claims.gen != await run_in_threadpool(record.generation,
                                                                     claims.sub):
        raise revoked()
    out = Response(orjson.dumps(_who(claims)), media_type=JSON)
    out.headers["Set-Cookie"] = _cookie(request, token.strip(), claims.exp - int(time.time()))
    out.headers["Cache-Control"] = "no-store"
    return out


@router.get("/api/v1/session", summary="Who is signed in: always 200, so the page asks"
            " without an error in the console")
async def session(request: Request) -> Response:
    """``{"sign_in": false}`` on a sandbox without sign-in; ``{"sign_in": true,
    "signed_in": false, "problem": ...}`` when nobody is (the problem: a cookie's token
    that expired or was revoked); the signed-in identity otherwise."""
    headers = {"Cache-Control": "no-store"}
    if getattr(request.app.state, "keyring", None) is None:
        return Response(b'{"sign_in":false,"signed_in":false}', media_type=JSON,
                        headers=headers)
    # a revoked token, or (a graded session) a record that cannot say, comes here as no
    # identity and its problem (record/access.py): said, still a 200
    identity, problem = identity_of(request), getattr(request.state, "access_problem", None)
    claims = None
    if identity is not None and identity.claims is not None:
        claims = await current_student(request)
    if claims is None:
        out = {"sign_in": True, "signed_in": False, "problem": None if problem is None
               else {"code": problem.code, "message": problem.message}}
        return Response(orjson.dumps(out), media_type=JSON, headers=headers)
    return Response(orjson.dumps({"sign_in": True, **_who(claims)}), media_type=JSON,
                    headers=headers)


@router.delete("/api/v1/session", status_code=204, summary="Sign out: the cookie cleared")
async def sign_out(request: Request) -> Response:
    out = Response(status_code=204)
    out.headers["Set-Cookie"] = _cookie(request, "", 0)
    return out


def _record(request: Request):
    record = getattr(request.app.state, "record", None)
    if record is None:
        raise ApiError(404, "no_record", "this sandbox keeps no record (course mode only)")
    return record


@router.get("/api/v1/record/attempts", summary="Attempts: your own, or (instructor) a"
            " student's", responses=schemas.error_responses(
                401, 403, 404, 503, why={503: schemas.RECORD_DOWN}))
async def attempts(request: Request, student: Annotated[str | None, Query()] = None
                   ) -> Response:
    _keyring(request)
    record, claims = _record(request), await current_student(request)
    if student is not None and student != claims.sub and not claims.instructor:
        raise refusal(403, "not_your_record", "a student reads their own attempts only")
    who = student or claims.sub
    rows = await run_in_threadpool(record.attempts, who)
    return Response(orjson.dumps({"student": who, "attempts": rows}), media_type=JSON,
                    headers={"Cache-Control": "no-store"})


@router.get("/api/v1/record/gradebook.{fmt}", summary="The gradebook (instructors): CSV or"
            " JSON", responses=schemas.error_responses(
                401, 403, 404, 503, why={503: schemas.RECORD_DOWN}))
async def gradebook(fmt: str, request: Request) -> Response:
    if fmt not in ("csv", "json"):
        raise ApiError(404, "not_found", "the gradebook is gradebook.csv or gradebook.json")
    record = _record(request)
    _keyring(request)
    require_instructor(await current_student(request))
    catalogue = request.app.state.course.catalogue

    def build() -> dict:
        return export.table(record.students(), record.attempts(),
                            [(ex.id, ex.points) for ex in catalogue.graded],
                            [ex.id for ex in catalogue])

    book = await run_in_threadpool(build)
    headers = {"Cache-Control": "no-store"}
    if fmt == "json":
        return Response(orjson.dumps({"course": record.course, **book}), media_type=JSON,
                        headers=headers)
    headers["Content-Disposition"] = f'attachment; filename="{record.course}-gradebook.csv"'
    return Response(export.to_csv(book).encode(), media_type="text/csv; charset=utf-8",
                    headers=headers)
