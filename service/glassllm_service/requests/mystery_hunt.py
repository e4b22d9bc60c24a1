"""Mystery mode over HTTP (docs/mystery.md): the mysteries, one for a student (never its
bug), an evaluation with the student's bug switched on for that one request, and a proof
graded.

The bug of a request is recomputed from the course salt, the mystery file and the
student id (`glassllm.course.zoo.mystery.bug_for`), so every worker and replica agrees
and nothing is kept between requests; it reaches the evaluator as its ``rules`` for that
call only, never as a change to the registry.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from glassllm.course import Hidden
from glassllm.course.zoo import mystery as zoo_mystery
from glassllm.course.zoo import rules_for
from glassllm.sandbox import expr
from glassllm.sandbox.expr import ExprError, computation
from glassllm_service.course_state import CourseState, Uses
from glassllm_service.http_errors import ApiError
from glassllm_service.requests import expression, public_cases
from glassllm_service.settings import Settings

SEND_PROOF = '{"node": 3, "variables": {...}}'
PROOF_BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": {"type": "object", "required": ["node"], "additionalProperties": False,
               "properties": {
                   "node": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
                            "description": "the node whose backward is wrong: its id in the"
                                           " case's graph, or its source text"},
                   "variables": {"type": "object", "description":
                                 "the input that exposes it: the case's variables, each"
                                 " replaced where given"},
                   "student": {"type": "string"}}},
    "example": {"node": 5, "variables": {}}}}}}


@functools.cache
def mysteries() -> dict[str, zoo_mystery.Mystery]:
    """The shipped mysteries, read and checked once per process."""
    return {m.id: m for m in zoo_mystery.load_dir()}


def get(mystery_id: str) -> zoo_mystery.Mystery:
    found = mysteries().get(mystery_id)
    if found is None:
        raise ApiError(404, "unknown_mystery", f"no mystery {mystery_id[:64]!r}; GET"
                       " /api/v1/mysteries lists them", input="mystery_id")
    return found


def view(mystery_id: str) -> bytes:
    return orjson.dumps(get(mystery_id).view())


def listing() -> bytes:
    return orjson.dumps({"mysteries": [{"id": m.id, "title": m.title, "points": m.points}
                                       for m in mysteries().values()]})


def prepare_eval(mystery: zoo_mystery.Mystery, student: str, salt: str):
    """eval's prepare with the student's bug as the evaluation's rules."""
    rules = rules_for(zoo_mystery.bug_for(mystery, student, salt).id)

    def prepare(body: Any, maybe_bools: bool, settings: Settings) -> expression.Evaluation:
        return expression.prepare(body, maybe_bools, settings, rules=rules)
    return prepare


class Proof:
    """A proof past the envelope: graded in a compute slot (two Taylor tests of the case)."""

    def __init__(self, mystery: zoo_mystery.Mystery, student: str, salt: str, body: dict,
                 settings: Settings) -> None:
        self.mystery, self.student, self.salt, self.body = mystery, student, salt, body
        self.limits = settings.limits
        try:
            given = zoo_mystery.proof_variables(mystery, body.get("variables"))
        except ValueError as exc:
            raise ApiError(422, "invalid_proof", str(exc), input="variables") from None
        # every refusal of the input before any compute, and the cost of one Taylor test
        # of the case at it, planned: the proof runs two (under the bug, and without)
        self.prepared = expr.prepare(mystery.expression, given, check=zoo_mystery.TAYLOR,
                                     limits=settings.limits)
        planned = self.prepared.cost
        self.cost = (2 * planned[0], 2 * planned[1])

    def hide(self, course: CourseState, hidden: Hidden) -> None:
        """Held to what the mystery's eval is held to: its Taylor tests compute the case's
        gradients, so numbers the student chose (a variable replaced) are refused (403)
        while an open exercise hides an op the case runs; the case's own numbers are
        public and stay served."""
        p = self.prepared
        err = course.refusal(Uses(computation.runs(p), check=True,
                                  chosen=public_cases.chosen(p)), hidden)
        if err is not None:
            raise err

    def answer(self) -> bytes:
        try:
            result = zoo_mystery.grade(self.mystery, self.student, self.body["node"],
                                       self.body.get("variables"), self.salt, self.limits)
        except ExprError:
            raise
        except ValueError as exc:
            field = str(exc).split(":")[0]
            raise ApiError(422, "invalid_proof", str(exc), input=field) from None
        return orjson.dumps({"mystery": self.mystery.id, **result.as_dict()})


def prepare_proof(mystery: zoo_mystery.Mystery, who: Any, salt: str):
    def prepare(body: Any, maybe_bools: bool, settings: Settings) -> Proof:
        if not isinstance(body, dict) or "node" not in body \
                or set(body) - {"node", "variables", "student"}:
            raise ApiError(422, "invalid_proof", 'the body must be {"node": id or text,'
                           ' "variables": {...}}', input="body")
        return Proof(mystery, who(body.get("student")), salt, body, settings)
    return prepare
