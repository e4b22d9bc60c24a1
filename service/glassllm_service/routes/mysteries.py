"""``/api/v1/mysteries``: mystery mode (docs/mystery.md). The list; one mystery for a
student (its case, never its bug); ``/eval``, ``POST /api/v1/eval`` with the student's
bug switched on for that request; ``/proof``, a node and an input graded. The student
is the signed-in one where the course signs students in (course secrets: another id given
is 403 ``not_your_record``, as on the exercise routes); otherwise the ``X-Student-ID``
header or the ``student`` query parameter (or a body's ``student``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm_service import compute, schemas
from glassllm_service.course_state import guarded
from glassllm_service.deps import SettingsDep, StudentHeader, StudentQuery
from glassllm_service.record.access import current_student
from glassllm_service.requests import expression
from glassllm_service.requests import mystery_hunt as mystery

router = APIRouter(prefix="/api/v1/mysteries", tags=["mysteries"])
JSON = "application/json"
HIDDEN = {403: "course mode: an open exercise hides what the case computes"
               " (`hidden_by_exercise`); with course tokens, a student id other than the"
               " token's (`not_your_record`)"}


@router.get("", response_model=schemas.MysteryList,
            summary="Every mystery: id, title, points")
def list_mysteries() -> Response:
    return Response(mystery.listing(), media_type=JSON)


@router.get("/{mystery_id}", response_model=schemas.MysteryView,
            responses=schemas.error_responses(404),
            summary="One mystery: the case to hunt in (its bug is never shown)")
def get_mystery(mystery_id: str) -> Response:
    return Response(mystery.view(mystery_id), media_type=JSON)


@router.post("/{mystery_id}/eval", response_model=schemas.EvalResult,
             openapi_extra=expression.BODY,
             responses=schemas.error_responses(400, 403, 404, 413, 415, 422, 503, why=HIDDEN),
             summary="POST /api/v1/eval with this student's bug switched on, for this"
                     " request only")
async def mystery_eval(mystery_id: str, request: Request, settings: SettingsDep,
                       student: StudentQuery = None,
                       x_student_id: StudentHeader = None) -> Response:
    course = request.app.state.course
    found = mystery.get(mystery_id)
    signed = await current_student(request)
    who = course.student(x_student_id, student, signed=signed and signed.sub)
    # what an open exercise hides stays hidden here too (course_state.guarded)
    return await compute.answer(request, settings,
                                guarded(mystery.prepare_eval(found, who, course.salt), course),
                                send=expression.SEND)


@router.post("/{mystery_id}/proof", response_model=schemas.MysteryProof,
             openapi_extra=mystery.PROOF_BODY,
             responses=schemas.error_responses(400, 403, 404, 413, 415, 422, 503, why=HIDDEN),
             summary="Grade a proof: is the node's backward the wrong one, and does the"
                     " input expose it (the Taylor test fails there under the bug only)?")
async def mystery_proof(mystery_id: str, request: Request, settings: SettingsDep,
                        student: StudentQuery = None,
                        x_student_id: StudentHeader = None) -> Response:
    course = request.app.state.course
    found = mystery.get(mystery_id)
    signed = await current_student(request)

    def who(given):
        return course.student(x_student_id, student, given, signed=signed and signed.sub)
    # refused like the mystery's eval while an open exercise hides what the case computes
    return await compute.answer(request, settings,
                                guarded(mystery.prepare_proof(found, who, course.salt), course),
                                send=mystery.SEND_PROOF)
