"""Lessons: prepared cases with two or three sentences on what to notice.

Each lesson is an exercise file of the course's format (docs/exercises.md), shown openly:
``glassllm/course/lessons/*.toml``, in file order. Here each becomes a ready
``POST /api/v1/eval`` request and its notes, the shape ``GET /api/v1/lessons`` has always
served. Every note is a sentence for the student *and* the claims that make it true, so
``tests/library/test_lessons.py`` checks each sentence against the numbers the lesson
produces — the page shows the same text.

A claim reads one array of the result: ``"value"``, ``"grads.<variable>"``, a node by its
source text, ``"node:<text>.value"`` / ``"node:<text>.grad"``, or one path of a shared node,
``"paths:<node text>|<consumer text>.grad"`` (``.share``, ``.norm``): what the op written
`consumer text` hands the node; ``"at"`` picks an element. A lesson with a claim on a path
asks for ``paths`` in its request (the page then labels each shared edge with its share).
Kinds:
  ``approx``   the array (or element) equals ``expect`` within 1e-9 (relative and absolute)
  ``zero``     every element is exactly 0 (where ``where`` is true, when given)
  ``nonzero``  no element is 0 (where ``where`` is true, when given)
  ``sum``      the sum along ``axis`` equals ``expect`` (within 1e-9)
  ``dot``      the dot product with the array at ``with`` equals ``expect`` (within 1e-9)
  ``norm``     the Euclidean norm equals ``expect`` (within 1e-9)
  ``none``     there is no array: a constant gets no gradient
  ``adds_up``  the paths of the node ``"paths:<node text>"`` add up to its gradient (within
               2(k − 1)·2⁻⁵³·Σ|part|: k arrays added in another order)
Served by ``GET /api/v1/lessons``.
"""

from __future__ import annotations

import functools

from glassllm.course.exercise import LESSONS_DIR, Exercise, load_dir
from glassllm.sandbox import expr
from glassllm.sandbox.expr import computation

__all__ = ["LESSONS", "as_lesson", "lesson_runs"]


def as_lesson(exercise: Exercise) -> dict:
    """A lesson exercise as ``GET /api/v1/lessons`` serves it: its id, title, the eval
    request of its fixed case, and its notes."""
    variables = {v.name: {"value": v.value} for v in exercise.variables}
    request: dict = {"expression": exercise.expression, "variables": variables}
    if exercise.answer.grad_output is not None:
        request["grad_output"] = exercise.answer.grad_output.value
    if any(c["path"].startswith("paths:") for n in exercise.notes for c in n.claims):
        request["paths"] = True          # its sentences are about where a gradient comes from
    return {"id": exercise.id, "title": exercise.title, "request": request,
            "notes": [{"text": n.text, "claims": [dict(c) for c in n.claims]}
                      for n in exercise.notes]}


LESSONS: list[dict] = [as_lesson(ex) for ex in load_dir(LESSONS_DIR)]


@functools.cache
def lesson_runs() -> dict[str, frozenset[str]]:
    """Lesson id → the ops its request runs (`glassllm.sandbox.expr.computation.runs`):
    what a course's hiding reads to leave out the notes that speak of a hidden rule."""
    return {lesson["id"]: frozenset(computation.runs(expr.prepare(**lesson["request"])))
            for lesson in LESSONS}
