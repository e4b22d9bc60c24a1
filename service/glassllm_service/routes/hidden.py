"""``GET /api/v1/hidden``: what the course's exercises hide now (or at ``?at=``), and why:
each exercise's parts, ops, window and the requests it reaches, for the course's
instructors (an instructor's course token; docs/modes.md#what-is-hidden-now).
`glassllm-sandbox hidden` prints the same from the sandbox's settings."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from glassllm_service import hiding_report, schemas
from glassllm_service.http_errors import ApiError
from glassllm_service.record.access import (
    current_student,
    identity_of,
    refusal,
    require_instructor,
)

router = APIRouter(tags=["record"])


@router.get("/api/v1/hidden", response_model=schemas.HiddenReport,
            summary="What the open exercises hide, and why (instructors)",
            responses=schemas.error_responses(401, 403, 404, 422, why={
                404: "no per-student sign-in on this sandbox (`no_sign_in`): without"
                     " course tokens nothing tells an instructor from a student"}))
async def hidden(request: Request, at: Annotated[str | None, Query(
        description="an ISO 8601 moment with its offset; default now")] = None) -> Response:
    if getattr(request.app.state, "keyring", None) is None:
        raise ApiError(404, "no_sign_in", "this sandbox has no per-student sign-in (course"
                       " mode with GLASSLLM_COURSE_SECRETS): run glassllm-sandbox hidden"
                       " where it runs instead")
    problem = getattr(request.state, "access_problem", None)
    if problem is not None:                      # a token that is not this course's
        raise problem
    if identity_of(request) is None:
        raise refusal(401, "unauthorized", "sign in: this route needs an instructor's course"
                      " token (Authorization: Bearer <token>)", challenge="invalid_request")
    require_instructor(await current_student(request))
    moment = None
    if at is not None:
        try:
            moment = hiding_report.parse_moment(at)
        except ValueError as exc:
            raise ApiError(422, "invalid_request", f"at: {exc}", input="at") from None
    found = hiding_report.report(request.app.state.course, moment)
    return Response(orjson.dumps(found), media_type="application/json",
                    headers={"Cache-Control": "no-store"})
