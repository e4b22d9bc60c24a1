"""``/api/v1/eval`` (a composed expression, every node's value and adjoint), and
``/api/v1/examples`` and ``/api/v1/lessons`` (ready requests for it)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from glassllm.course.lesson_requests import LESSONS, lesson_runs
from glassllm.sandbox.examples import EXAMPLES, example_runs
from glassllm_service import compute, schemas
from glassllm_service.course_state import examples_shown, guarded, lessons_shown
from glassllm_service.deps import CourseDep, SettingsDep
from glassllm_service.requests import expression

router = APIRouter(prefix="/api/v1", tags=["expressions"])
_EXAMPLES_JSON = orjson.dumps({"examples": EXAMPLES})
_LESSONS_JSON = orjson.dumps({"lessons": LESSONS})


@router.post("/eval", response_model=schemas.EvalResult, operation_id="eval_expression",
             responses=schemas.error_responses(400, 413, 415, 422, 503),
             summary="Evaluate an expression of registry ops: every node's value and gradient",
             openapi_extra=expression.BODY)
async def eval_expression(request: Request, settings: SettingsDep, course: CourseDep
                          ) -> Response:
    return await compute.answer(request, settings, guarded(expression.prepare, course),
                                send=expression.SEND)


@router.get("/examples", response_model=schemas.ExampleList,
            summary="Every example of SPEC Part L as a ready /api/v1/eval request")
def list_examples(course: CourseDep) -> Response:
    hidden = course.hidden()
    if hidden.ops("expected") or hidden.ops("rule"):   # what an example runs that is hidden
        return Response(orjson.dumps({"examples": examples_shown(EXAMPLES, example_runs(),
                                                                 hidden)}),
                        media_type="application/json")
    return Response(_EXAMPLES_JSON, media_type="application/json")


@router.get("/lessons", response_model=schemas.LessonList,
            summary="Lessons: prepared /api/v1/eval requests with what to notice")
def list_lessons(course: CourseDep) -> Response:
    hidden = course.hidden()
    if hidden.ops("rule"):           # a lesson's notes that speak of a hidden rule: left out
        return Response(orjson.dumps({"lessons": lessons_shown(LESSONS, lesson_runs(),
                                                               hidden)}),
                        media_type="application/json")
    return Response(_LESSONS_JSON, media_type="application/json")
