"""An exercise for one student, a submission graded, a hint revealed (docs/exercises.md).

- `prepare_view` → `View`: ``GET /api/v1/exercises/{id}``, the student's case (their
  numbers, what to give, the text as a tree the page builds without HTML);
- `prepare_submit` → `Submission`: ``POST .../submit``, every answer graded
  (`glassllm.course.verdict.grade`) at the exercise's feedback level, the attempt handed
  to the `AttemptStore`;
- `hint`: ``POST .../hints``, one hint, by number (the record, when attached, keeps them
  in order).

Each student's case is rebuilt from the exercise file, the salt and the student id
(`glassllm.course.build_case`): nothing is stored between requests.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from typing import Any

import numpy as np
import orjson

from glassllm.course import Exercise, build_case, grade
from glassllm.course.attempts import Attempt, AttemptsExhausted, AttemptStore, KeyReused
from glassllm.course.cases import Case
from glassllm.sandbox.wire import coerce, encode_array
from glassllm_service.admission import INLINE_COST
from glassllm_service.body import check_answer
from glassllm_service.codec import dumps
from glassllm_service.course_state import CourseState
from glassllm_service.envelope import Envelope, read
from glassllm_service.http_errors import ApiError
from glassllm_service.markdown_tree import tree
from glassllm_service.settings import Settings

SEND = '{"answers": {...}}'
RECORDED = INLINE_COST + 1
SUBMIT = Envelope(("student", "answers", "idempotency_key", "reveal"),
                  'the body must be a JSON object {"answers": {key: array}, "student": ...,'
                  ' "idempotency_key": ..., "reveal": false}', required=("answers",))
HINT = Envelope(("student", "number"), 'the body must be a JSON object {"student": ...,'
                ' "number": 1}')
BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"title": "SubmitRequest", "type": "object", "required": ["answers"],
               "additionalProperties": False, "properties": {
                   "answers": {"type": "object", "description": "answer key (the"
                               " exercise's `answers[*].key`) → array",
                               "additionalProperties": {
                                   "$ref": "#/components/schemas/FloatArray"}},
                   "student": {"type": "string", "description": "the student id, if not"
                               " in X-Student-ID or ?student="},
                   "idempotency_key": {"type": "string", "maxLength": 128, "description":
                                       "the same key from the same student is one attempt"},
                   "reveal": {"type": "boolean", "default": False, "description":
                              "answer the expected arrays too (refused while the exercise"
                              " hides them)"}}},
    "example": {"answers": {"logits": [[0.1, -0.2, 0.05, 0.03, 0.02]]}}}}}}
HINT_BODY = {"requestBody": {"required": False, "content": {"application/json": {
    "schema": {"title": "HintRequest", "type": "object", "additionalProperties": False,
               "properties": {"student": {"type": "string"},
                              "number": {"type": "integer", "minimum": 1, "description":
                                         "which hint (1-based); default: the next one"}}},
    "example": {"number": 1}}}}}


def utc(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def summary(course: CourseState, ex: Exercise, now: dt.datetime) -> dict:
    """One exercise in the list."""
    return {"id": ex.id, "version": ex.version, "title": ex.title, "points": ex.points,
            "kind": ex.answer.kind,
            "lesson": ex.lesson, "opens": utc(ex.opens), "closes": utc(ex.closes),
            "open": course.is_open(ex, now), "feedback": course.feedback(ex),
            "hints": len(ex.hints), "max_attempts": ex.max_attempts}


def listing(course: CourseState, instructor: bool = False, lessons: bool = True) -> bytes:
    """The list: in course mode, to anyone but an instructor, without the exercises not
    open yet (their ids, titles and times are the course's to announce); without the
    lessons when not `lessons` (a graded session's students)."""
    now = course.now()
    shown = course.catalogue if instructor else course.catalogue.listed(now, course.course)
    return dumps({"mode": course.settings.mode, "graded_session": course.graded,
                  "student_required": course.course,
                  "sign_in": course.course and bool(course.settings.course_secrets),
                  "exercises": [summary(course, ex, now) for ex in shown
                                if lessons or not ex.lesson]})


def rule(ex: Exercise) -> dict:
    return {"digits": ex.digits} if ex.digits is not None else {"atol": ex.atol,
                                                                 "rtol": ex.rtol}


def hidden_now(course: CourseState, ex: Exercise) -> list[str]:
    """The parts this exercise hides right now (course mode, while it is open)."""
    return sorted(ex.hide) if course.course and ex.is_open(course.now()) else []


def _cost(ex: Exercise, course: CourseState | None = None) -> tuple[int, int]:
    """A case's planned work, from its variables' sizes (an exercise is small). With a
    record attached at least `RECORDED`: the work waits on the database, so it runs in a
    worker thread, never inline on the event loop (admission.INLINE_COST)."""
    floor = RECORDED if course is not None and course.attempts.enforces else 0
    sizes = [math.prod(v.shape or ()) if v.generated else int(np.size(v.value))
             for v in ex.variables]
    parts = 1 + (len(ex.answer.function.cases) if ex.answer.function else 0)
    return (max(floor, parts * 8 * (sum(sizes) + 1)), 0)


class View:
    """A student's case of an exercise, to describe."""

    __slots__ = ("course", "exercise", "student")

    def __init__(self, course: CourseState, exercise: Exercise, student: str) -> None:
        self.course, self.exercise, self.student = course, exercise, student

    @property
    def cost(self) -> tuple[int, int]:
        return _cost(self.exercise, self.course)

    def answer(self) -> bytes:
        ex, course = self.exercise, self.course
        case = build_case(ex, self.student, course.salt, course.settings.limits)
        fn = ex.answer.function
        own = {k: v for k, v in case.variables.items() if fn is None or k != fn.grad_param}
        used = course.attempts.attempts_used(self.student, ex.id) if course.course else None
        out = {**summary(course, ex, course.now()), "text": ex.text,
               "text_nodes": tree(ex.text), "rule": rule(ex), "hide": sorted(ex.hide),
               "hidden": hidden_now(course, ex), "student": self.student,
               "content_hash": ex.content_hash, "mode": course.settings.mode,
               "case": {"expression": ex.expression, "op": ex.op,
                        "variables": {k: encode_array(np.asarray(v)) for k, v in own.items()},
                        "grad_output": None if case.grad_output is None
                        else encode_array(case.grad_output),
                        "seed": "ones" if ex.answer.grad_output is None else "given"},
               "answers": [a.describe() for a in case.answers],
               "function": None if fn is None else {
                   "name": fn.name, "params": list(fn.params), "returns": list(fn.returns),
                   "signature": fn.signature, "grad_param": fn.grad_param,
                   "cases": [{"name": p.name, "inputs": {k: encode_array(np.asarray(v))
                                                         for k, v in p.variables.items()}}
                             for p in case.parts]},
               "attempts": {"used": used if course.attempts.enforces else None,
                            "max": ex.max_attempts, "enforced": course.attempts.enforces}}
        return dumps(out)


def prepare_view(course: CourseState, exercise: Exercise, student: str) -> View:
    return View(course, exercise, student)


class Submission:
    """A submission past every check, to grade."""

    __slots__ = ("answers", "attempts", "course", "exercise", "generation", "key", "reveal",
                 "student")

    def __init__(self, course: CourseState, exercise: Exercise, student: str, answers: dict,
                 key: str | None, reveal: bool, generation: int | None = None,
                 attempts: AttemptStore | None = None) -> None:
        self.course, self.exercise, self.student = course, exercise, student
        self.answers, self.key, self.reveal = answers, key, reveal
        self.generation = generation        # the signed-in token's: checked as it records
        self.attempts = course.attempts if attempts is None else attempts

    @property
    def cost(self) -> tuple[int, int]:
        given = sum(int(np.size(a)) for a in self.answers.values())
        return (_cost(self.exercise, self.course)[0] + 8 * given, 0)

    def answer(self) -> bytes:
        ex, course = self.exercise, self.course
        if self.attempts.enforces and ex.max_attempts is not None and self.key is None:
            used = self.attempts.attempts_used(self.student, ex.id)     # no grading then
            if used >= ex.max_attempts:
                raise no_attempts_left(ex, used)
        kept = kept_answers(self.answers, course.settings) if self.attempts.enforces \
            else None
        case = build_case(ex, self.student, course.salt, course.settings.limits)
        feedback = course.feedback(ex)
        verdicts, missing = grade_case(case, self.answers)
        public = {k: v.public(feedback, self.reveal) for k, v in verdicts.items()}
        passed = sum(v.passed for v in verdicts.values())
        total = len(case.answers)
        score = ex.points * passed / total if total else 0.0
        first_wrong = next((v.pattern.name for v in verdicts.values()
                            if v.pattern is not None), None)
        attempt = Attempt(self.student, ex.id, ex.content_hash,
                          hashlib.sha256(orjson.dumps(public, option=orjson.OPT_SORT_KEYS)
                                         ).hexdigest(), first_wrong, score,
                          passed == total, None, course.now(), self.key, ex.version, kept)
        try:     # Revoked (a stale token generation) is the record's 401 (record/setup.py)
            recorded = self.attempts.record_attempt(attempt, ex.max_attempts,
                                                      self.generation)
        except AttemptsExhausted as exc:
            raise no_attempts_left(ex, exc.used) from None
        except KeyReused as exc:
            raise ApiError(409, "idempotency_key_reused", f"{exc}; send a new key for a"
                           " new attempt", input="idempotency_key") from None
        remaining = (None if ex.max_attempts is None or recorded.used is None
                     else max(0, ex.max_attempts - recorded.used))
        return dumps({"exercise": ex.id, "student": self.student,
                      "content_hash": ex.content_hash, "version": ex.version,
                      "passed": passed == total,
                      "score": score, "points": ex.points, "feedback": feedback,
                      "rule": rule(ex), "answers": public, "missing": missing,
                      "attempt": {"number": recorded.number,
                                  "recorded": recorded.number is not None,
                                  "repeated": recorded.repeated, "max": ex.max_attempts,
                                  "remaining": remaining}})


def kept_answers(answers: dict, settings: Settings) -> str:
    """The answers as the record keeps them for a regrade: JSON, answer key → the array
    as graded (float64; nested lists, non-finite numbers as the wire's strings), which
    the wire reads back to the same bits. Held to the request body's own bound
    (``GLASSLLM_MAX_BODY_BYTES``): 413 before any grading past it."""
    text = orjson.dumps({k: encode_array(v) for k, v in answers.items()})
    if len(text) > settings.max_body_bytes:
        raise ApiError(413, "too_large", f"the answers would be kept in the class record as"
                       f" {len(text)} bytes; the record keeps at most"
                       f" {settings.max_body_bytes} (GLASSLLM_MAX_BODY_BYTES) per attempt",
                       input="answers")
    return text.decode()


def grade_case(case: Case, answers: dict) -> tuple[dict, list[str]]:
    """Each answer of `case` graded (a missing one fails: its verdict is absent); the
    exercise's rule, the case's masks and factors as the patterns' context."""
    ex = case.exercise
    context = {"masks": case.masks, "factors": case.factors}
    verdicts, missing = {}, []
    for spec in case.answers:
        given = answers.get(spec.key)
        if given is None:
            missing.append(spec.key)
            continue
        verdicts[spec.key] = grade(case.expected[spec.key], given, digits=ex.digits,
                                   atol=ex.atol, rtol=ex.rtol, context=context)
    return verdicts, missing


def no_attempts_left(ex: Exercise, used: int) -> ApiError:
    return ApiError(403, "no_attempts_left", f"every attempt at {ex.id!r} is used: {used} of"
                    f" {ex.max_attempts}", input="answers")


def prepare_submit(body: Any, maybe_bools: bool, settings: Settings, course: CourseState,
                   ex: Exercise, student_of: Any, generation: int | None = None,
                   attempts: AttemptStore | None = None, locked: bool = False) -> Submission:
    """Every check of a submission, no compute: the body, the student, the answers' keys
    and sizes, the exercise's window and attempts. `generation`: the signed-in token's,
    for the record to check as it records. `locked`: a student's in a graded session,
    where no expected number is revealed (403 off_in_graded_session)."""
    read(body, SUBMIT)
    student = student_of(body.get("student"))
    if course.course and ex.closes is not None and course.now() >= ex.closes:
        raise ApiError(403, "exercise_closed", f"exercise {ex.id!r} closed at"
                       f" {utc(ex.closes)}", input="id")
    reveal = body.get("reveal", False)
    if not isinstance(reveal, bool):
        raise ApiError(422, "invalid_request", "'reveal' must be true or false", input="reveal")
    if reveal and locked:
        raise ApiError(403, "off_in_graded_session", "the expected numbers are not revealed"
                       " during a graded session (GLASSLLM_GRADED_SESSION=1): submit"
                       " without reveal", input="reveal")
    if reveal and "expected" in hidden_now(course, ex):
        raise ApiError(403, "hidden_by_exercise", f"exercise {ex.id!r} hides its expected"
                       " numbers while it is open", input="reveal", exercise=ex.id,
                       part="expected")
    key = body.get("idempotency_key")
    if key is not None and not (isinstance(key, str) and 1 <= len(key) <= 128
                                and key.isprintable()):
        raise ApiError(422, "invalid_request", "'idempotency_key' must be 1 to 128"
                       " printable characters", input="idempotency_key")
    given = body["answers"]
    case_keys = answer_keys(course, ex)
    if not isinstance(given, dict) or not given:
        raise ApiError(422, "invalid_request", "'answers' must be an object: answer key →"
                       " array, with at least one of: " + ", ".join(case_keys),
                       input="answers")
    limit = settings.limits.max_array_elements
    answers = {}
    for name, value in given.items():
        if name not in case_keys:
            raise ApiError(422, "invalid_input", f"answers names {str(name)[:80]!r}, which"
                           f" {ex.id} does not ask for; it asks for: " + ", ".join(case_keys),
                           input=f"answers.{str(name)[:80]}")
        answers[name] = coerce("tensor", f"answers.{name}", value, maybe_bools=maybe_bools,
                               max_elements=limit)
    check_answer(4 * sum(int(np.size(a)) for a in answers.values()), settings,
                 input="answers", what="the answers, their digits and verdicts")
    return Submission(course, ex, student, answers, key, reveal, generation, attempts)


def answer_keys(course: CourseState, ex: Exercise) -> list[str]:
    """The keys a submission may give: the same for every student (their shapes may not)."""
    probe = build_case(ex, "check", course.salt, course.settings.limits)
    return [a.key for a in probe.answers]


def hint(course: CourseState, ex: Exercise, student: str, body: Any,
         attempts: AttemptStore | None = None) -> bytes:
    """Hint `number` (1-based; default the next one). With a record attached they come in
    order and each is recorded; without one any hint is given by number."""
    body = {} if body is None else read(body, HINT)
    store = course.attempts if attempts is None else attempts
    number = body.get("number")
    used = store.hints_used(student, ex.id) if store.enforces else 0
    if number is None:
        number = used + 1
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ApiError(422, "invalid_request", "'number' must be an integer from 1",
                       input="number")
    if not ex.hints or number > len(ex.hints):
        raise ApiError(404, "no_such_hint", f"exercise {ex.id!r} has {len(ex.hints)}"
                       f" hint{'s' * (len(ex.hints) != 1)}", input="number")
    if store.enforces:
        if number > used + 1:
            raise ApiError(409, "hint_out_of_order", f"reveal hint {used + 1} first; hints"
                           " come one at a time", input="number")
        if number == used + 1:
            store.record_hint(student, ex.id, number)
    text = ex.hints[number - 1]
    return dumps({"exercise": ex.id, "student": student, "number": number,
                  "of": len(ex.hints), "text": text, "text_nodes": tree(text),
                  "recorded": store.enforces})
