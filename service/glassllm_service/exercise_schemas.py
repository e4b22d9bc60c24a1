"""The exercise routes' answers, for OpenAPI (docs/exercises.md says what each field means).

The routes write their JSON themselves (`glassllm_service.requests.submission`); these
models document it, as `glassllm_service.schemas` does for the other routes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ExerciseSummary(BaseModel):
    id: str
    version: int = Field(description="with the id, the seed of each student's numbers: a"
                                     " new version, new numbers for everyone")
    title: str
    points: float
    kind: str = Field(description="what the student gives: value, grads or function")
    lesson: bool = Field(description="a lesson: shown openly, with notes")
    opens: str | None = Field(description="UTC, ISO 8601; null: always")
    closes: str | None
    open: bool = Field(description="open now (practice mode: always)")
    feedback: str = Field(description="digits+pattern, pattern or pass/fail")
    hints: int = Field(description="how many hints it has")
    max_attempts: int | None


class ExerciseList(BaseModel):
    mode: str = Field(description="practice or course")
    graded_session: bool
    student_required: bool = Field(description="course mode: every exercise route needs"
                                               " the student id")
    sign_in: bool = Field(description="course mode with course secrets: each student signs"
                                      " in with their own token (POST /api/v1/session)")
    exercises: list[ExerciseSummary] = Field(description="course mode: none before it"
                                                         " opens, but to an instructor")


class AnswerInfo(BaseModel):
    key: str = Field(description="its key in a submission's answers")
    shape: list[int]
    case: str = Field(description="'case', or a function exercise's case name")
    of: str = Field(description="'value', the variable whose gradient it is, or a return")


class ExerciseView(ExerciseSummary):
    text: str = Field(description="Markdown")
    text_nodes: list[Any] = Field(description="the text as nested [tag, attrs, ...children]"
                                              " lists (no HTML): what the page shows")
    rule: dict[str, Any] = Field(description="{digits} or {atol, rtol}")
    hide: list[str] = Field(description="what the exercise hides while open (course mode)")
    hidden: list[str] = Field(description="what it hides right now")
    student: str
    content_hash: str = Field(description="sha256 of the exercise file")
    mode: str
    case: dict[str, Any] = Field(description="expression, op, variables (the student's own"
                                             " numbers), grad_output")
    answers: list[AnswerInfo]
    function: dict[str, Any] | None = Field(description="a function exercise: name, params,"
                                                        " returns, signature, cases")
    attempts: dict[str, Any] = Field(description="used (null unless recorded), max, enforced")


class SubmitResult(BaseModel):
    exercise: str
    student: str
    content_hash: str
    version: int = Field(description="the exercise's version graded (and recorded)")
    passed: bool = Field(description="every answer given and right")
    score: float = Field(description="points × the share of answers right")
    points: float
    feedback: str
    rule: dict[str, Any]
    answers: dict[str, dict[str, Any]] = Field(
        description="per answer key: passed, rule, and by feedback level agree, digits,"
                    " pattern {name, says, ...}; expected only with reveal")
    missing: list[str] = Field(description="answer keys not given (they count as wrong)")
    attempt: dict[str, Any] = Field(description="number, recorded, repeated, max, remaining")


class HintResult(BaseModel):
    exercise: str
    student: str
    number: int
    of: int
    text: str
    text_nodes: list[Any]
    recorded: bool
