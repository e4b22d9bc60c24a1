"""``/api/v1/exercises``: the list, one exercise for a student, a submission graded, a hint
(docs/exercises.md, docs/modes.md). The student id: the ``X-Student-ID`` header or the
``student`` query parameter (or a POST body's ``student``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from glassllm.course.attempts import AttemptStore, NoRecord
from glassllm_service import compute, exercise_schemas, graded, schemas
from glassllm_service.admission import run_admitted
from glassllm_service.body import read_json
from glassllm_service.deps import SettingsDep, StudentHeader, StudentQuery
from glassllm_service.record.access import current_student, identity_of
from glassllm_service.requests import submission

router = APIRouter(prefix="/api/v1/exercises", tags=["exercises"])
JSON = "application/json"


@router.get("", response_model=exercise_schemas.ExerciseList,
            summary="Every exercise: id, title, points, when it opens and closes, open now?"
                    " (course mode: none before it opens, but to an instructor)")
async def list_exercises(request: Request) -> Response:
    return Response(submission.listing(request.app.state.course,
                                       await signed_instructor(request),
                                       lessons=not locked(request)), media_type=JSON)


async def signed_instructor(request: Request) -> bool:
    """Whether the request is signed by an instructor's live token (its generation
    checked against the record): an instructor sees and tries exercises before they
    open."""
    identity = identity_of(request)
    if identity is None or identity.claims is None or not identity.claims.instructor:
        return False
    return bool(await current_student(request))


@router.get("/{exercise_id}", response_model=exercise_schemas.ExerciseView,
            responses=schemas.error_responses(403, 404, 422, 503, why={
                503: schemas.WHY[503] + "; or " + schemas.RECORD_DOWN,
                403: "another student's numbers (`not_your_record`); in a graded session,"
                     " a lesson or `reveal` (`off_in_graded_session`)",
                404: "no exercise of that id, or (course mode, to a student) one not open"
                     " yet (`unknown_exercise`)",
                422: "a malformed or missing student id"}),
            summary="One exercise for a student: the text, their own numbers, what to give")
async def get_exercise(exercise_id: str, request: Request, student: StudentQuery = None,
                       x_student_id: StudentHeader = None) -> Response:
    course = request.app.state.course
    signed = await current_student(request)
    exercise = course.exercise(exercise_id, instructor=bool(signed and signed.instructor))
    lessons_off(request, exercise)
    who = course.student(x_student_id, student, signed=signed and signed.sub)
    view = submission.prepare_view(course, exercise, who)
    return Response(await run_admitted(request, view.cost, view.answer), media_type=JSON)


@router.post("/{exercise_id}/submit", response_model=exercise_schemas.SubmitResult,
             openapi_extra=submission.BODY,
             responses=schemas.error_responses(403, 404, 413, 415, 422, 503, why={
                 503: schemas.WHY[503] + "; or " + schemas.RECORD_DOWN,
                 403: "course mode: the exercise is not open, closed, hides the expected"
                      " numbers asked for with reveal, or every attempt is used",
                 404: "no exercise of that id (`unknown_exercise`)"}),
             summary="Grade a student's answers: digits agreed, the pattern of a mistake")
async def submit(exercise_id: str, request: Request, settings: SettingsDep,
                 student: StudentQuery = None, x_student_id: StudentHeader = None) -> Response:
    course = request.app.state.course
    # a revoked token: refused before routing (record/access.py), and again by the
    # transaction that records the attempt, which checks the token's generation
    signed = await current_student(request)
    exercise = course.exercise(exercise_id, instructor=bool(signed and signed.instructor))
    lessons_off(request, exercise)

    def prepare(body, maybe_bools, settings):
        return submission.prepare_submit(
            body, maybe_bools, settings, course, exercise,
            lambda given: course.student(x_student_id, student, given,
                                         signed=signed and signed.sub),
            generation=signed and signed.gen, attempts=attempts_of(course, signed),
            locked=locked(request))

    return await compute.answer(request, settings, prepare, send=submission.SEND)


@router.post("/{exercise_id}/hints", response_model=exercise_schemas.HintResult,
             openapi_extra=submission.HINT_BODY,
             responses=schemas.error_responses(403, 404, 409, 415, 422, 503, why={
                 503: schemas.RECORD_DOWN,
                 404: "no exercise of that id, or no hint of that number",
                 409: "with a record attached: an earlier hint is not revealed yet"}),
             summary="Reveal a hint: the next one, or one by its number")
async def hints(exercise_id: str, request: Request, settings: SettingsDep,
                student: StudentQuery = None, x_student_id: StudentHeader = None) -> Response:
    course = request.app.state.course
    signed = await current_student(request)
    exercise = course.exercise(exercise_id, instructor=bool(signed and signed.instructor))
    lessons_off(request, exercise)
    body = None
    if request.headers.get("content-length", "0") != "0" or \
            request.headers.get("transfer-encoding"):
        body, _ = await read_json(request, settings, send='{"number": 1}', queued=False)
    given = body.get("student") if isinstance(body, dict) else None
    who = course.student(x_student_id, student, given, signed=signed and signed.sub)
    # the record is read and written in a worker thread, never on the event loop
    return Response(await run_in_threadpool(submission.hint, course, exercise, who, body,
                                            attempts_of(course, signed)), media_type=JSON)


def attempts_of(course, signed) -> AttemptStore:
    """Where this request's attempts and hints go: the course's record, or nowhere for an
    instructor trying an exercise (an instructor is no student: not in the gradebook,
    no attempts to use up)."""
    return NoRecord() if signed is not None and signed.instructor else course.attempts


def locked(request: Request) -> bool:
    """A graded session, for anyone but a signed-in instructor (graded.py)."""
    if not request.app.state.course.graded:
        return False
    identity = identity_of(request)
    return not (identity is not None and identity.claims is not None
                and identity.claims.instructor)


def lessons_off(request: Request, exercise) -> None:
    """A lesson is practice: in a graded session its case, its checked answers and its
    revealed numbers would be an oracle for the rule the exam asks, so a student's request
    for one is refused like every other route that shows a rule."""
    if exercise.lesson and locked(request):
        raise graded.refusal(request.url.path)
